"""Build roomM's tuning values added this session with the real compilers, for every target the module runs on:
Triton values through scripts/room_compile_triton.py's check (Triton's own compiler via GPUTarget, beside the
simulator's verdict), CUDA values with nvcc (-arch of each catalog GPU; HIP where a compiler is found) through
scripts/check_module.py's compile_one, each bug render too. Exit 1 on a failed build or a disagreement.

    python3 scripts/roomM_compile.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_module import compile_one  # noqa: E402
from room_compile_triton import TARGETS, check, shapes  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# (module, rung, parameter, the values added, the other parameters)
TRITON = [("mamba_step_triton", "persistent_vectorized", "BLOCK_D", (128,)),
          ("mamba_step_triton", "persistent_vectorized", "num_warps", (16,))]
CUDA = [("topk_cuda", "split_row_two_stage", "chunk", (16384,), {}),
        # a probe of plan m5, not on the rung's list: the fit's rows exponent (0.85x a doubling) extrapolated past the
        # H100's rows 4 -> 8 (1.00-1.04x at 64 threads, docs/roomM_device_h100_m3/) until a device times it
        ("selective_scan_cuda", "smem_bc_multi_channel", "rows", (16,), {"threads": 32})]


def check_cuda(name, tag, param, values, base) -> tuple[int, int]:
    m = REGISTRY[name]
    v = m.variant(tag)
    built = bad = 0
    for g in TARGETS:
        gpu = GPUS[g]
        dtype = next((d for d in (v.dtypes or m.dtypes) if m.supports(gpu, d)), None)
        if dtype is None or v.needs - gpu.features:
            continue
        for shape in shapes(m):
            task = make_task(m, g, dtype, shape)
            for value in values:
                params = {**v.defaults(), **base, param: value}
                sim = simulate(m, v, params, task)
                for bug in [None] + (list(v.bugs_for(dtype, params)) if sim.ok else []):
                    r = compile_one(m, v, params, task, bug)
                    if r is None:               # no HIP compiler here
                        continue
                    built += 1
                    agree = r.ok or not sim.ok
                    print(f"{'' if agree else 'DISAGREE '}{name} {tag} {param}={value} {g} {dtype} {shape} bug={bug}: "
                          f"compile {'ok' if r.ok else r.error_class} regs {r.regs}, sim "
                          f"{'ok' if sim.ok else sim.error_class}", flush=True)
                    bad += not agree
    return built, bad


def main() -> int:
    built = bad = 0
    for entry in TRITON:
        b, x = check(*entry)
        built, bad = built + b, bad + x
    for entry in CUDA:
        b, x = check_cuda(*entry)
        built, bad = built + b, bad + x
    print(f"{built} builds, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
