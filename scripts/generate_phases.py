"""CPU seconds of each phase of one `generate` run (one worker, in this process).

    python scripts/generate_phases.py [--config kernelstrain] [--episodes 300] [--seed 0] [--store]

Wraps the functions each phase runs in and sums their CPU time (time.process_time), each
phase's own time apart from the phases nested inside it (the engine's time is not counted
in the rows that hold its episode): the held-out solutions' search, the held-out rows,
the boilerplate and the contamination set-up, the engine (build_episode), the rows and their
texts (the layout's rows less the engine), their JSON encoding, the per-episode QA figures,
the per-episode contamination measure, the writes, the end of the run (held-out files,
contamination figures, QA reports, card), and whatever else the run spends ("other": the
plan, the stats, checkpoints). The wrappers cost a few microseconds a call, so the sum is
within a few percent of the unwrapped run; a profiler (cProfile) charges far more to code
that makes many small calls (the engine), so this is the measure of where the time goes.
The held-out solutions' store is off unless --store (a first run's cost).
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPENT: dict = {}
_STACK: list = []


def timed(phase: str, fn):
    """fn, its CPU time charged to `phase` less the time of phases called inside it."""
    def wrapper(*args, **kwargs):
        _STACK.append(0.0)
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.process_time() - t
            inner = _STACK.pop()
            SPENT[phase] = SPENT.get(phase, 0.0) + took - inner
            if _STACK:
                _STACK[-1] += took
    return wrapper


def patch(owner, name: str, phase: str) -> None:
    setattr(owner, name, timed(phase, getattr(owner, name)))


def instrument() -> None:
    from kernelstrain import contamination, episodes, generation, layouts, sessions, writers
    patch(contamination, "_solution", "held-out solutions' search")
    patch(generation, "held_out_lines", "held-out rows")
    patch(generation, "boilerplate", "boilerplate")
    patch(generation, "contamination_scan", "contamination set-up")
    patch(episodes, "build_episode", "engine (build_episode)")
    patch(sessions, "build_episode", "engine (build_episode)")
    for layout in layouts.LAYOUTS.values():
        object.__setattr__(layout, "rows", timed("rows and texts", layout.rows))
        if layout.judge:
            object.__setattr__(layout, "judge", timed("per-episode QA", layout.judge))
    patch(generation, "dumps", "JSON encoding")
    patch(contamination.Incremental, "part", "per-episode contamination")
    patch(writers.StreamFile, "write_block", "writing")
    for name in ("write_holdout", "with_contamination", "finish"):
        patch(generation, name, f"end: {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", action="store_true", help="keep the held-out solutions' store (default: off)")
    a = ap.parse_args()
    if not a.store:
        os.environ["KERNELSTRAIN_SOLUTIONS"] = "off"
    instrument()
    from kernelstrain.generation import generate
    from kernelstrain.profiles import load_profile
    with tempfile.TemporaryDirectory(prefix="phases-") as tmp:
        t = time.process_time()
        generate(load_profile(a.config), a.seed, Path(tmp) / "out", a.episodes, 1, progress=False)
        total = time.process_time() - t
    SPENT["other"] = total - sum(SPENT.values())
    print(f"{a.config}, {a.episodes} episodes, seed {a.seed}, 1 worker: {total:.2f} s CPU")
    for phase, s in sorted(SPENT.items(), key=lambda kv: -kv[1]):
        print(f"  {phase:32} {s:7.2f} s  {100 * s / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
