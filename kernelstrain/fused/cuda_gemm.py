"""A CUDA GEMM with the elementwise run after it in its epilogue (the CUDA `gemm_epilogue` rung):
the library GEMM's call (nn.Linear / torch.matmul / torch.bmm) and the kernel after it become one
extension call.

The classic shared-memory SGEMM: a block computes a BLOCK_M x BLOCK_N tile of the output with
(BLOCK_M / THREAD_M) x (BLOCK_N / THREAD_N) threads, each holding THREAD_M x THREAD_N fp32
accumulators; every BLOCK_K step stages an A and a B tile in shared memory as fp32 (a bf16 program's
operands converted on the load, as cuBLAS accumulates bf16 in fp32), each thread multiplying its
THREAD_M values of A by its THREAD_N of B for each k. The global loads walk the operand's
contiguous dim (x's and nn.Linear's weight's K, a matmul's B's N): consecutive threads read
consecutive addresses. The epilogue adds the bias, rounds as the library's bf16 output would, and
runs the chain on each output element before one store. Bug half_accumulator (bf16 programs): the
accumulators kept in bf16, every product rounded and added (precision.gemm_breaks at BLOCK_K 1
decides where it breaks). A block of more than 1,024 threads builds and its launch is refused
(module.simulate: a resources failure).
"""
from __future__ import annotations

from .chain import chain_lines, kernel_args, rounded_entry
from .cuda_src import _checks, _host_args, _launch_args, _load, _ptrs
from .kernels import Kernel, chain_parts
from .view import ProgramView


