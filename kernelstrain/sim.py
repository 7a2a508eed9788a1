"""The analytic simulator (SPEC §6): gates, roofline time, efficiencies, register caps and
noise. The texts of its failures come from messages.py.

time = max(max(flops / (peak * e_c), bytes * traffic / (bw * e_m), atomics) * calibration,
           CTAs per SM * the block scheduler's start interval) + launch overhead

e_m = variant.memory_eff * bytes-in-flight factor (Little's law: vector width x resident
      threads vs. bandwidth x latency) * SM coverage. Benchmarks flush L2 between runs (as
      KernelBench and triton.testing.do_bench do), so nothing is served from a warm L2 across
      launches; reuse inside one launch is the module's `traffic` below 1 re-read.
e_c = variant.compute_eff * compute_scale * tile quantization * wave quantization
      * warps-per-SM factor * lane utilisation
calibration = the fitted H200 ceiling of the (module, variant), powers of the launch model's ratios
      (coverage, threads, compute_scale, tile_quant, lane_util, traffic, in_flight, latency, dram: the H200's DRAM
      bandwidth over the card's) and per-module parameter terms;
launch overhead = the fitted back-to-back launch floor (kernelstrain/calibration/)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import corpus, feasibility, knobs
from .calibration import FIT, launch_terms, param_steps
from .compilers import NVCC_GENCODE, classify, specialization_key
from .gpus import GPU
from .memo import candidate_cache
from .messages import arch_error, optin_error, resources_error, smem_error
from .ops.base import DTYPE_BYTES, Launch, OpModule, Task, Variant
from .ops.occupancy import (DRAM_LATENCY_S, LOADS_IN_FLIGHT, SM_BW_SHARE_CAP, UNPIPELINED_TRIP,  # noqa: F401 (sim's names too)
                             blocks_per_sm, in_flight_ratio)
from .ops.stream_stages import STREAM_STAGES
from .records import replaced

STATIC_SMEM_CAP = 0xC000          # ptxas's limit on static __shared__ for a target that is not arch-specific
REGS_PER_BLOCK = 65536            # 32-bit registers one block may hold on every NVIDIA GPU of the catalog
# One global address takes an atomic every ~1.76 ns: measured on an H200 with 67M float and 124M
# double atomicAdds to a single word (117.9 ms, 218.7 ms; scripts/gpu_check.py); assumed alike elsewhere.
SAME_ADDRESS_ATOMIC_S = 1.76e-9
# Each SM's block scheduler starts a CTA about every 80 ns (~160 cycles), whatever its size: on an
# H200, grids of 0.05-2M small CTAs (swiglu, dropout, bias_gelu, causal_conv1d, embedding_gather,
# rmsnorm rows of D=128; 64-128 threads, 12-32 resident per SM) ran at 79-86 ns per CTA per SM, up
# to 8x their DRAM time (h200_kernels.json, h200_gpucheck_s*.json). A grid of many tiny CTAs is
# bound by that rate, not by bandwidth. Assumed alike on every GPU of the catalog (no measurement).
CTA_DISPATCH_S = 80e-9
# A Triton register tile of more than this many values a thread is not written (sim.writable): the
# compiler unrolls every op over them, so the build time grows with the tile and, past this, no longer
# finishes reliably inside a harness's compile budget. H200, Triton 3.6, gpu-check's 60 s a candidate:
# rmsnorm_triton 16 rows x 8192 on one warp (4096 a thread) gave no result (nor in 400 s of a CPU
# compile); at 2048 a thread softmax_triton C=151936 persistent on 4 warps timed out once (s8484) while
# softmax_triton whole_row_registers on 4 warps and rmsnorm_triton 8 rows x 8192 on one warp built and
# ran (docs/gpu_check_h200_tiles.txt); 1024 a thread built every time, in five modules.
TILE_VALUES_MAX = 1024
# How much slower a Triton kernel's memory side runs at rows that are not 16-byte multiples (sim.narrowed), per
# power of the load instructions multiplied: measured on an H100 (measurements/h100_gpucheck_kigrid.json, the same
# candidates at a misaligned row and its aligned twin): rmsnorm_triton bf16 D=4095 vs 4096 (8x the loads) median
# 1.49x over 21 candidates, softmax_triton fp32 C=31999 vs 32000 (4x) 1.29x over 23: 8 ** 0.19 = 1.48,
# 4 ** 0.19 = 1.30; tensor-core GEMMs (gemm_fp16_triton K=777 vs 776, 21 candidates) 1.00x, compute-bound.
NARROW_LOAD_EXPONENT = 0.19
# The widest load one instruction makes: a launch's bytes_per_access past it counts several vectors in flight (a
# whole row held in registers, an unrolled loop), each narrowed to one element alike. Measured: softmax_triton fp32
# C=31999 against 32000 with loop_unroll 4-8 (64-128 bytes in flight a thread) 1.15-1.34x, as the rolled loop's
# 1.2-1.4x; the uncapped width said 1.69-1.93x (h100_gpucheck_kigrid.json).
VECTOR_BYTES = 16


@dataclass(frozen=True)
class SimResult:
    """Outcome of compiling and timing one candidate (noise-free)."""
    ok: bool
    time_ms: float | None
    smem_bytes: int
    regs: int
    error: str | None = None      # compiler-style text when not ok
    error_class: str | None = None  # arch | smem | resources | align | the compiler's class (compilers.classify)


# -- the model -----------------------------------------------------------------------

_COSTS: dict = {}      # id of a task -> (the task, its module, module.cost(task)): op_cost
COSTS_MAX = 1 << 10    # tasks kept (an episode asks of one; the held-out search of one at a time)


def op_cost(module: OpModule, task: Task):
    """module.cost(task), kept per task object: the op's minimum work is one figure a task, and
    time_ms, roofline_floor_ms and the launch models asked for it again for every candidate they
    timed (a frozen Cost built each time: ~10% of the held-out solutions' search). Keyed by the
    task's identity, the task and module kept beside the answer (an id is never another object's
    while its entry lives) and checked on each hit; the answer is the module's own (a pure
    function of the task: tests/test_speed_engine.py compares it)."""
    found = _COSTS.get(id(task))
    if found is not None and found[0] is task and found[1] is module:
        return found[2]
    if len(_COSTS) >= COSTS_MAX:
        _COSTS.clear()
    cost = module.cost(task)
    _COSTS[id(task)] = (task, module, cost)
    return cost


def register_cap(gpu: GPU, threads: int = 0) -> int:
    """Registers one thread can address: 255 on NVIDIA (ptxas spills beyond), the VGPR file
    on AMD (512 per lane on gfx942: 256 architectural + 256 accumulation VGPRs). Given the
    block's `threads`, NVIDIA's cap is also what a block of that size leaves a thread: every
    kernel that can hold many registers declares its block size (__launch_bounds__, Triton's
    .maxntid), so ptxas fits the block into the 64K register file, in steps of 8 registers a
    thread, and spills the rest rather than fail the launch (ptxas -v, sm_80: rope_cuda at
    1024 threads 64 registers, selective_scan_cuda 64 and 116 bytes of spill stores)."""
    if gpu.vendor == "amd":
        return 512
    return min(255, REGS_PER_BLOCK // threads // 8 * 8) if 0 < threads <= 1024 else 255


def cap_registers(launch: Launch, gpu: GPU) -> Launch:
    """A launch whose register demand exceeds the cap runs at the cap and spills the rest
    to local memory: the spilled values are stored and reloaded through L1/L2 (more
    traffic) and the extra memory instructions slow the inner loop."""
    cap = register_cap(gpu, launch.threads)
    if launch.regs <= cap:
        return launch
    spilled = launch.regs / cap - 1.0
    return replaced(launch, regs=cap, traffic=launch.traffic * (1.0 + 0.5 * spilled),
                   compute_scale=launch.compute_scale / (1.0 + 1.5 * spilled))


def narrowed(module: OpModule, variant: Variant, launch: Launch, task: Task) -> Launch:
    """A Triton candidate's launch at a task whose rows are not 16-byte multiples: Triton vectorizes
    a load only where it can prove 16-byte divisibility of the pointer arithmetic (it specializes
    integer arguments divisible by 16), so every load of such a row is one element wide. The tile's
    loads stay independent (as many bytes in flight), but a warp issues min(VECTOR_BYTES, bytes_per_access) / element
    times more load instructions: where the task's ideal time is its bytes', the memory side slows by
    that ratio ** NARROW_LOAD_EXPONENT (Launch.narrow: the measured ratio, applied past the calibration, whose
    fitted traffic exponent is the model's re-reads', not this); where it is its FLOPs' (a GEMM: each tile
    loaded once a K step feeds the tensor cores BLOCK times) the extra loads hide behind the math.
    CUDA rungs that vectorize do not run there at all (feasibility.violation)."""
    lost = min(VECTOR_BYTES, launch.bytes_per_access) / DTYPE_BYTES[task.dtype]
    if module.impl != "triton" or lost <= 1 or not feasibility.misaligned(module, task, own=True):
        return launch
    cost = op_cost(module, task)
    if cost.flops / task.gpu.peak(variant.path) >= cost.bytes / (task.gpu.bw_tbs * 1e12):
        return launch
    return replaced(launch, narrow=lost ** NARROW_LOAD_EXPONENT)


def writable(module: OpModule, variant: Variant, params: dict, task: Task) -> bool:
    """Whether an engineer would write this candidate for this task: not a register tile too big
    to compile (TILE_VALUES_MAX; Launch.unrolled), nor code whose vector, bulk-copy or TMA accesses
    the task's rows cannot align (feasibility.violation). The engine offers no other, and the
    simulator's timing of one is never a label.

    >>> from kernelstrain.ops import REGISTRY
    >>> from kernelstrain.tasks import make_task
    >>> m = REGISTRY["rmsnorm_triton"]; v = m.variant("multi_row_tile")
    >>> t = make_task(m, "H200", "bf16", {"T": 16384, "D": 8192})
    >>> writable(m, v, {"ROWS": 4, "num_warps": 1}, t), writable(m, v, {"ROWS": 16, "num_warps": 1}, t)
    (True, False)
    """
    return (knobs.launch(module, variant, params, task).unrolled <= TILE_VALUES_MAX
            and feasibility.violation(module, variant, params, task) is None)


def static_smem_cap(gpu: GPU) -> int:
    """The most static __shared__ a kernel may declare, as the compiler for `gpu` enforces it.
    ptxas (nvcc 13.0, bisected with one array): 48 KB (0xc000) on sm_80/86/89 and on plain sm_90 and
    sm_120, but the device's whole opt-in block size on an arch-specific target (sm_90a 0x38c00,
    sm_120a 0x18c00), which H100/H200 and RTX 5090 candidates build for (compilers.NVCC_GENCODE).
    The AMDGPU backend allows the 64 KB of LDS a gfx942 workgroup has (clang-19: 65,600 B fails,
    "local memory (65600) exceeds limit (65536)").

    >>> from kernelstrain.gpus import GPUS
    >>> [hex(static_smem_cap(GPUS[g])) for g in ("A100", "RTX4090", "H100", "RTX5090", "MI300X")]
    ['0xc000', '0xc000', '0x38c00', '0x18c00', '0x10000']
    """
    if gpu.vendor == "amd" or NVCC_GENCODE[gpu.arch].endswith("a"):
        return gpu.smem_per_block
    return min(STATIC_SMEM_CAP, gpu.smem_per_block)


def smem_cap(variant: Variant, module: OpModule, gpu: GPU) -> int:
    if module.impl == "cuda" and variant.smem == "static":
        return static_smem_cap(gpu)
    return gpu.smem_per_block


def sm_coverage(launch: Launch, gpu: GPU) -> float:
    """Share of the DRAM bandwidth the grid's SMs can pull (one SM pulls up to ~3x its share)."""
    return min(1.0, SM_BW_SHARE_CAP * min(gpu.sms, launch.grid) / gpu.sms)


