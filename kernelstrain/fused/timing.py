"""Time of a fused candidate on a GPU: the sum of its kernels' times, plus the launch floor.

- A custom kernel is timed by the simulator's own model (sim.time_ms) with the fitted H200
  constants of the op-module rung whose code it most resembles (ANALOGS: an elementwise kernel
  one thread an element is bias_gelu_cuda's `thread_per_element`, a Triton row kernel with the
  row in registers is softmax_triton's `whole_row_registers` ...), its own launch model (grid,
  threads, bytes a load moves, re-read traffic) and its own bytes: every tensor it reads and writes.
- A PyTorch call keeps the library's time: GEMMs at cuBLAS's ceiling (calibration.FIT.compute_cap,
  the H200 anchors: bf16 724 of 989 TFLOP/s) with 128x128 tiles' wave quantization (which reproduces
  the anchors' 512^3-2048^3 times within 10%); convolutions and attention as implicit GEMMs at
  CONV_SHARE / ATTN_SHARE of it (assumptions); memory-bound PyTorch kernels at EAGER_MEMORY_EFF of
  the bandwidth (the H200 copy anchors: 33.5 MB in 12.8 us, 537 MB in 130 us), as many kernels and
  passes over the tensor as PyTorch launches (EAGER_KERNELS: the RMSNorm helper and NewGELU are
  chains of small ops).
- A forward call takes the longer of its two sides (the harness times calls back to back, so the
  GPU runs one call's kernels while the host issues the next; whichever side is slower sets the
  pace): the GPU's, its kernels one after another, each its time plus the fitted gap between
  back-to-back launches (FIT.extra_launch_us); and the host's, Python issuing the call: the
  module calls, the PyTorch ops of the steps no kernel of ours computes, and one extension call
  (CUDA) or Triton launch per custom kernel (HOST_*: fitted to an H100 host's measurements).

torch.compile (Inductor) keeps the library calls and fuses each run of other steps into one
Triton kernel per reduction in it (INDUCTOR_*), above the host floor of its compiled wrapper (the
fastest torch.compile reference in calibration/h200_references.json).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..calibration import FIT
from ..gpus import GPU, GPUS
from ..ops import REGISTRY
from ..ops.base import Cost, Launch, Task
from ..sim import cap_registers, time_ms as sim_time_ms
from .exprs import ROW_OPS
from .types import DTYPE_BYTES

CONV_SHARE = 0.6          # cuDNN implicit GEMM on these small channel counts: this share of cuBLAS's ceiling
ATTN_SHARE = 0.6          # flash attention's share of the tensor-core ceiling
EAGER_MEMORY_EFF = 0.85   # PyTorch's vectorized elementwise / reduction kernels
GATHER_EFF = 0.6          # an embedding lookup's rows
INDUCTOR_MEMORY_EFF = 0.85
INDUCTOR_FLOOR_MS = 0.013   # transpose_cuda 1024x1024 compiled: the fastest torch.compile call measured
GEMM_TILE = 128
SGEMM_TILE = 64
SPLIT_K_MIN = 256
SPLIT_K_TILES = 8         # cuBLAS splits K when a deep product has this few output tiles (assumption)
# a Triton tl.dot GEMM's share of cuBLAS's ceiling (bf16: tensor cores)
TRITON_GEMM_SHARE = {"bf16": 0.85}
# fp32 tl.dot with input_precision="ieee" runs on FMA, each thread multiplying its operands' BLOCK_K slices held in
# registers (fma_gemm_ms). Fitted to the fp32 Triton GEMM epilogues scripts/fused_device_check.py timed (H200 round 2,
# H100 round 3, 2026-12-05; tests/test_fused_gpucheck.py): a program's step costs about the same on a 64x64 and
# a 64x128 tile of 4 warps (fused-s8484-000230: 81.9 / 82.3 us, -000018 71.6 / 81.6, 16 steps each), and far more
# as its operands outgrow the registers (64x64x32 on 4 warps 3.0-6.0 us a step, 64x128x64 on 8 warps ~16,
# 128x128x64 on 8 17-43, 32x256x128 on 4 ~145: fused-s8484-000134's 582 us, where the wave model said 139). Round 3's
# within-episode Spearman 0.84 -> 0.89 (round 2's 0.83 unchanged)
FMA_STEP_US = 3.0         # one BLOCK_K step of a 64x64x32 tile on 4 warps where B is nn.Linear's weight ([N, K]: the tile
#                           read K-contiguous, transposed to the dot's layout): fused-s8484-000270 (64 steps) 193 us,
#                           fused-s13-000150 (32) 105.5, fused-s8484-000216 (24) 75.7; the third session's profiler
#                           (H100): fused-s4747-000140 2.92 us a step, -000235 3.05, -000119 3.23
FMA_STEP_NN_US = 1.3      # ... where B is a matmul's / bmm's [K, N] (N-contiguous, the dot's own layout): the third
#                           session's profiler (H100), the GEMM kernel alone: fused-s4747-000128 1.18 us a step (32
#                           steps), -000065 1.33 (8), -000174 1.76 (4)
FMA_REGS = 394            # that tile's registers a thread (fma_dot_registers): the steps above cost FMA_STEP_US
FMA_SPILL_EXP = 2.0       # a step's time grows as the square of the registers past that (the steps above: slopes 1.8-2.8)
FMA_CLIFF = 3.0           # ... and as its square again past 3x them, where ptxas gives up (Triton 3.9 AOT for sm_90:
#                           256x128x64 on 8 warps, 4x the registers, spills 18,832 bytes a thread). The matmul steps of
#                           the third session's profiler (H100) over FMA_STEP_NN_US: 128x64x32 / 4 warps 2.2 (1.46x the
#                           registers), 128x128x64 / 8 7.2 (2.76x), 256x128x64 / 8 26 (4.0x); round 3's 32x256x128 / 4
#                           ~110 (5.36x): the square gives 2.1 / 7.6 / 16 / 29, with the cliff 2.1 / 7.6 / 28 / 92
BF16_SPILL_US = 2.3       # a program's time with its bf16 dot's fp32 accumulator spilled, at twice ACC_REGS a thread /
BF16_SPILL_EXP = 3.0      # 2 ** BF16_SPILL_EXP, growing as this power of the accumulator's registers over ACC_REGS
ACC_REGS = 128            # accumulator registers a thread holds without spilling (of its 255, beside addresses and operands)
STAGE_SHARE = {2: 0.85, 3: 0.95, 4: 1.0, 5: 1.0}    # a fifth stage hides no more latency (and costs shared memory)
TC_FIXED_US = 1.5         # a bf16 tl.dot kernel at the least: its prologue, first loads and epilogue ...
TC_STEP_US = 0.2          # ... and a BLOCK_K step a wave (the tiles' load round trip the pipeline does not hide): the
#                           third session's profiler (H100), 64x64x32 on 4 warps: fused-s4747-000070 2.0 us for 2 steps
#                           (the tensor-core share said 0.1), fused-s6363-000157 12.1 for 64, -000003 6.7 for 32,
#                           -000092 7.3 for 32, -000162 10.5 for 24
# PyTorch eager launches for one step: (kernels, passes over the tensor in its dtype), where a step
# is a chain of ops (bf16: the RMSNorm helper computes in fp32, converting both ways)
EAGER_KERNELS = {"new_gelu": (8, 18), "quick_gelu": (3, 7), "logsumexp": (5, 6),
                 "rms_norm": (6, 7), "rms_norm@bf16": (8, 18), "batch_norm": (2, None), "group_norm": (2, None),
                 "instance_norm": (3, None)}
LIBRARY_ROLES = ("contraction", "attention", "gather")

# -- the host side of one forward call ----------------------------------------------------------------
# Fitted (least squares on relative error, the extension call held at HOST_EXT_US) to the 21 candidates of
# 6 fused episodes timed on an H100's host (Torch 2.11, Triton 3.6; scripts/fused_device_check.py: median of
# 7 batches of 20 back-to-back calls), every one of them host-bound there: 35-195 us measured against 4-52 us
# of kernels. The rows and their counts are tests/test_fused_host.py's; the fit predicts them within 23%
# (rms 12%), the timer's own spread between two candidates of the same calls (fused-s11-000008's op_kernels
# at BLOCK 1024 and 2048: 69.8 and 92.8 us). A refit on the third session's first H100 run (a grid over the five
# constants, 13 / 8 / 4 / 8 / 25 us: that run's within-episode Spearman 0.794 -> 0.906) did not hold on its second,
# a fresh seed on another H100 host (0.841 at these constants, 0.793 at the refit's): not kept (docs/fused.md).
HOST_MODULE_US = 20.0     # nn.Module.__call__ (ModelNew's; nn.Linear's, a helper's): fused-s11-000051 fused_row
#                           (ModelNew + nn.Linear + 1 Triton launch) 89.3 us against gemm_epilogue (ModelNew + 2) 61.8
HOST_DISPATCH_US = 9.0    # one PyTorch op issued from Python, its launch included: fused-s11-000097 eager (6 ops)
#                           114.6 us against fused_row (1 op + 1 extension call) 55.8; fused-s11-000057 124.2 / 58.6
HOST_LIBRARY_US = 3.0     # a cuBLAS / cuDNN / SDPA call's own host work past that (descriptors, heuristics): the
#                           fit's remainder over 13 candidates with a library call
HOST_EXT_US = 6.0         # one load_inline function call (pybind11, torch::empty_like, the <<<>>> launch): the fit
#                           puts it at 0-8 us (fused-s11-000044 eager 57.5 us, bmm + 2 ops; bmm + the call 36.1 / 39.0)
HOST_TRITON_US = 19.0     # one Triton kernel from its Python wrapper (torch.empty, the JIT launcher binding its
#                           arguments): fused-s11-000008 op_kernels (3 launches) 69.8 / 92.8 us, fused_row (1) 34.6 / 36.8
# a CUDA graph's replay (graphs.py), in these units: the probe of fused j1 (H100 host, 2026-12-07) timed
# CUDAGraph.replay() at 2.56 us against 6.47 for a PyTorch op (torch.relu) and 5.82 for a copy_ (which stays an op)
HOST_REPLAY_US = round(HOST_DISPATCH_US * 2.56 / 6.47, 1)
HOST_COST_US = {"module": HOST_MODULE_US, "op": HOST_DISPATCH_US, "library": HOST_LIBRARY_US,
                "cuda": HOST_EXT_US, "triton": HOST_TRITON_US, "replay": HOST_REPLAY_US}
# PyTorch ops a step's forward lines issue from Python where that is not one (a helper module's own forward:
# RMSNorm's float, pow, mean, add, rsqrt, mul, to, mul; BatchNorm's training-mode counter add_; the attention
# step's view, transpose, sdpa, transpose, flatten; gram's transpose and matmul)
HOST_OPS = {"rms_norm": 8, "new_gelu": 8, "quick_gelu": 3, "batch_norm": 2, "sdpa": 5, "gram": 2}
LIBRARY_CALLS = ("contraction", "attention")
MODULE_CALL = re.compile(r"\bself\.\w+\(")


def host_calls(steps: list, kept, kernels: int, impl: str) -> dict:
    """What the host does in one ModelNew call, by kind (HOST_COST_US's keys): module calls (its own, and
    those of the kept PyTorch steps' lines: `self.linear(x)`), PyTorch ops, library calls among them, and
    one extension call or Triton launch for each of `kernels` custom kernels. `steps`: the grammar's Steps.

    >>> from kernelstrain.fused.view import ProgramView
    >>> steps = ProgramView.of(0, 4).program.steps      # conv_transpose2d -> new_gelu -> residual_add
    >>> host_calls(steps, range(3), 0, "cuda")
    {'module': 3, 'op': 10, 'library': 1, 'cuda': 0}
    """
    kept = [steps[j] for j in kept]
    return {"module": 1 + sum(len(MODULE_CALL.findall(line)) for s in kept for line in s.lines),
            "op": sum(HOST_OPS.get(s.op, 1) for s in kept),
            "library": sum(s.role in LIBRARY_CALLS for s in kept), impl: kernels}


def host_us(calls: dict) -> float:
    """The host's time for these calls (host_calls)."""
    return sum(HOST_COST_US[kind] * n for kind, n in calls.items())


@dataclass(frozen=True)
class KernelModel:
    """The op module the simulator sees for one custom kernel: the analog's name (its fitted
    constants) and this kernel's own work."""
    name: str
    impl: str
    work: Cost

    def cost(self, task) -> Cost:
        return self.work


def custom_kernel_ms(analog: tuple[str, str], launch: Launch, work: Cost, gpu: GPU, dtype: str) -> float:
    """One custom kernel's time without its launch floor (added once per candidate)."""
    module = REGISTRY[analog[0]]
    variant = module.variant(analog[1])
    model = KernelModel(module.name, module.impl, work)
    task = Task(module.name, gpu, dtype, ())
    return sim_time_ms(model, variant, cap_registers(launch, gpu), task, {}) - FIT.overhead_us(gpu.vendor, 1) * 1e-3


def _gemm_s(flops: float, nbytes: float, tiles: int, gpu: GPU, dtype: str, share: float = 1.0) -> float:
    """max(compute at `share` of the library ceiling over the waves `tiles` fill, memory)."""
    path = "fp16" if dtype == "bf16" else "fp32"
    slots = gpu.sms
    wave = tiles / (math.ceil(tiles / slots) * slots)
    compute = flops / (gpu.peak(path) * FIT.compute_cap[path] * share * wave)
    return max(compute, nbytes / (gpu.bw_tbs * 1e12 * FIT.memory_cap))


def library_tiles(b: int, m: int, n: int, k: int, gpu: GPU, dtype: str = "bf16") -> int:
    """Work units of a cuBLAS GEMM: 128x128 tiles (64x64 in fp32: its SGEMM kernels), split along K (SPLIT_K_MIN deep at least) when
    there are SPLIT_K_TILES or fewer, as its heuristics do for skinny deep products."""
    tile = GEMM_TILE if dtype == "bf16" else SGEMM_TILE
    tiles = b * math.ceil(m / tile) * math.ceil(n / tile)
    if tiles <= SPLIT_K_TILES:
        tiles *= max(1, min(k // SPLIT_K_MIN, gpu.sms // tiles))
    return tiles


def triton_gemm_ms(flops: float, nbytes: float, grid: int, tile_quant: float, block_m: int, block_n: int,
                   stages: int, warps: int, gpu: GPU, dtype: str, block_k: int = 0, k: int = 0,
                   b_transposed: bool = True) -> float:
    """A tl.dot GEMM kernel (no split-K), without the launch floor. bf16: TRITON_GEMM_SHARE of the library
    ceiling, less for small tiles and shallow pipelines, over the waves its grid fills; a tile whose fp32
    accumulator needs more than ACC_REGS registers a thread spills it to local memory, and its steps then cost
    what a spilling FMA dot's do (fma_gemm_ms: fused-s4747-000042's 256x128x64 bf16 tile on 2 warps, 512
    accumulators a thread, ran 212 us where the tensor-core share said 4). fp32: fma_gemm_ms."""
    if dtype == "fp32":
        return fma_gemm_ms(grid, block_m, block_n, block_k, warps, k, gpu, b_transposed)
    spill = min(1.0, ACC_REGS / (block_m * block_n / (32 * warps)))
    share = TRITON_GEMM_SHARE[dtype] * min(1.0, min(block_m, block_n) / GEMM_TILE) ** 0.3 * STAGE_SHARE[stages] * tile_quant * spill
    floor = (TC_FIXED_US + math.ceil(grid / gpu.sms) * math.ceil(k / block_k) * TC_STEP_US) * 1e-3 if block_k else 0.0
    tensor = max(_gemm_s(flops, nbytes, grid, gpu, dtype, share) * 1e3, floor)
    if spill >= 1.0 or not block_k:
        return tensor
    # a spilled accumulator costs each program its local-memory traffic once (its loads and stores around the tensor-core
    # steps, and the epilogue's), not a step's: fused-s6363-000170's 256x128x64 tiles on 2 warps (4x ACC_REGS a thread)
    # ran 88 us for 4 steps and 167 for 1, fused-s4747-000042's 212 for 1; at 2x (256x128 on 4, 128x128 on 2) 4-29 us
    return max(tensor, math.ceil(grid / gpu.sms) * BF16_SPILL_US * (1.0 / spill) ** BF16_SPILL_EXP * 1e-3)


def _sm_fp32(gpu: GPU) -> float:
    return gpu.peak("fp32") / gpu.sms


def fma_dot_registers(block_m: int, block_n: int, block_k: int, warps: int) -> float:
    """Registers a thread of an fp32 tl.dot (input_precision="ieee": FMA, no tensor cores) holds: its share of
    the accumulator and, for the FMA loop, the BLOCK_K slices of A's rows and B's columns it multiplies (a
    square patch of the tile: 2 sqrt(share) rows and columns)."""
    share = block_m * block_n / (32 * warps)
    return share + block_k * 2 * math.sqrt(share)


def fma_gemm_ms(grid: int, block_m: int, block_n: int, block_k: int, warps: int, k: int, gpu: GPU,
                b_transposed: bool = True, cliff: float = FMA_CLIFF) -> float:
    """An fp32 tl.dot GEMM: every program runs ceil(K / BLOCK_K) steps of FMA_STEP_US (FMA_STEP_NN_US where B is
    read in the dot's own layout), slower as the square of the registers its operands need past FMA_REGS
    (fma_dot_registers: local-memory spills in the inner loop), in as many waves as its grid fills the SMs (one
    program an SM: the operands' registers)."""
    ratio = max(1.0, fma_dot_registers(block_m, block_n, block_k, warps) / FMA_REGS)
    spill = ratio ** FMA_SPILL_EXP * max(1.0, ratio / cliff) ** FMA_SPILL_EXP
    waves = math.ceil(grid / gpu.sms)
    step = FMA_STEP_US if b_transposed else FMA_STEP_NN_US
    return waves * math.ceil(k / block_k) * step * _sm_fp32(GPUS['H100']) / _sm_fp32(gpu) * spill * 1e-3


def gemm_dims(step: dict) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a GEMM-like step."""
    op, p, shape_in, shape_out = step["op"], step["params"], step["in"]["shape"], step["out"]["shape"]
    if op == "linear":
        return 1, math.prod(shape_in) // p["in_features"], p["out_features"], p["in_features"]
    if op in ("matmul", "bmm"):
        return (shape_out[0] if op == "bmm" else 1), p["M"], p["N"], p["K"]
    if op == "gram":
        b, s, d = shape_in
        return b, s, s, d
    raise ValueError(op)


def torch_launches(step: dict, dtype: str) -> int:
    """Kernels PyTorch launches for one step (a reshape none; EAGER_KERNELS' chains several)."""
    if step["role"] == "reshape":
        return 0
    if step["role"] in LIBRARY_ROLES or step["op"].startswith("conv"):
        return 1
    return EAGER_KERNELS.get(f"{step['op']}@{dtype}", EAGER_KERNELS.get(step["op"], (1, None)))[0]


def library_ms(step: dict, dtype: str, gpu: GPU) -> tuple[float, int]:
    """(seconds without launch floor, kernels) of a step PyTorch computes."""
    op, role, nb = step["op"], step["role"], DTYPE_BYTES[dtype]
    bw = gpu.bw_tbs * 1e12
    if op in ("linear", "matmul", "bmm", "gram"):
        return _gemm_s(step["flops"], step["bytes"], library_tiles(*gemm_dims(step), gpu, dtype), gpu, dtype), 1
    if op.startswith("conv"):
        out = step["out"]["shape"]
        tiles = math.ceil(math.prod(out) // out[1] / GEMM_TILE) * math.ceil(out[1] / 64)
        return _gemm_s(step["flops"], step["bytes"], tiles, gpu, dtype, CONV_SHARE), 1
    if op == "sdpa":
        b, s, d = step["in"]["shape"]
        tiles = b * step["params"]["num_heads"] * math.ceil(s / GEMM_TILE)
        return _gemm_s(step["flops"], step["bytes"], tiles, gpu, dtype, ATTN_SHARE), 1
    if role == "gather":
        return step["bytes"] / (bw * GATHER_EFF), 1
    if role == "reshape":
        return 0.0, 0
    _, passes = EAGER_KERNELS.get(f"{op}@{dtype}", EAGER_KERNELS.get(op, (1, None)))
    kernels = torch_launches(step, dtype)
    nbytes = step["bytes"] if passes is None else passes * math.prod(step["in"]["shape"]) * nb + step["weights"] * nb
    return nbytes / (bw * EAGER_MEMORY_EFF), kernels


def call_ms(kernels: list[float], host_us: float, gpu: GPU) -> float:
    """One forward call: kernels of these core times (ms) one after another on the GPU, or the host's
    time to issue them, whichever is longer (module docstring)."""
    gap = FIT.extra_launch_us[gpu.vendor] * 1e-3
    return max(sum(t + gap for t in kernels), host_us * 1e-3)


def torch_kernels(step: dict, dtype: str, gpu: GPU) -> list[float]:
    """Core times (ms) of the kernels PyTorch launches for one step (its time shared among them)."""
    t, n = library_ms(step, dtype, gpu)
    return [t * 1e3 / n] * n if n else []


def eager_ms(program: list, steps: list, dtype: str, gpu: GPU) -> float:
    """The reference program in PyTorch eager mode (`program`: the task row's steps, `steps`: the grammar's)."""
    host = host_us(host_calls(steps, range(len(steps)), 0, "cuda"))
    return call_ms([t for s in program for t in torch_kernels(s, dtype, gpu)], host, gpu)


def compiled_ms(program: list, dtype: str, gpu: GPU) -> float:
    """The reference program under torch.compile: library calls kept, every run of the other
    steps one Inductor kernel per reduction in it (one at least), reading the run's input and
    weights and writing its output (a residual's saved tensor read once more). Its host is
    counted as ours is (host_calls): the compiled module's call, each library call its generated
    wrapper makes (an op and the library's own work), each of its Triton kernels launched from
    Python with its output allocated (a Triton launch) -- the same code shape as a Triton solution
    (fused_host_probe.py times a compiled call on the device to check it)."""
    nb, bw = DTYPE_BYTES[dtype], gpu.bw_tbs * 1e12
    kernels, run, calls = [], [], {"module": 1, "op": 0, "library": 0, "triton": 0}

    def flush():
        if not run:
            return
        moved = math.prod(run[0]["in"]["shape"]) + math.prod(run[-1]["out"]["shape"])
        moved += sum(s["weights"] for s in run) + sum(math.prod(s["in"]["shape"]) for s in run if s["role"] == "residual")
        n = max(1, sum(1 for s in run if s["op"] in ROW_OPS or s["role"] in ("norm", "pool")))
        kernels.extend([moved * nb / (bw * INDUCTOR_MEMORY_EFF) * n ** 0.5 * 1e3 / n] * n)
        calls["triton"] += n
        run.clear()
    for s in program:
        if s["role"] in LIBRARY_ROLES:
            flush()
            kernels.extend(torch_kernels(s, dtype, gpu))
            calls["op"] += 1
            calls["library"] += s["role"] in LIBRARY_CALLS
        elif s["role"] != "reshape":
            run.append(s)
    flush()
    return max(INDUCTOR_FLOOR_MS, call_ms(kernels, host_us(calls), gpu))
