"""Measure the modules no H200 fit file holds yet, and make the measurement a fit file (issue 30, item 1).

    python3 scripts/h200_unfitted.py prepare data/kigrid       # on the CPU: the grid, the sample, the plan
    bash scripts/h200_unfitted.sh data/kigrid STEPS build      # on the H200 (`run`, carry ["data/kigrid"])
    bash scripts/h200_unfitted.sh data/kigrid STEPS run        # same warm machine: $OUT/h200_gpucheck_kigrid.json
    cp .../h200_gpucheck_kigrid.json measurements/  # back here; add it to calibration.fit.FIT_FILES

`prepare` writes GRID/episodes.jsonl with scripts/shape_grid.py --params --unfitted (every module without
fit rows: its first dtype, 2 menu shapes that gpu-check runs at the task shape, every variant at its
defaults and each parameter moved one at a time) and the same grid of 4 modules at rows that are not
16-byte multiples and at their aligned twins (MISALIGNED), then prints gpu-check's sample of it (cases, distinct
CUDA sources to build) and the device time it expects: the machine's start, the builds on 16 cores (a CPU
dry run of `gpu-check --compile-only` on 2 of the modules: 20 CUDA sources in 120 s on 2 jobs, ~12 s a
source) and the passes at the rate of the last grid run (h200_gpucheck_pgrid.json: 712 candidates through
correctness, timing and repeat in 183 s).

`wrap REPORT NAME [--out DIR]` turns gpu-check's --report JSON into the calibration file format the fit
reads (calibration.fit.read_measurement: a `format` line, `meta`, `rows`); the run stage calls it into $OUT. Add NAME
to calibration.fit.FIT_FILES, then run scripts/calibration_cv.py (before/after) and
scripts/refit_calibration.py as for every fit file.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck.sample import sample_cases  # noqa: E402

FORMAT = "kernelstrain/h200-gpucheck@1"
START_S = 180               # a fresh one-GPU machine, from the call to the command's start (observed 2-3 min)
BUILD_S = 120 * 2 / 20      # seconds of one CUDA source's nvcc on one core (the CPU dry run: 20 sources, 2 jobs, 120 s)
PASS_S = 183 / 712          # seconds a case takes through correctness, timing and repeat (pgrid)


# Rows that are not 16-byte multiples beside their aligned twins (issue 30: a measured cuBLAS takes 63 us at
# M=1000,N=3000,K=777): what feasibility.py keeps off such rows and sim.narrowed's one-element Triton loads.
MISALIGNED = ("gemm_fp16_triton@M=1000,N=3000,K=777", "gemm_fp16_triton@M=1000,N=3000,K=776",
              "gemm_fp16_cuda@M=1000,N=3000,K=777", "gemm_fp16_cuda@M=1000,N=3000,K=776",
              "rmsnorm_triton@T=4096,D=4095", "rmsnorm_triton@T=4096,D=4096",
              "softmax_triton@R=4096,C=31999", "softmax_triton@R=4096,C=32000")


def prepare(grid: Path) -> int:
    script = [sys.executable, str(ROOT / "scripts" / "shape_grid.py"), "--params"]
    subprocess.run(script + ["--unfitted", str(grid)], check=True)
    subprocess.run(script + [str(grid / "misaligned"), *MISALIGNED], check=True)
    with (grid / "episodes.jsonl").open("a") as f:            # one dataset: one gpu-check run
        f.write((grid / "misaligned" / "episodes.jsonl").read_text())
    episodes = [json.loads(line) for line in (grid / "episodes.jsonl").read_text().splitlines()]
    steps = sum(len(e["steps"]) for e in episodes)
    cases = sample_cases(episodes, steps, 0)
    sources = len({c["code"] for c in cases if c["impl"] == "cuda"})
    build_s, pass_s = sources * BUILD_S / 16, len(cases) * PASS_S
    modules = sorted({e["module"] for e in episodes})
    print(f"\n{len(modules)} modules, {len(episodes)} episodes, {steps} steps; gpu-check --sample {steps} takes "
          f"{len(cases)} cases ({sources} distinct CUDA sources)")
    print(f"expected device time: start ~{START_S} s + builds ~{build_s:.0f} s + passes ~{pass_s:.0f} s "
          f"= ~{(START_S + build_s + pass_s) / 60:.1f} min, in two commands on one warm machine:")
    for stage in ("build", "run"):
        print(f"  bash scripts/h200_unfitted.sh {grid} {steps} {stage}")
    return 0


def wrap(report: Path, name: str, note: str, folder: Path = ROOT / "measurements") -> int:
    data = json.loads(report.read_text())
    modules = sorted({r["module"] for r in data["rows"]})
    out = {"format": FORMAT,
           "meta": {"device": data.get("device"), "sim_gpu": data.get("sim_gpu", "H200"), "dataset": f"scripts/shape_grid.py --params --unfitted: {len(modules)} "
                    f"modules without fit rows ({' '.join(modules)})",
                    "method": f"kernelstrain gpu-check --sample {data.get('sample')} (scripts/h200_unfitted.sh); {note}",
                    "sim_ms": f"kernelstrain.sim on the {data.get('sim_gpu', 'H200')} profile (the GPU that timed them: the fit "
                              "builds these rows there, calibration.fit.timed_rows) with the fit shipped at the time",
                    "use": "fitted once named in calibration.fit.FIT_FILES", "summary": data.get("summary")},
           "rows": data["rows"]}
    path = folder / name
    if path.exists():
        print(f"h200_unfitted: {path} exists; not overwritten", file=sys.stderr)
        return 2
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}: {len(data['rows'])} rows of {len(modules)} modules; next: add {name!r} to "
          "calibration.fit.FIT_FILES, python3 scripts/calibration_cv.py (before/after), python3 scripts/refit_calibration.py")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("grid", type=Path)
    w = sub.add_parser("wrap")
    w.add_argument("report", type=Path)
    w.add_argument("name", help="file name under measurements/, e.g. h200_gpucheck_kigrid.json")
    w.add_argument("--note", default="", help="what else to record in meta.method (date, budget, build time)")
    w.add_argument("--out", type=Path, default=ROOT / "measurements",
                   help="folder to write NAME in (default: the source tree's measurements/, which the fit reads)")
    a = ap.parse_args(argv)
    return prepare(a.grid) if a.command == "prepare" else wrap(a.report, a.name, a.note, a.out)


if __name__ == "__main__":
    sys.exit(main())