def floor_s(launch: Launch, gpu: GPU) -> float:
    """The seconds no calibration shortens: the grid's CTA starts (cta_floor_s), an unpipelined loop's latency
    chain (chain_floor_s), the instruction issue the launch model counts beside the FLOPs (Launch.issue_s)."""
    return max(cta_floor_s(launch, gpu), chain_floor_s(launch, gpu), launch.issue_s)


def cta_floor_s(launch: Launch, gpu: GPU) -> float:
    """Seconds the SMs' schedulers take to start the main kernel's grid (CTA_DISPATCH_S a CTA per SM)."""
    return math.ceil(launch.grid / gpu.sms) * CTA_DISPATCH_S


def chain_floor_s(launch: Launch, gpu: GPU) -> float:
    """Seconds of the latency chain of a launch whose programs wait for their loads step after step
    (Launch.serial_trips DRAM round trips each; UNPIPELINED_TRIP): the waves of resident programs run one
    after another, the programs of a wave side by side. No roofline term holds it: a chain of little
    traffic and few FLOPs a step is bound by latency alone."""
    if not launch.serial_trips:
        return 0.0
    waves = math.ceil(launch.grid / (gpu.sms * max(1, blocks_per_sm(launch, gpu))))
    return waves * launch.serial_trips * DRAM_LATENCY_S[gpu.vendor] * UNPIPELINED_TRIP


