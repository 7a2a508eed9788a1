"""CPU seconds of each phase of one `validate` run (one worker, in this process).

    python scripts/validate_phases.py DATA

The counterpart of scripts/generate_phases.py (same wrappers: each phase's own time apart from
the phases nested inside it) for validate, to set beside generate's phases on the same dataset:
the held-out solutions' search, the boilerplate and the contamination set-up, reading the files
(JSON decoding), the row checks (check_episode: each step re-rendered and re-simulated), the
plan's rebuild (the engine, the chat rows), the row comparisons, the per-episode QA and
contamination, the stats, the derived files (card, qa.json) and the held-out rows. The held-out
solutions' store is off unless --store (a first run's cost).
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from generate_phases import SPENT, patch, report, timed  # noqa: E402


def instrument() -> None:
    import json
    from kernelstrain import (contamination, dataset, engine, episodes, validate, validate_ahead, validate_derived,
                              validate_episodes)
    patch(contamination, "_solution", "held-out solutions' search")
    patch(contamination, "boilerplate", "boilerplate")
    patch(contamination.Targets, "__init__", "contamination set-up")
    patch(validate_derived, "build_episode", "engine (build_episode)")
    patch(engine.Episode, "_over_limit", "engine: limit scans")
    patch(episodes, "chat_rows", "chat rows rebuilt")
    patch(validate_episodes, "chat_rows", "chat rows rebuilt")
    patch(validate, "check_episode", "row checks (check_episode)")
    patch(validate_episodes, "check_episode", "row checks (check_episode)")
    patch(validate_ahead, "check_episode", "row checks (check_episode)")
    patch(validate_episodes, "episode_qa", "per-episode QA")
    patch(validate_ahead.StreamedMeasure, "add_row", "per-episode contamination")
    patch(validate_episodes, "check_multiturn", "row comparisons")
    patch(validate_episodes, "check_steps", "row comparisons")
    patch(validate_episodes, "identical", "row comparisons")
    patch(validate_derived, "rebuild", "plan rebuild (rest: row, JSON round trip)")
    patch(dataset, "_check_holdout", "held-out rows")
    patch(dataset, "_check_stats", "stats")
    patch(dataset, "check_derived_files", "derived files (card, qa.json)")
    patch(dataset, "_summary", "file digests")
    patch(dataset, "check_holdout_splits", "contamination figures")

    class TimedJSON:        # validate.rows' json.loads: the files' decoding (the rest of json as it is)
        loads = staticmethod(timed("reading (JSON decoding)", json.loads))

        def __getattr__(self, name):
            return getattr(json, name)
    validate.json = TimedJSON()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--store", action="store_true", help="keep the held-out solutions' store (default: off)")
    a = ap.parse_args()
    if not a.store:
        os.environ["KERNELSTRAIN_SOLUTIONS"] = "off"
    instrument()
    from kernelstrain.dataset import validate
    t, wall = time.process_time(), time.perf_counter()
    found = validate(a.data, workers=1)
    total, wall = time.process_time() - t, time.perf_counter() - wall
    report(f"validate {a.data}, 1 worker, {found.total} problems", total, wall, width=42)
    return 0


if __name__ == "__main__":
    sys.exit(main())
