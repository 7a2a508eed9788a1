"""CPU seconds of each phase of one `generate` run (one worker, in this process).

    python scripts/generate_phases.py [--config kernelstrain] [--episodes 300] [--seed 0] [--store] [--workers 1]

Wraps the functions each phase runs in and sums their CPU time (time.process_time), each
phase's own time apart from the phases nested inside it (the engine's time is not counted
in the rows that hold its episode): the held-out solutions' search, the held-out rows,
the boilerplate and the contamination set-up, the engine (build_episode; its episode set-up,
limit scans (Episode._over_limit) and slips (Episode.with_slip) apart), the rows and their
texts (the layout's rows less the engine), their JSON encoding, the per-episode QA figures,
the per-episode contamination measure, the sessions layout's checks of each session for its
batch QA report (validate_written.judge), the writes, the end of the run (held-out files,
contamination figures, QA reports, card), and whatever else the run spends ("other": the
plan, the stats, checkpoints). The wrappers cost a few microseconds a call, so the sum is
within a few percent of the unwrapped run; a profiler (cProfile) charges far more to code
that makes many small calls (the engine), so this is the measure of where the time goes.
The held-out solutions' store is off unless --store (a first run's cost).
With --workers N > 1 the phases are this (the parent) process's alone: what it does beside the
pool (the held-out rows, the boilerplate and the contamination set-up and hand-over, the scans of
the episodes built before the workers had the matcher, the writes, the end),
the part of a pooled run that the workers do not share; the engine and the per-episode phases
then run in the workers and are not counted, nor is the held-out solutions' search (in the pool).
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
SPAN: dict = {}         # phase -> [wall seconds from the run's start of its first call's start, of its last call's end]
_STACK: list = []
_START = [0.0]          # the run's wall-clock start (time.perf_counter)


def timed(phase: str, fn):
    """fn, its CPU time charged to `phase` less the time of phases called inside it."""
    def wrapper(*args, **kwargs):
        _STACK.append(0.0)
        t = time.process_time()
        SPAN.setdefault(phase, [time.perf_counter() - _START[0], 0.0])
        try:
            return fn(*args, **kwargs)
        finally:
            SPAN[phase][1] = time.perf_counter() - _START[0]
            took = time.process_time() - t
            inner = _STACK.pop()
            SPENT[phase] = SPENT.get(phase, 0.0) + took - inner
            if _STACK:
                _STACK[-1] += took
    return wrapper


def patch(owner, name: str, phase: str) -> None:
    setattr(owner, name, timed(phase, getattr(owner, name)))


def instrument(workers: int = 1) -> None:
    from kernelstrain import contamination, engine, episodes, generation, layouts, sessions, writers
    if workers <= 1:        # with a pool it runs there, and the pool pickles it by name
        patch(contamination, "_solution", "held-out solutions' search")
    patch(generation, "rooms_ahead", "plan: room checks ahead")
    patch(generation, "make_plan", "plan")
    patch(generation, "held_out_lines", "held-out rows")
    patch(generation, "boilerplate", "boilerplate")
    patch(generation, "contamination_scan", "contamination set-up")
    patch(episodes, "build_episode", "engine (build_episode)")
    patch(sessions, "build_episode", "engine (build_episode)")
    # the engine's costliest parts apart (each its own time; "engine (build_episode)" the rest of it)
    patch(engine.Episode, "__init__", "engine: episode set-up")
    patch(engine.Episode, "_over_limit", "engine: limit scans")
    patch(engine.Episode, "with_slip", "engine: slips")
    for layout in layouts.LAYOUTS.values():
        object.__setattr__(layout, "rows", timed("rows and texts", layout.rows))
        if layout.judge:
            object.__setattr__(layout, "judge", timed("per-episode QA", layout.judge))
    patch(generation, "dumps", "JSON encoding")
    patch(contamination.Incremental, "part", "per-episode contamination")
    # with a pool: the parent's merges of the workers' parts and its scans of the episodes built before the
    # workers had the matcher (contamination.Waiting), and the matcher's hand-over to them
    patch(contamination.Incremental, "add", "contamination: merge (and waiting scans)")
    patch(generation, "hand_over", "contamination: matcher hand-over")
    patch(generation, "judge_written", "per-session batch QA checks")     # the sessions layout (validate_written)
    patch(writers.StreamFile, "write_block", "writing")
    for name in ("write_holdout", "with_contamination", "finish"):
        patch(generation, name, f"end: {name}")


def report(title: str, total: float, wall: float, width: int = 32) -> None:
    """Print the run's CPU and wall seconds, then each phase's CPU seconds and share, largest first
    (what no phase counted is `other`), and the wall-clock span from its first call's start to its last
    call's end (seconds from the run's start: with a pool, what the parent does before, beside and after it)."""
    SPENT["other"] = total - sum(SPENT.values())
    print(f"{title}: {total:.2f} s CPU ({wall:.1f} s wall)")
    for phase, s in sorted(SPENT.items(), key=lambda kv: -kv[1]):
        span = SPAN.get(phase)
        when = f"   wall {span[0]:6.2f}-{span[1]:6.2f} s" if span else ""
        print(f"  {phase:{width}} {s:7.2f} s  {100 * s / total:5.1f}%{when}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", action="store_true", help="keep the held-out solutions' store (default: off)")
    ap.add_argument("--workers", type=int, default=1, help="above 1: the parent's phases of a pooled run")
    a = ap.parse_args()
    if not a.store:
        os.environ["KERNELSTRAIN_SOLUTIONS"] = "off"
    instrument(a.workers)
    from kernelstrain.generation import generate
    from kernelstrain.profiles import load_profile
    with tempfile.TemporaryDirectory(prefix="phases-") as tmp:
        t = time.process_time()
        wall = _START[0] = time.perf_counter()
        generate(load_profile(a.config), a.seed, Path(tmp) / "out", a.episodes, a.workers, progress=False)
        total, wall = time.process_time() - t, time.perf_counter() - wall
    who = "1 worker" if a.workers <= 1 else f"{a.workers} workers, the parent process alone"
    report(f"{a.config}, {a.episodes} episodes, seed {a.seed}, {who}", total, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
