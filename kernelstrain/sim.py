"""The analytic simulator (SPEC §6): gates, roofline time, efficiencies, noise, and
compile errors worded like the real compilers'.

time = max(flops / (peak * e_c), bytes * traffic / (bw * e_m)) + launch overhead

e_m = variant.memory_eff * bytes-in-flight factor (Little's law: vector width x resident
      threads vs. bandwidth x latency) * SM coverage, boosted when the working set fits in L2
e_c = variant.compute_eff * compute_scale * tile quantization * wave quantization
      * warps-per-SM factor * lane utilisation
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from .gpus import EXTRA_LAUNCH_US, FEATURE_MIN_TARGET, LAUNCH_US, GPU
from .ops.base import Launch, OpModule, Task, Variant

STATIC_SMEM_CAP = 0xC000          # 48 KB of static __shared__ per block without opt-in
DRAM_LATENCY_S = {"nvidia": 650e-9, "amd": 800e-9}
LOADS_IN_FLIGHT = 2               # independent loads per thread the compiler keeps in flight
SM_BW_SHARE_CAP = 3.0             # one SM can pull at most ~3x its fair share of DRAM bandwidth
# One global address takes an atomic every ~1.76 ns: measured on an H200 with 67M float and 124M
# double atomicAdds to a single word (117.9 ms, 218.7 ms; scripts/gpu_check.py); assumed alike elsewhere.
SAME_ADDRESS_ATOMIC_S = 1.76e-9


@dataclass(frozen=True)
class SimResult:
    """Outcome of compiling and timing one candidate (noise-free)."""
    ok: bool
    time_ms: float | None
    smem_bytes: int
    regs: int
    error: str | None = None      # compiler-style text when not ok
    error_class: str | None = None  # arch | smem | resources


class CompileError(Exception):
    def __init__(self, text: str, error_class: str):
        super().__init__(text)
        self.text, self.error_class = text, error_class


# -- compiler-style messages ---------------------------------------------------------

def _ptx_file(task: Task) -> str:
    tag = int(hashlib.sha256(task.key.encode()).hexdigest()[:4], 16)
    return f"/tmp/tmpxft_{tag:08x}_00000000-6_candidate.ptx"


_PTX_FEATURE_TEXT = {
    "wgmma": "Instruction 'wgmma.fence' not supported on .target '{arch}'",
    "tma": "Feature 'cp.async.bulk.tensor' requires .target sm_90 or higher",
    "cluster": "Feature '.shared::cluster' requires .target sm_90 or higher",
    "fp8": "Feature 'mma with FP8 floating point type' requires .target sm_89 or higher",
    # the block-scaled (FP4-generation) mma: ptxas names the instruction and each of its qualifiers
    "fp4": ("Instruction 'mma with block scale' not supported on .target '{arch}'",
            "Feature '.kind::mxf8f6f4' not supported on .target '{arch}'",
            "Feature '.block_scale' not supported on .target '{arch}'",
            "Feature '.scale_vec::1X' not supported on .target '{arch}'"),
    "cp_async": "Feature 'cp.async' requires .target sm_80 or higher",
    "ldmatrix": "Feature 'ldmatrix' requires .target sm_75 or higher",
    "mma": "Feature 'mma with .m16n8k16' requires .target sm_80 or higher",
    "bf16": "Feature 'bf16' requires .target sm_80 or higher",
}


def arch_error(feature: str, task: Task, module: OpModule) -> str:
    """The compiler's text when a candidate uses `feature` on a GPU without it."""
    gpu = task.gpu
    if module.impl == "triton":
        if feature == "fp8":
            return ("triton.compiler.errors.CompilationError: type fp8e4nv not supported in this "
                    "architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')")
        return (f"triton.compiler.errors.CompilationError: {feature} requires "
                f"{FEATURE_MIN_TARGET[feature]}; target is {gpu.arch}")
    if gpu.vendor == "amd":
        # Any PTX-level feature reaches the AMDGPU assembler as inline asm it cannot parse.
        return ("<inline asm>:1:2: error: instruction not supported on this GPU\n"
                "candidate.hip: error: cannot compile inline asm\n1 error generated when compiling for gfx942.")
    line = 20 + int(hashlib.sha256(f"{task.key}{feature}".encode()).hexdigest()[:2], 16)
    text = _PTX_FEATURE_TEXT.get(feature, f"Feature '{feature}' requires .target {FEATURE_MIN_TARGET[feature]} or higher")
    lines = (text,) if isinstance(text, str) else text
    return "".join(f"ptxas {_ptx_file(task)}, line {line}; error   : {t.format(arch=gpu.arch)}\n" for t in lines) \
        + "ptxas fatal   : Ptx assembly aborted due to errors"


def smem_error(smem: int, cap: int, variant: Variant, module: OpModule, task: Task) -> str:
    if module.impl == "triton":
        return (f"triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {smem}, "
                f"Hardware limit: {cap}. Reducing block sizes or `num_stages` may help.")
    if variant.smem == "static":
        return (f"ptxas error   : Entry function '{module.op}_kernel' uses too much shared data "
                f"(0x{smem:x} bytes, 0x{cap:x} max)")
    api = "hipFuncSetAttribute" if task.is_hip else "cudaFuncSetAttribute"
    return (f"{api}({module.op}_kernel, MaxDynamicSharedMemorySize, {smem}) failed: invalid argument "
            f"(requested {smem} bytes of shared memory per block, device limit {cap})")


def resources_error(launch: Launch, module: OpModule, task: Task) -> str:
    return (f"ptxas error   : Entry function '{module.op}_kernel' uses too many resources: "
            f"{launch.regs} registers x {launch.threads} threads exceeds the register file "
            f"({task.gpu.regs_per_sm} registers per SM)")


