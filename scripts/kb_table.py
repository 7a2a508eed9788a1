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

from kb_eval import table  # noqa: E402


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
    for r in sols.values():
        for base in ("eager", "compile"):
            r.pop(f"speedup_vs_{base}", None)
            b = (r.get("eager_ms") if base == "eager" else None) or refs.get(r["problem_id"], {}).get(f"{base}_ms")
            if r.get("correct") and r.get("custom_ms") and b:
                r[f"speedup_vs_{base}"] = b / r["custom_ms"]
    return refs, list(sols.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out")
    a = ap.parse_args()
    refs, sols = combine(a.files)
    if a.out:
        with open(a.out, "w") as fh:
            for r in sols:
                fh.write(json.dumps(r) + "\n")
    print(f"{len(sols)} solutions, {len(refs)} problems with reference timings\n")
    print(table(sols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
