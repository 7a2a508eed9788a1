"""Build roomC's persistent_prefetch rungs (kernelstrain/ops/persistent_rows.py) with the real compilers: every
thread count x rows a block x blocks an SM at each module's shapes' D on sm_90a (and sm_80 / sm_120a / gfx942
where the module runs there), each bug at two configs; prints ptxas's registers and spill bytes beside the launch
model's registers, and a line for every failure or unmodelled spill.

    KERNELSTRAIN_DEVICE_UNCHECKED=1 python3 scripts/roomC_build.py [MODULE ...] [--quick]
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

os.environ["KERNELSTRAIN_DEVICE_UNCHECKED"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import compile_cuda, compile_hip, find_hip_compiler  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import modelled_launch, simulate, writable  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402

MODULES = ("rmsnorm_cuda", "add_rmsnorm_cuda", "layernorm_cuda", "fp8_quant_cuda")
ARCH_GPU = {"sm_90a": "H100", "sm_80": "A100", "sm_120a": "RTX5090", "gfx942": "MI300X"}
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def build(m, v, params, task, bug=None):
    src = m.render(v, params, task, bug) if bug else m.render(v, params, task)
    if task.is_hip:
        return compile_hip(src, task.gpu.arch, f"{m.op}_kernel")
    return compile_cuda(src, task.gpu.arch, f"{m.op}_kernel")


def main(argv: list) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")] or list(MODULES)
    failures = builds = 0
    for name in names:
        m = REGISTRY[name]
        v = m.variant("persistent_prefetch")
        for arch, gpu in ARCH_GPU.items():
            if arch == "gfx942" and not find_hip_compiler():
                continue
            if not m.supports(task_gpu := make_task(m, gpu, "bf16", m.shapes[0]).gpu, "bf16") or v.needs - task_gpu.features:
                continue
            for d in sorted({s["D"] for s in m.shapes} if arch == "sm_90a" or not quick else {4096}):
                task = make_task(m, gpu, "bf16", {"T": 4096, "D": d})
                grid = [p for p in param_grid(v) if writable(m, v, p, task) and simulate(m, v, p, task).ok]
                if quick or arch != "sm_90a":       # one blocks_per_sm a (threads, rows) off the main target
                    grid = [p for p in grid if p["blocks_per_sm"] == 2]
                if quick:                           # and one row a CTA (rows only add CTA-wide sub-rows)
                    grid = [p for p in grid if p["rows_per_block"] == 1]
                for i, p in enumerate(grid):
                    for bug in [None] + (list(v.bugs) if i in (0, len(grid) - 1) else []):
                        r = build(m, v, p, task, bug)
                        builds += 1
                        spill = SPILL.search(r.log or "")
                        stores = int(spill.group(1)) if spill else 0
                        model = modelled_launch(m, v, p, task)     # ptxas's cap under __launch_bounds__ included
                        flag = "" if r.ok else "FAIL "
                        # a spill the model does not hold (past 255 registers, or the bound's cap: traffic > 1)
                        if r.ok and stores and model.traffic <= 1.0:
                            flag = "UNMODELLED SPILL "
                        failures += bool(flag)
                        if flag or bug is None:
                            print(f"{flag}{name} {arch} D={d} {p} bug={bug} regs {r.regs} (model {model.regs}) "
                                  f"spill {stores} B smem {r.smem_bytes}" + ("" if r.ok else "\n" + r.log[-600:]))
    print(f"{builds} builds, {failures} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