# -- the model -----------------------------------------------------------------------

def smem_cap(variant: Variant, module: OpModule, gpu: GPU) -> int:
    if module.impl == "cuda" and variant.smem == "static":
        return min(STATIC_SMEM_CAP, gpu.smem_per_block)
    return gpu.smem_per_block


def blocks_per_sm(launch: Launch, gpu: GPU) -> int:
    by_threads = gpu.max_threads_per_sm // max(1, launch.threads)
    by_regs = gpu.regs_per_sm // max(1, launch.threads * launch.regs)
    by_smem = gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else gpu.max_blocks_per_sm
    return min(gpu.max_blocks_per_sm, by_threads, by_regs, by_smem)


def efficiencies(variant: Variant, launch: Launch, gpu: GPU, working_set: float) -> tuple[float, float, float]:
    """(e_c, e_m, l2_boost) for one candidate on one GPU."""
    bps = blocks_per_sm(launch, gpu)
    resident_blocks = min(launch.grid, gpu.sms * bps)
    active_sms = min(gpu.sms, launch.grid)
    # memory: bytes in flight vs. bandwidth-latency product, and SM coverage
    in_flight = resident_blocks * launch.threads * launch.bytes_per_access * LOADS_IN_FLIGHT * launch.lane_util
    needed = gpu.bw_tbs * 1e12 * DRAM_LATENCY_S[gpu.vendor]
    latency_factor = min(1.0, in_flight / needed) ** 0.7
    coverage = min(1.0, SM_BW_SHARE_CAP * active_sms / gpu.sms)
    e_m = variant.memory_eff * min(latency_factor, coverage)
    # compute: wave quantization over the SM slots the grid really fills (a grid smaller
    # than one full wave is limited by its busiest SM), warps available to hide latency
    resident_per_sm = min(bps, math.ceil(launch.grid / gpu.sms))
    slots = gpu.sms * resident_per_sm
    waves = math.ceil(launch.grid / slots)
    wave_eff = launch.grid / (waves * slots)
    warps_per_sm = resident_per_sm * launch.threads / gpu.warp
    warp_factor = min(1.0, 0.35 + warps_per_sm / 8)
    e_c = (variant.compute_eff * launch.compute_scale * launch.tile_quant * wave_eff
           * warp_factor * launch.lane_util)
    l2_mb = working_set / 1e6
    l2_boost = 1.0 if l2_mb >= gpu.l2_mb else 1.0 + 0.5 * min(1.0, (gpu.l2_mb - l2_mb) / (0.75 * gpu.l2_mb))
    return max(e_c, 1e-4), max(e_m, 1e-4), l2_boost


def simulate(module: OpModule, variant: Variant, params: dict, task: Task) -> SimResult:
    """Compile-check and time one candidate without noise.

    >>> from kernelstrain.ops import REGISTRY
    >>> from kernelstrain.tasks import make_task
    >>> m = REGISTRY["rmsnorm_cuda"]; t = make_task(m, "H100", "fp16", {"T": 4096, "D": 4096})
    >>> simulate(m, m.variants[-1], m.variants[-1].defaults(), t).ok
    True
    """
    gpu = task.gpu
    missing = sorted(variant.needs - gpu.features)
    launch = module.launch(variant, params, task)
    if missing:
        return SimResult(False, None, launch.smem_bytes, launch.regs, arch_error(missing[0], task, module), "arch")
    cap = smem_cap(variant, module, gpu)
    if launch.smem_bytes > cap:
        return SimResult(False, None, launch.smem_bytes, launch.regs,
                         smem_error(launch.smem_bytes, cap, variant, module, task), "smem")
    if blocks_per_sm(launch, gpu) == 0 or launch.threads > 1024:
        return SimResult(False, None, launch.smem_bytes, launch.regs, resources_error(launch, module, task), "resources")
    return SimResult(True, time_ms(module, variant, launch, task), launch.smem_bytes, launch.regs)


def time_ms(module: OpModule, variant: Variant, launch: Launch, task: Task) -> float:
    gpu = task.gpu
    cost = module.cost(task)
    moved = cost.bytes * launch.traffic
    e_c, e_m, l2_boost = efficiencies(variant, launch, gpu, moved)
    t_compute = cost.flops / (gpu.peak(variant.path) * e_c) if cost.flops else 0.0
    t_memory = moved / (gpu.bw_tbs * 1e12 * e_m * l2_boost)
    overhead_us = LAUNCH_US[gpu.vendor] + (launch.launches - 1) * EXTRA_LAUNCH_US[gpu.vendor]
    t_atomics = launch.serial_atomics * SAME_ADDRESS_ATOMIC_S
    return (max(t_compute, t_memory, t_atomics) + overhead_us * 1e-6) * 1e3


def roofline_floor_ms(module: OpModule, task: Task, path: str) -> float:
    cost = module.cost(task)
    gpu = task.gpu
    return max(cost.flops / gpu.peak(path) if cost.flops else 0.0, cost.bytes / (gpu.bw_tbs * 1e12)) * 1e3


def noise_cv(t_ms: float) -> float:
    """Rebenchmark CV: ~1.5% for kernels >= 50 us, ~6% under 10 us, log-linear between."""
    t_us = t_ms * 1e3
    if t_us >= 50:
        return 0.015
    if t_us <= 10:
        return 0.06
    frac = math.log(t_us / 10) / math.log(5)
    return 0.06 + (0.015 - 0.06) * frac


def measure(t_ms: float, rng) -> float:
    """One noisy benchmark of a kernel whose true time is t_ms."""
    factor = rng.gauss(1.0, noise_cv(t_ms))
    return max(t_ms * 0.5, t_ms * factor)
