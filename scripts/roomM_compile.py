"""Build the probe values of scripts/roomM_device.py plan m5 (off their rungs' lists until a device times them) with
the real compilers, for every target the module runs on:
Triton values through scripts/room_compile_triton.py's check (Triton's own compiler via GPUTarget, beside the
simulator's verdict), CUDA values with nvcc (-arch of each catalog GPU; HIP where a compiler is found) through
scripts/check_module.py's compile_one, each bug render too. Exit 1 on a failed build or a disagreement.

    python3 scripts/roomM_compile.py
    KERNELSTRAIN_DEVICE_UNCHECKED=1 python3 scripts/roomM_compile.py      # with min_p_cuda's last_combine 1
"""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_module import compile_one  # noqa: E402
from room_compile_triton import TARGETS, check, shapes  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# (module, rung, parameter, the probe values, the other parameters): plan m5's probes, then the seventh session's
# split rungs' last_combine 1 (min_p_cuda's with KERNELSTRAIN_DEVICE_UNCHECKED=1 only) and min_p_triton's BLOCK 4096
TRITON = [("mamba_step_triton", "persistent_vectorized", "BLOCK_D", (128,)),
          ("mamba_step_triton", "persistent_vectorized", "num_warps", (16,)),
          ("min_p_triton", "split_row_combine", "BLOCK", (4096,)),
          ("min_p_triton", "split_row_combine", "last_combine", (1,)),
          ("min_p_triton", "split_row_combine", "BLOCK", (4096,))]
CUDA = [("selective_scan_cuda", "smem_bc_multi_channel", "rows", (16,), {"threads": 32}),
        ("topk_cuda", "vectorized_float4", "cap", (512,), {}),
        ("topk_cuda", "split_row_two_stage", "threads", (64,), {}),
        ("prefix_scan_cuda", "warp_shuffle_scan", "threads", (64,), {})] + (
    [("min_p_cuda", "split_row_combine", "last_combine", (1,), {"split": 2}),
     ("min_p_cuda", "split_row_combine", "last_combine", (1,), {"split": 32, "threads": 512})]
    if "last_combine" in [p.name for p in REGISTRY["min_p_cuda"].variant("split_row_combine").params] else [])


def cuda_cases(name, tag, param, values, base):
    """(task, params, sim) of every catalog target the rung builds for, its module's check and end shapes, each value."""
    m = REGISTRY[name]
    v = m.variant(tag)
    for g in TARGETS:
        dtype = next((d for d in (v.dtypes or m.dtypes) if m.supports(GPUS[g], d)), None)
        if dtype is not None and not v.needs - GPUS[g].features:
            for shape, value in itertools.product(shapes(m), values):
                task, params = make_task(m, g, dtype, shape), {**v.defaults(), **base, param: value}
                yield task, params, simulate(m, v, params, task)


def check_cuda(name, tag, param, values, base) -> tuple[int, int]:
    m = REGISTRY[name]
    v = m.variant(tag)
    built = bad = 0
    for task, params, sim in cuda_cases(name, tag, param, values, base):
        for bug in [None] + (list(v.bugs_for(task.dtype, params)) if sim.ok else []):
            r = compile_one(m, v, params, task, bug)
            if r is None:               # no HIP compiler here
                continue
            built, bad = built + 1, bad + (not r.ok and sim.ok)
            print(f"{'DISAGREE ' if sim.ok and not r.ok else ''}{name} {tag} {param}={params[param]} {task.key} "
                  f"bug={bug}: compile {'ok' if r.ok else r.error_class} regs {r.regs}, sim "
                  f"{'ok' if sim.ok else sim.error_class}", flush=True)
    return built, bad


def main() -> int:
    counts = [check(*e) for e in TRITON] + [check_cuda(*e) for e in CUDA]
    built, bad = (sum(c[i] for c in counts) for i in (0, 1))
    print(f"{built} builds, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
