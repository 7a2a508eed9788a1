"""Build a rung's new parameter values with the real compiler: every writable configuration of the extended rung
that uses a new value (or `--configs N` of them, spread), at each shape of the module, for each NVIDIA target its
GPUs build for; prints ptxas's registers, spill bytes and static shared memory beside the launch model's, and a
FAIL line for a build error, a spill the model does not carry, or a register count the model misses by more than
16 (what decides the occupancy it prices).

    python3 scripts/roomC_build_values.py moe_scatter_cuda warp_aggregated_fused threads=64,128,256,512,1024
    python3 scripts/roomC_build_values.py conv2d_nhwc_cuda wgmma_ws BM=64,128,256 --gpus H100 --bugs
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.compilers import compile_cuda  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate, writable  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402
from roomC_extend import extended_by  # noqa: E402

SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
GPUS = ("H100", "A100", "RTX5090", "A10")     # sm_90a, sm_80, sm_120a, sm_86


def spill_bytes(log: str) -> int:
    return max((int(a) + int(b) for a, b in SPILL.findall(log)), default=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("rung")
    ap.add_argument("change", nargs="+", help="NAME=V1,V2,...")
    ap.add_argument("--gpus", default=",".join(GPUS))
    ap.add_argument("--configs", type=int, default=12, help="configs a (GPU, shape), spread over the new ones")
    ap.add_argument("--bugs", action="store_true", help="also build each bug at the first new config")
    ap.add_argument("--shapes", type=int, default=0, help="the module's first N shapes only (0: all)")
    args = ap.parse_args(argv)
    m = REGISTRY[args.module]
    v, new = extended_by(m.variant(args.rung), args.change)
    fails = builds = 0
    dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
    for gpu in args.gpus.split(","):
        for shape in m.shapes[:args.shapes or None]:
            task = make_task(m, gpu, dtype, shape)
            if not m.supports(task.gpu, dtype) or v.needs - task.gpu.features:
                continue
            grid = [p for p in param_grid(v) if any(p[k] in vals for k, vals in new.items())
                    and writable(m, v, p, task) and simulate(m, v, p, task).ok]
            step = max(1, len(grid) // args.configs)
            for i, p in enumerate(grid[::step]):
                launch = knobs.launch(m, v, p, task)
                r = compile_cuda(m.render(v, p, task), task.gpu.arch, f"{m.op}_kernel")
                builds += 1
                spill = spill_bytes(r.log)
                bad = not r.ok or spill > 0 or (r.regs is not None and abs(r.regs - launch.regs) > 16)
                fails += bool(bad)
                print(f"{'FAIL ' if bad else ''}{gpu:8s} {shape} {p}: ptxas {r.regs} regs, spill {spill} B, "
                      f"smem {r.smem_bytes}; model {launch.regs} regs, smem {launch.smem_bytes}"
                      + ("" if r.ok else f"\n    {r.error_class}: {r.log[-400:]}"))
                if args.bugs and i == 0:
                    for bug in v.bugs_for(dtype, p):
                        rb = compile_cuda(m.render(v, p, task, bug), task.gpu.arch, f"{m.op}_kernel")
                        builds += 1
                        fails += not rb.ok
                        print(f"{'' if rb.ok else 'FAIL '}    bug {bug}: {'builds' if rb.ok else rb.log[-300:]}")
    print(f"{builds} builds, {fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