def latency_ratio(launch: Launch, gpu: GPU, core_s: float) -> float:
    """1 + the grid's waves (times the rows each CTA of a persistent loop takes in turn: Launch.rounds)
    x one DRAM round trip over the roofline time core_s: each wave of CTAs
    waits at least one load's latency before its reductions and stores can run, so a grid of
    little work per CTA (a block per short row, one wave of a small problem) is bound by its
    chain of latencies, not by bandwidth. The fit's exponent (calibration.TERMS) says how much of
    it shows per impl, module and variant (two- and three-pass variants wait more than once)."""
    waves = math.ceil(launch.grid / (gpu.sms * max(1, blocks_per_sm(launch, gpu)))) * launch.rounds
    return 1.0 + waves * DRAM_LATENCY_S[gpu.vendor] / max(core_s, 1e-12)


def efficiencies(variant: Variant, launch: Launch, gpu: GPU) -> tuple[float, float]:
    """(e_c, e_m) for one candidate on one GPU."""
    bps = blocks_per_sm(launch, gpu)
    # memory: bytes in flight vs. bandwidth-latency product, and SM coverage
    latency_factor = in_flight_ratio(launch, gpu) ** 0.7
    e_m = variant.memory_eff * min(latency_factor, sm_coverage(launch, gpu))
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
    return max(e_c, 1e-4), max(e_m, 1e-4)


