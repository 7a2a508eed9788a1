"""Limit failures per session of a sessions dataset (the engine's feasibility memory, issue 13).

    python3 scripts/limit_failures.py KI [--first N]

Per session: compile errors that overflowed a per-block limit (kernelstrain.limits: shared
memory, threads, registers x threads; slips left out), how many of them repeat a dominated
footprint (the same rung and resource failed before at a demand no larger), and arch
failures on a feature an earlier arch failure already showed missing.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.fields import as_dict  # noqa: E402
from kernelstrain.limits import replay  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402


def session_limits(row: dict) -> tuple[int, int, int, int]:
    """(limit failures, dominated repeats, compile errors, arch repeats) of one session."""
    module = REGISTRY[row["module"]]
    task = make_task(module, row["gpu"], row["dtype"], as_dict(row["shape"]))
    steps = [{**s, "params": as_dict(s["params"])} for s in row["trace"]]
    hits, dominated, arch_again = replay(module, task, steps)
    return hits, dominated, sum(s["status"] == "compile_error" for s in steps), arch_again


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--first", type=int, default=0, help="only the first N sessions (0 = all)")
    args = ap.parse_args(argv)
    per, dom, errs, arch, n = Counter(), 0, 0, 0, 0
    with open(args.data / "sessions.jsonl") as f:
        for n, line in enumerate(f, 1):
            hits, dominated, errors, arch_again = session_limits(json.loads(line))
            per[hits] += 1
            dom, errs, arch = dom + dominated, errs + errors, arch + arch_again
            if n == args.first:
                break
    total = sum(k * v for k, v in per.items())
    print(f"{n} sessions: {errs} compile errors, {total} limit failures ({total / n:.2f} a session, "
          f"max {max(per)}), {sum(v for k, v in per.items() if k >= 10)} sessions with >= 10; "
          f"{dom} repeat a dominated footprint; {arch} arch failures on a feature known missing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