def gemm_threads(params: dict) -> int:
    """Threads of a block: one a THREAD_M x THREAD_N patch of the BLOCK_M x BLOCK_N tile."""
    return (params["BLOCK_M"] // params["THREAD_M"]) * (params["BLOCK_N"] // params["THREAD_N"])


def gemm_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    """(kernel, host function) of a GEMM with its epilogue."""
    steps = view.steps
    head = steps[k.steps[0]]
    args = kernel_args(view, k)
    [(entry, part)] = chain_parts(steps, k)
    U = name.upper()
    body = chain_lines(view, k, entry, part, "cuda", "n", "offs", _load)
    linear = head["op"] == "linear"
    a, b = ("x", "w") if linear else ("a", "b")
    if bug == "half_accumulator":
        acc_t, zero = "__nv_bfloat16", "__float2bfloat16(0.f)"
        fma = "acc[i][j] = __float2bfloat16(to_f(acc[i][j]) + to_f(__float2bfloat16(ra[i] * rb[j])));"
    else:
        acc_t, zero, fma = "float", "0.f", "acc[i][j] += ra[i] * rb[j];"
    consts = [f"constexpr int {U}_BM = {params['BLOCK_M']};", f"constexpr int {U}_BN = {params['BLOCK_N']};",
              f"constexpr int {U}_BK = {params['BLOCK_K']};", f"constexpr int {U}_TM = {params['THREAD_M']};",
              f"constexpr int {U}_TN = {params['THREAD_N']};",
              f"constexpr int {U}_THREADS = ({U}_BM / {U}_TM) * ({U}_BN / {U}_TN);"]
    # B's tile: nn.Linear's weight is [N, K] (K contiguous: k runs fastest), a matmul's B [K, N] (n fastest)
    b_index = (f"        const int kk = i % {U}_BK, nn = i / {U}_BK;" if linear else
               f"        const int kk = i / {U}_BN, nn = i % {U}_BN;")
    lines = [f"__global__ void __launch_bounds__({U}_THREADS) {name}_kernel({_ptrs(args)}, scalar_t* __restrict__ y, "
             "int M, int N, int K, long sab, long sam, long sak, long sbb, long sbk, long sbn) {",
             f"    __shared__ float As[{U}_BK][{U}_BM];", f"    __shared__ float Bs[{U}_BK][{U}_BN];",
             "    const long batch = blockIdx.z;",
             f"    const int row0 = blockIdx.y * {U}_BM, col0 = blockIdx.x * {U}_BN;",
             f"    const int ty = threadIdx.x / ({U}_BN / {U}_TN), tx = threadIdx.x % ({U}_BN / {U}_TN);",
             f"    const scalar_t* A = {a} + batch * sab;", f"    const scalar_t* B = {b} + batch * sbb;",
             f"    {acc_t} acc[{U}_TM][{U}_TN];", "#pragma unroll",
             f"    for (int i = 0; i < {U}_TM; ++i)", "#pragma unroll", f"        for (int j = 0; j < {U}_TN; ++j) acc[i][j] = {zero};",
             f"    for (int k0 = 0; k0 < K; k0 += {U}_BK) {{",
             f"        for (int i = threadIdx.x; i < {U}_BM * {U}_BK; i += {U}_THREADS) {{",
             f"            const int kk = i % {U}_BK, mm = i / {U}_BK;",
             "            const int gm = row0 + mm, gk = k0 + kk;",
             "            As[kk][mm] = (gm < M && gk < K) ? to_f(A[gm * sam + gk * sak]) : 0.f;", "        }",
             f"        for (int i = threadIdx.x; i < {U}_BK * {U}_BN; i += {U}_THREADS) {{",
             "    " + b_index, "            const int gk = k0 + kk, gn = col0 + nn;",
             "            Bs[kk][nn] = (gk < K && gn < N) ? to_f(B[gk * sbk + gn * sbn]) : 0.f;", "        }",
             "        __syncthreads();", "#pragma unroll", f"        for (int kk = 0; kk < {U}_BK; ++kk) {{",
             f"            float ra[{U}_TM], rb[{U}_TN];", "#pragma unroll",
             f"            for (int i = 0; i < {U}_TM; ++i) ra[i] = As[kk][ty * {U}_TM + i];", "#pragma unroll",
             f"            for (int j = 0; j < {U}_TN; ++j) rb[j] = Bs[kk][tx * {U}_TN + j];", "#pragma unroll",
             f"            for (int i = 0; i < {U}_TM; ++i)", "#pragma unroll",
             f"                for (int j = 0; j < {U}_TN; ++j) {fma}", "        }",
             "        __syncthreads();", "    }", "#pragma unroll", f"    for (int i = 0; i < {U}_TM; ++i) {{", "#pragma unroll",
             f"        for (int j = 0; j < {U}_TN; ++j) {{",
             f"            const int m = row0 + ty * {U}_TM + i, n = col0 + tx * {U}_TN + j;",
             "            if (m >= M || n >= N) continue;", "            const long offs = batch * M * N + (long)m * N + n;",
             "            float v = to_f(acc[i][j]);"]
    if linear and head["params"]["bias"]:
        lines.append("            v += to_f(bias[n]);")
    lines += ["            " + s for s in rounded_entry(view, part, "cuda") + body]
    lines += ["            store_f(&y[offs], v);", "        }", "    }", "}"]
    launch = [f"    const dim3 grid((N + {U}_BN - 1) / {U}_BN, (M + {U}_BM - 1) / {U}_BM, batches);",
              f"    {name}_kernel<<<grid, {U}_THREADS>>>(",
              f"        {_launch_args(args)}, (scalar_t*)y.data_ptr(), M, N, K, sab, sam, sak, sbb, sbk, sbn);",
              "    return y;", "}"]
    checks = _checks(args)
    sig = f"torch::Tensor {name}({_host_args(args)}) {{"
    if linear:
        shape = ", ".join(str(d) for d in head["out"]["shape"])
        host = [sig, *checks, "    const int K = x.size(-1), N = w.size(0), M = x.numel() / K;",
                f"    auto y = torch::empty({{{shape}}}, x.options());",
                "    const int batches = 1;", "    const long sab = 0, sam = K, sak = 1, sbb = 0, sbk = 1, sbn = K;"]
    elif head["op"] == "bmm":
        host = [sig, *checks, "    const int batches = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);",
                "    auto y = torch::empty({batches, M, N}, a.options());",
                "    const long sab = (long)M * K, sam = K, sak = 1, sbb = (long)K * N, sbk = N, sbn = 1;"]
    else:
        host = [sig, *checks, "    const int M = a.size(0), K = a.size(1), N = b.size(1);",
                "    auto y = torch::empty({M, N}, a.options());", "    const int batches = 1;",
                "    const long sab = 0, sam = K, sak = 1, sbb = 0, sbk = N, sbn = 1;"]
    return "\n".join(consts + lines), "\n".join(host + launch)


# The kernel's time, from what nvcc makes of it (nvcc 13.0 -O3 for sm_90, cuobjdump -sass of the renders at 64x64x16 with
# 2x2, 4x4 and 8x8 patches, 128x32x32 with 8x2, 128x128x8 with 8x8): no tensor-core instruction (FFMA only; a bf16
# operand is converted to fp32 on its load into shared memory), the kk loop unrolled, each thread's THREAD_M values of A
# and THREAD_N of B read with LDS.128 (LDS.64 for a side of 2), THREAD_M x THREAD_N FFMA a kk; 40 registers a thread
# at 2x2, 60 at 4x4, 118-128 at 8x8 (Launch.regs: 32 + patch + TM + TN), no spills. An SM issues 4 warp-instructions
# a clock (one a scheduler), 4 of them FFMA, and its shared memory serves one 128-byte wavefront a clock; a warp's
# vector LDS costs the distinct bytes its lanes read / 128 (lanes of one row or column read the same words: a
# broadcast). The 4x4 patch of the 64x64 tile: 16 FFMA, 2 LDS.128 of 3 wavefronts a kk -- issue-bound, not starved
# of operands (cuda_gemm_ms's first model, 2026-12-06 morning, had it at half the FMA rate).
ISSUE_PER_CLK = 4          # warp-instructions an SM issues a clock (4 schedulers)
FFMA_PER_CLK = 4           # FFMA warp-instructions an SM retires a clock (128 fp32 lanes)
WAVEFRONT_BYTES = 128      # shared memory an SM serves a clock
LOAD_INSTRS = 4            # instructions a thread spends on each element it stages (address, bound checks, LDG, STS)
STAGING_UNROLL = 4         # nvcc unrolls each staging loop (`for (i = threadIdx.x; i < BM * BK; i += THREADS)`) by 4: a
#                            thread's loads go out 4 at a time, each batch's stores waiting for its data (SASS of 8x8
#                            at 64x64x16: 16 loads a thread an operand in 4 batches of 4 LDG then 4 STS)
# Fitted to the third session's profiler rows (H100, the GEMM kernel alone; fused-s4747-000004: 512 x 512 x 1024 fp32 at
# 64x64x16 with 4x4 / 8x8 / 2x2 patches and 128x32x32 with 8x2, 105.7 / 247.8 / 120.8 / 129.8 us; -000029: 2048 x 2048
# x 64 at 64x64x16, 4x4, 34.8 us), least squares on log time: within 12-20 % but 8x8 (1.2x slow), the order of the four
# tiles of one program right but 2x2 / 8x2 (121 / 130 measured; 150 / 111 modelled)
TRIP_US = 0.44             # one batch of staging loads: an L2 round trip, then its stores and the scoreboard
COMPUTE_STALL = 1.8        # the issue-bound clocks stretched by dependency and barrier stalls
FULL_RATE_THREADS = 128    # threads an SM needs resident to keep its schedulers issuing (a warp a scheduler)
GEMM_MEMORY_EFF = 0.8      # the output's DRAM writes, after the K loop (the epilogue's stores)


def kk_clocks(params: dict) -> float:
    """SM clocks one warp's kk iteration takes (see above): FFMA, issue, or shared memory, whichever binds."""
    tm, tn, bn = params["THREAD_M"], params["THREAD_N"], params["BLOCK_N"]
    across = bn // tn                                  # threads along N in the block (consecutive in a warp)
    rows, cols = max(1, 32 // across), min(32, across)   # distinct patch rows / columns among a warp's lanes
    lds_a, lds_b = -(-tm // 4), -(-tn // 4)             # LDS.128 (LDS.64 for 2) a kk
    waves = max(lds_a, -(-rows * tm * 4 // WAVEFRONT_BYTES)) + max(lds_b, -(-cols * tn * 4 // WAVEFRONT_BYTES))
    ffma = tm * tn
    return max(ffma / FFMA_PER_CLK, (ffma + lds_a + lds_b) / ISSUE_PER_CLK, waves)


def staging_trips(params: dict) -> int:
    """Batches of global loads a thread waits for in turn each step: its share of A's tile then B's, STAGING_UNROLL
    at a time."""
    threads = gemm_threads(params)
    bk = params["BLOCK_K"]
    return sum(-(-(-(-rows * bk // threads)) // STAGING_UNROLL) for rows in (params["BLOCK_M"], params["BLOCK_N"]))


def cuda_gemm_ms(grid: int, params: dict, k: int, gpu, nbytes: float = 0.0, regs: int = 0) -> float:
    """One CUDA gemm_kernel's time without its launch floor: the clocks of its warps' kk iterations and tile
    loads on each SM (kk_clocks, stretched by COMPUTE_STALL), at the rate the threads resident on the SM allow;
    each step's staging trips (staging_trips x TRIP_US) once a round of resident blocks (they step in lockstep);
    then its output's DRAM writes (`nbytes`: what it moves). The clock is the one the GPU's fp32 peak implies
    (2 flops an FMA lane)."""
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    threads = gemm_threads(params)
    warps = -(-threads // 32)
    smem = (bm + bn) * bk * 4
    resident = max(1, min(gpu.max_threads_per_sm // threads, gpu.max_blocks_per_sm, gpu.smem_per_sm // smem,
                          gpu.regs_per_sm // (max(regs, 32) * threads) if regs else gpu.max_blocks_per_sm))
    per_sm = -(-grid // gpu.sms)                     # blocks an SM runs in all
    together = min(per_sm, resident)                 # ... at once
    clock_hz = gpu.peak("fp32") / (gpu.sms * FFMA_PER_CLK * 32 * 2)
    occupancy = min(1.0, together * threads / FULL_RATE_THREADS)
    steps = -(-k // bk)
    load_clks = LOAD_INSTRS * (bm + bn) * bk / threads / ISSUE_PER_CLK    # a warp's staging of one step
    clocks = per_sm * warps * steps * (bk * kk_clocks(params) + load_clks) / occupancy * COMPUTE_STALL
    latency = -(-per_sm // resident) * steps * staging_trips(params) * TRIP_US * 1e-6
    memory = nbytes / (gpu.bw_tbs * 1e12 * GEMM_MEMORY_EFF)
    return (clocks / clock_hz + latency + memory) * 1e3
