"""Build topk_cuda's pivot_count rung (kernelstrain/ops/sampling/_topk_bisect.py, off the menus) with the real
compilers: every threads x CAP on sm_90a (H100) and sm_80 (A100), and gfx942 where a HIP compiler is here, plus CAP
128 (the device plan's value that forces the fallback search); each bug at the smallest and largest config, whose
render must differ from the clean one. Prints ptxas's registers, stack / spill bytes and static smem beside the launch
model's registers and smem, and a line for every failure, spill past 8 bytes, or smem the model misses by > 1 KB.

    python3 scripts/roomC_topk_build.py
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
from kernelstrain.sim import modelled_launch  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores")


def main() -> int:
    m = REGISTRY["topk_cuda"]
    v = m.variant("pivot_count")
    problems = builds = 0
    gpus = ["H100", "A100"] + (["MI300X"] if find_hip_compiler() else [])
    for gpu in gpus:
        task = make_task(m, gpu, "fp32", {"B": 128, "V": 32000, "K": 50})
        configs = [{"threads": t, "cap": c} for t in (256, 512, 1024) for c in (1024, 2048, 4096)]
        configs.append({"threads": 512, "cap": 128})
        for i, p in enumerate(configs):
            clean = m.render(v, p, task)
            for bug in [None] + (list(v.bugs) if i in (0, len(configs) - 2) else []):
                src = m.render(v, p, task, bug) if bug else clean
                r = (compile_hip(src, task.gpu.arch, "topk_kernel") if task.is_hip
                     else compile_cuda(src, task.gpu.arch, "topk_kernel"))
                builds += 1
                st = STACK.search(r.log or "")
                stack, spill = (int(st.group(1)), int(st.group(2))) if st else (0, 0)
                model = modelled_launch(m, v, p, task)
                flag = ("FAIL " if not r.ok else "SAME RENDER " if bug and src == clean else
                        "SPILL " if spill > 8 else
                        "SMEM " if r.smem_bytes and abs(r.smem_bytes - model.smem_bytes) > 1024 else "")
                problems += bool(flag)
                print(f"{flag}{gpu} {task.gpu.arch} {p} bug={bug} regs {r.regs} (model {model.regs}) stack {stack} "
                      f"spill {spill} B smem {r.smem_bytes} (model {model.smem_bytes})"
                      + ("" if r.ok else "\n" + (r.log or "")[-800:]))
    print(f"{builds} builds, {problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