def modelled_launch(module: OpModule, variant: Variant, params: dict, task: Task, model=None) -> Launch:
    """The launch the model gives a candidate (knobs: none unless a profile adds them); `model`: the
    launch model asked (knobs.launch, or its plain computation where nothing should be kept: scan_failure)."""
    return narrowed(module, variant, cap_registers((model or knobs.launch)(module, variant, params, task), task.gpu), task)


def built_launch(module: OpModule, variant: Variant, params: dict, task: Task, model=None) -> Launch:
    """modelled_launch, with Triton's own metadata.shared where the model puts a Triton candidate
    over the cap and kernelstrain/corpus holds the figure (its launcher refuses the kernel on
    that figure, and quotes it): the model's tile arithmetic is an estimate near the cap. The
    figure is the one at this task's specialization (the same source at another head dim or
    shape compiles to other buffers)."""
    launch = modelled_launch(module, variant, params, task, model)
    if module.impl == "triton" and launch.smem_bytes > smem_cap(variant, module, task.gpu):
        shared = corpus.triton_shared(module.name, task.gpu.arch, module.render(variant, params, task),
                                      specialization_key(module.compile_specs(variant, params, task)))
        launch = launch if shared is None else replaced(launch, smem_bytes=shared)
    return launch


@candidate_cache
def simulate(module: OpModule, variant: Variant, params: dict, task: Task) -> SimResult:
    """Compile-check and time one candidate without noise.

    >>> from kernelstrain.ops import REGISTRY
    >>> from kernelstrain.tasks import make_task
    >>> m = REGISTRY["rmsnorm_cuda"]; t = make_task(m, "H100", "fp16", {"T": 4096, "D": 4096})
    >>> simulate(m, m.variants[-1], m.variants[-1].defaults(), t).ok
    True
    """
    if hasattr(module, "simulate"):      # a fused program: a sum of kernels (kernelstrain/fused/module.py)
        return module.simulate(variant, params, task)
    failed = failure(module, variant, params, task)
    if failed is not None:
        return failed
    launch = built_launch(module, variant, params, task)
    return SimResult(True, time_ms(module, variant, launch, task, params), launch.smem_bytes, launch.regs)


