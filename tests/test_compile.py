"""Rendered candidates compile with the real compilers: a stratified sample of ok CUDA
candidates with nvcc for their target arch, Triton ones with Triton's compiler (CUDA and
gfx942 targets), and arch-gated candidates really fail with an arch error.

Each variant of each module is compiled once, on a target chosen round-robin among the
default-profile GPUs it runs on; compiles are cached by source hash. CUDA candidates for
MI300X compile as HIP when a HIP compiler is present (see kernelstrain.compilers)."""
import os
import shutil
from concurrent.futures import ProcessPoolExecutor

import pytest

from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

GPU_ORDER = ["H100", "A100", "RTX4090", "MI300X"]
HAVE_NVCC = shutil.which("nvcc") is not None
HAVE_HIP = find_hip_compiler() is not None
try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False


def can_compile(m, gpu):
    if m.impl == "cuda":
        return HAVE_NVCC if gpu.vendor == "nvidia" else HAVE_HIP
    return HAVE_TRITON


def sample_jobs():
    """(module, variant, gpu, dtype, expect) for every variant, plus gated failures."""
    jobs = []
    for k, (name, m) in enumerate(sorted(REGISTRY.items())):
        for j, v in enumerate(m.variants):
            gpus = [g for g in GPU_ORDER if m.supports(GPUS[g], next(iter(m.dtypes)))
                    or any(m.supports(GPUS[g], d) for d in m.dtypes)]
            runs = [g for g in gpus if not (v.needs - GPUS[g].features) and can_compile(m, GPUS[g])]
            if not runs:   # a rung no default GPU runs (sm_120a's block-scaled mma): its own target
                runs = [g for g, gpu in sorted(GPUS.items()) if not (v.needs - gpu.features)
                        and any(m.supports(gpu, d) for d in m.dtypes) and can_compile(m, gpu)][:1]
            if runs:
                jobs.append((name, v.tag, runs[(k + j) % len(runs)], "ok"))
            gated = [g for g in gpus if (v.needs - GPUS[g].features) and can_compile(m, GPUS[g])]
            if gated:
                jobs.append((name, v.tag, gated[(k + j) % len(gated)], "arch"))
    return jobs


def run_job(job):
    name, tag, gpu, expect = job
    m = REGISTRY[name]
    dtype = next(d for d in m.dtypes if m.supports(GPUS[gpu], d))
    task = make_task(m, gpu, dtype, m.shapes[len(m.shapes) // 2])
    v = m.variant(tag)
    src = m.render(v, v.defaults(), task)
    if m.impl == "cuda" and GPUS[gpu].vendor == "amd":
        r = compile_hip(src, GPUS[gpu].arch, f"{m.op}_kernel")
    elif m.impl == "cuda":
        r = compile_cuda(src, GPUS[gpu].arch, f"{m.op}_kernel")
    else:
        r = compile_triton(src, m.compile_specs(v, v.defaults(), task), GPUS[gpu].arch)
    sim = simulate(m, v, v.defaults(), task)
    return job, r.ok, r.error_class, r.log[-800:], sim.ok, sim.smem_bytes, r.smem_bytes


@pytest.mark.slow    # 398 compiles: ~6 CPU-minutes with an empty compile cache (a fresh machine)
@pytest.mark.skipif(not (HAVE_NVCC or HAVE_TRITON), reason="needs nvcc and/or triton (pip install 'kernelstrain[verify]')")
def test_sampled_candidates_compile_and_gated_ones_fail():
    jobs = sample_jobs()
    assert jobs
    workers = max(1, min(4, len(os.sched_getaffinity(0))))
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(run_job, jobs))
    failures = []
    for (name, tag, gpu, expect), ok, cls, log, sim_ok, sim_smem, real_smem in results:
        if expect == "ok" and sim_ok and not ok:
            failures.append(f"{name}:{tag} on {gpu} does not compile:\n{log}")
        if expect == "ok" and sim_ok and ok and REGISTRY[name].impl == "cuda" \
                and GPUS[gpu].vendor == "nvidia" and REGISTRY[name].variant(tag).smem == "static" and real_smem != sim_smem:
            failures.append(f"{name}:{tag} on {gpu}: smem model {sim_smem} != ptxas {real_smem}")
        if expect == "ok" and sim_ok and ok and REGISTRY[name].impl == "triton" and real_smem > GPUS[gpu].smem_per_block:
            failures.append(f"{name}:{tag} on {gpu}: simulated ok, but Triton's {real_smem} B of shared memory "
                            f"exceed the {GPUS[gpu].smem_per_block} B limit (OutOfResources at launch)")
        if expect == "arch" and (ok or cls != "arch") and REGISTRY[name].impl == "cuda":
            failures.append(f"{name}:{tag} on {gpu} is arch-gated but compiled={ok} class={cls}:\n{log}")
    assert not failures, "\n\n".join(failures[:20])
