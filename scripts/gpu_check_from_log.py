"""Rebuild a gpu-check report from its printed progress when the run was cut before it wrote --report: the cases
are sampled again from the same dataset (same --sample and seed: the same ids), each case's verdict and times read
from the [check], [time] and [repeat] lines (times printed to 0.1 us), the simulated times computed here.

    python3 scripts/gpu_check_from_log.py DATASET LOG --sample 250 --gpu H100 --report OUT.json

Run it with the model the check was frozen on (the carried tree) for the check's own figures.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck import _sim_ms, as_episode, rows_file  # noqa: E402
from kernelstrain.gpucheck import report as report_mod  # noqa: E402
from kernelstrain.gpucheck.sample import sample_cases  # noqa: E402
from kernelstrain.reading import read_jsonl  # noqa: E402
from kernelstrain.writers import record_paths  # noqa: E402

LINE = re.compile(r"^\[(check|alone|time|repeat) \d+/\d+\] (ok|FAIL)\s+(\S+) .*? rel_l2=(\S+) nbad=(\d+)(?: ([\d.]+) ms)?")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("log", type=Path)
    ap.add_argument("--sample", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpu", default="H100")
    ap.add_argument("--report", type=Path, required=True)
    a = ap.parse_args(argv)
    episodes = [as_episode(e) for p in record_paths(rows_file(a.dataset)) for _, e in read_jsonl(p)]
    cases = {c["id"]: c for c in sample_cases(episodes, a.sample, a.seed, sim_gpu=a.gpu)}
    seen = {}
    for line in a.log.read_text().splitlines():
        m = LINE.match(line)
        if not m or m.group(3) not in cases:
            continue
        kind, verdict, cid, rel, nbad, ms = m.groups()
        row = seen.setdefault(cid, {k: cases[cid][k] for k in ("id", "episode", "step", "module", "variant", "params",
                                                              "dtype", "shape", "at", "label")})
        if kind in ("check", "alone"):
            row.update(ok=verdict == "ok", error=None if verdict == "ok" else "wrong result (from the log)",
                       rel_l2_err=float(rel), nbad=int(nbad))
        elif kind == "time" and verdict == "ok" and ms:
            row["time_ms"] = float(ms)
        elif kind == "repeat" and verdict == "ok" and ms:
            row["time_ms_2"] = float(ms)
    rows = list(seen.values())
    for r in rows:
        r["sim_ms"] = _sim_ms(r, a.gpu) if r.get("time_ms") else None
    summary = report_mod.summarize(rows)
    print(report_mod.render(summary, f"{a.gpu} (rebuilt from {a.log.name}: {len(rows)} of {len(cases)} cases)"))
    a.report.write_text(json.dumps({"device": f"{a.gpu} (rebuilt from the log)", "sim_gpu": a.gpu, "seed": a.seed,
                                    "sample": a.sample, "summary": summary, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