@candidate_cache
def failure(module: OpModule, variant: Variant, params: dict, task: Task) -> SimResult | None:
    """simulate's result for a candidate that does not build or run, None for one that does,
    without timing it: the engine asks this of a rung's whole grid (which configs overflow a
    limit) and times only the few it writes."""
    failed = launch_failure(module, variant, params, task)
    if failed is not None or hasattr(module, "simulate"):
        return failed
    broken = feasibility.violation(module, variant, params, task)
    if broken is not None:       # Triton rejects a non-power-of-2 arange; a misaligned access builds and faults
        text = feasibility.error_text(broken, module, variant, params, task)
        launch = built_launch(module, variant, params, task)
        return SimResult(False, None, launch.smem_bytes, launch.regs, text,
                         classify(text) if broken[0] == "arange" else "align")
    return None


# failure's classes that launch_failure alone decides: what the code's accesses break (feasibility.violation)
# is an 'align' fault or Triton's arange CompilationError (tests/test_caches.py checks both, registry-wide)
LAUNCH_CLASSES = ("arch", "smem", "resources")


@candidate_cache
def launch_failure(module: OpModule, variant: Variant, params: dict, task: Task) -> SimResult | None:
    """failure's answer where the launch alone decides it (a missing arch feature, shared memory over
    the cap or without the opt-in, a block the SM cannot hold), else None: the engine asks whole grids
    which configs overflow a limit (classes LAUNCH_CLASSES), and this skips the code's access checks."""
    return _launch_failure(module, variant, params, task, knobs.launch)


def scan_failure(module: OpModule, variant: Variant, params: dict, task: Task) -> SimResult | None:
    """launch_failure's answer, kept nowhere and its launch model's neither: a scan of a rung's whole grid
    (Episode._failing_test) asks each config once, and a grid in the candidate caches (hundreds to thousands
    of configs) only evicts the candidates the episode asks again (the first scans ran ~40% faster without;
    the engine keeps the answers it shares between its scans). A fused program's is launch_failure's."""
    if hasattr(module, "simulate"):
        return launch_failure(module, variant, params, task)
    return _launch_failure(module, variant, params, task, knobs.launch.uncached)


def _launch_failure(module: OpModule, variant: Variant, params: dict, task: Task, model) -> SimResult | None:
    """launch_failure's answer, the launch modelled by `model` (built_launch)."""
    if hasattr(module, "simulate"):
        r = module.simulate(variant, params, task)
        return None if r.ok else r
    return failure_of_launch(module, variant, params, task, built_launch(module, variant, params, task, model))


def failure_of_launch(module: OpModule, variant: Variant, params: dict, task: Task, launch: Launch) -> SimResult | None:
    """launch_failure's answer for a candidate whose built launch (built_launch) is `launch` (not a fused program)."""
    gpu = task.gpu
    missing = sorted(variant.needs - gpu.features)
    if missing:
        return SimResult(False, None, launch.smem_bytes, launch.regs, arch_error(missing[0], task, module), "arch")
    cap = smem_cap(variant, module, gpu)
    if launch.smem_bytes > cap:
        # clang points at the kernel's definition: its line is the code's (only that text needs it)
        code = module.render(variant, params, task) if task.is_hip and variant.smem == "static" else ""
        return SimResult(False, None, launch.smem_bytes, launch.regs,
                         smem_error(launch.smem_bytes, cap, variant, module, task, code), "smem")
    if knobs.without_optin(params, launch.smem_bytes):
        return SimResult(False, None, launch.smem_bytes, launch.regs, optin_error(task), "smem")
    if blocks_per_sm(launch, gpu) == 0 or launch.threads > 1024 or knobs.over_bound(params, launch.threads):
        return SimResult(False, None, launch.smem_bytes, launch.regs, resources_error(launch, module, task), "resources")
    return None


