"""The KernelBench-style table of several kb_eval.py result files combined (calls cut by their
budget, re-runs): a solution's row from the last file that ran it, reference timings from any
file (a solution's own eager timing first), speedups recomputed.

    python3 scripts/kb_table.py call1.jsonl call2.jsonl ... [--out combined.jsonl]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kb_eval import join_speedups, table, write_rows  # noqa: E402


def combine(paths: list) -> tuple:
    refs, sols = {}, {}
    for n, path in enumerate(paths):
        for line in open(path):
            r = json.loads(line)
            if "skipped" in r:
                continue
            if r.get("kind") == "reference":
                old = refs.setdefault(r["problem_id"], {})
                old.update({k: v for k, v in r.items() if k.endswith("_ms")})
            else:
                sols[r["file"]] = {**r, "call": n + 1}
    join_speedups(list(sols.values()), refs)
    return refs, list(sols.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out")
    a = ap.parse_args()
    refs, sols = combine(a.files)
    if a.out:
        write_rows(a.out, sols)
    print(f"{len(sols)} solutions, {len(refs)} problems with reference timings\n")
    print(table(sols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