def roofline_terms(module: OpModule, variant: Variant, launch: Launch, task: Task,
                   factor: float = 1.0) -> tuple[float, float, float]:
    """(compute, memory, same-address atomics) seconds of one candidate whose efficiencies are
    divided by `factor` (its calibration) and capped at the ceilings measured on the H200 (the
    memory one softly: Fit.soft_cap)."""
    return _roofline(op_cost(module, task), efficiencies(variant, launch, task.gpu), variant, launch, task.gpu, factor)


def _roofline(cost, effs: tuple[float, float], variant: Variant, launch: Launch, gpu: GPU,
              factor: float = 1.0) -> tuple[float, float, float]:
    """roofline_terms of the op's `cost` and the candidate's uncalibrated efficiencies `effs`
    (time_ms asks both twice of one candidate: before its calibration and after)."""
    e_c, e_m = effs
    e_c = min(e_c / factor, compute_ceiling(FIT.compute_cap.get(variant.path, FIT.compute_cap["fp16"]), launch))
    e_m = FIT.soft_cap(e_m / factor, FIT.memory_cap)
    t_compute = cost.flops / (gpu.peak(variant.path) * e_c) if cost.flops else 0.0
    t_memory = cost.bytes * launch.traffic * launch.narrow / (gpu.bw_tbs * 1e12 * e_m)
    return t_compute, t_memory, launch.serial_atomics * SAME_ADDRESS_ATOMIC_S * factor


def compute_ceiling(cap: float, launch: Launch) -> float:
    """The most of its datapath's peak a candidate's compute reaches (a share of the useful FLOPs' peak time): the
    fit's cap (the best kernels' share of the peak), and for an MMA instruction slower than the peak's
    (Launch.mma_rate: Triton's 2-warp mma.sync on sm_90) that share of its rate, over the padded tiles' work. A
    ceiling, not a factor on the loop: the H100 ran gemm_fp16_triton pipelined_stages at 4096^3 on 2 warps level with
    4 (wgmma) at 64 x 64, 64 x 128 and 128 x 64 tiles (526.6 / 533.5, 397.3 / 387.6, 409.1 / 403.7 us; sim j2),
    the fastest at 346 TFLOP/s under this ceiling's 361 (0.73 x 0.5 x 989); and gemm_splitk_triton split_k_reduce
    64 x 64 x 64 at M=16 N=4096 K=14336 (48 of the 64 tile rows padding, bound by streaming B) level (60.9 / 64.1 us,
    sim w2), where the factor timed 2 warps 1.39x slower.

    >>> compute_ceiling(0.73, Launch(grid=1, threads=64)), compute_ceiling(0.73, Launch(grid=1, threads=64, mma_rate=0.5, tile_quant=0.25))
    (0.73, 0.09125)
    """
    if launch.mma_rate >= 1.0:
        return cap
    return cap * launch.mma_rate * launch.tile_quant


def time_ms(module: OpModule, variant: Variant, launch: Launch, task: Task, params: dict) -> float:
    cost, effs = op_cost(module, task), efficiencies(variant, launch, task.gpu)
    t_compute, t_memory, t_atomics = _roofline(cost, effs, variant, launch, task.gpu)
    terms = launch_terms(launch, sm_coverage(launch, task.gpu), t_compute >= t_memory, in_flight_ratio(launch, task.gpu),
                         latency_ratio(launch, task.gpu, max(t_compute, t_memory, t_atomics)), task.gpu.bw_tbs)
    floor_ms = roofline_floor_ms(module, task, variant.path)
    factor = FIT.core_factor(module.name, module.impl, fit_name(module, variant), terms,
                             param_steps(stepped_params(params, launch), variant.defaults()), floor_ms)
    # and never faster than the op's own bytes (or FLOPs) at the fit's memory ceiling: a launch model whose traffic falls
    # under 1 (mla_decode_triton split_kv's heads term at 16 heads: 0.75) under a refit that raised sm_86's memory
    # efficiency (branch sim, 2026-12-06) timed 6 kernelinfer seed-0 steps on the A10 / RTX A6000 at 0.91-0.98x the DRAM
    # roofline, which no harness measures
    core_s = max(*_roofline(cost, effs, variant, launch, task.gpu, factor), floor_s(launch, task.gpu),
                 floor_ms * 1e-3 / FIT.memory_cap)
    return (core_s + launch.later_s) * 1e3 + FIT.overhead_us(task.gpu.vendor, launch.launches) * 1e-3


def stepped_params(params: dict, launch: Launch) -> dict:
    """The parameters the fit's parameter terms read (calibration.param_steps) of a candidate whose launch is `launch`:
    its own, but a pipelined streaming loop's num_stages the stages the loop really gets (Launch.loop_stages): where it
    loads no trip ahead (one trip a program, rows cp.async cannot copy) Triton builds the code of num_stages=1, and a
    fitted num_stages exponent must not give the same compiled kernel another time (the all-rows refit of
    docs/sim_issue30_s13.md gave layernorm_triton such a term: one trip a program timed 4.447 us at 3 stages, 4.383 at 1).

    >>> stepped_params({"BLOCK": 1024, "num_stages": 3}, Launch(grid=1, threads=128, loop_stages=1))
    {'BLOCK': 1024, 'num_stages': 1}
    >>> stepped_params({"BM": 128, "num_stages": 3}, Launch(grid=1, threads=128))     # a tl.dot pipeline: as written
    {'BM': 128, 'num_stages': 3}
    """
    if not launch.loop_stages or params.get(STREAM_STAGES.name) == launch.loop_stages:
        return params
    return {**params, STREAM_STAGES.name: launch.loop_stages}


def fit_name(module: OpModule, variant: Variant) -> str:
    """The rung whose calibration a candidate takes: its own once the fit has measured it (the fit's records are
    keyed by the rung that ran), else the rung it borrows from (Variant.fit_as)."""
    if variant.tag in FIT.ceilings.get(module.name, {}):
        return variant.tag
    return variant.fit_as or variant.tag


def roofline_floor_ms(module: OpModule, task: Task, path: str) -> float:
    if hasattr(module, "floor_ms"):      # a fused program: its calls' host floor counts too (fused/module.py)
        return module.floor_ms(task, path)
    cost = op_cost(module, task)
    gpu = task.gpu
    return max(cost.flops / gpu.peak(path) if cost.flops else 0.0, cost.bytes / (gpu.bw_tbs * 1e12)) * 1e3


NOISE_SHORT = 0.03       # CV of one run of a kernel under 10 us (noise_cv) ...
NOISE_LONG = 0.01        # ... and of one of 50 us or more; log-linear between


def noise_cv(t_ms: float) -> float:
    """Rebenchmark CV of one timed run (a harness's median over its repetitions): 3% under 10 us,
    1% from 50 us, log-linear between -- the low ends of SPEC's ranges (3-10%, 1-2%), the nearest
    to the hardware: 1,958 candidates gpu-check timed twice on the H200/H100
    (measurements/*_gpucheck_*.json; scripts/noise_fit.py) gave per band the CV of one run
    (robust / plain sd) <5 us 2.7/3.4%, 5-10 us 1.5/1.4%, 10-20 us 1.0/1.2%, 20-50 us 0.6/1.6%,
    50-200 us 0.3/0.75%, >200 us 0.2/0.9% (gpu-check's harness: a median over batches of launches;
    a harness that flushes L2 before each run is noisier). The model this replaces said 6% and
    1.5%: 2-4x the hardware's."""
    t_us = t_ms * 1e3
    if t_us >= 50:
        return NOISE_LONG
    if t_us <= 10:
        return NOISE_SHORT
    return NOISE_SHORT + (NOISE_LONG - NOISE_SHORT) * math.log(t_us / 10) / math.log(5)


def measure(t_ms: float, rng) -> float:
    """One noisy benchmark (a harness's median over its repetitions) of a kernel whose true
    time is t_ms: Gaussian with the CV of noise_cv, never more than 2.5 sigma fast -- a
    timed run can be slowed by the machine without bound but not sped up past the kernel."""
    cv = noise_cv(t_ms)
    return t_ms * max(1.0 - 2.5 * cv, rng.gauss(1.0, cv))
