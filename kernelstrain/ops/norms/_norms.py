"""Pieces shared by the norm modules (not an op module itself): the 16-byte Pack union and
the block-wide shuffle sum of the CUDA renders, and next_pow2 for the Triton row tiles.

>>> next_pow2(5120), next_pow2(4096)
(8192, 4096)
"""
from ..base import DTYPE_BYTES, KernelSpec, Launch, TRITON_PRELUDE, triton_ptr


# CUDA: the Pack union of the uint4 variants.
VEC_PACK = """
// 8 x 16-bit elements travel as one 16-byte uint4.
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };
"""

# CUDA: needs THREADS #defined first, and warp_sum from the dialect's prelude (dialect.prelude).
BLOCK_SUM = """
// Sum over the block: shuffle within each warp, then the first warp sums the warp totals.
__device__ __forceinline__ float block_sum(float v, float* warp_totals) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_sum(v);
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / WARP_SIZE) ? warp_totals[lane] : 0.f;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) warp_totals[0] = v;
    __syncthreads();
    return warp_totals[0];
}
"""


BLOCK_REDUCE_WARPS = 8     # warps of a block-wide reduction that cost about one DRAM round trip


def block_row_rounds(threads: int, warp: int, reductions: int) -> int:
    """Launch.rounds of a block-per-row CUDA kernel, in DRAM round trips a row waits on: its first
    load, then each block-wide reduction (partials to shared memory, a barrier every warp must
    reach, warp 0's shuffle tree, the broadcast behind a second barrier), a chain that lengthens
    with the block's warps. Short rows under big blocks are bound by it, not by bandwidth (H200,
    softmax_cuda R=16384 C=1024: 512-1024 threads 0.11-0.41 ms, 128 threads 0.033-0.040 ms).

    >>> block_row_rounds(128, 32, 2), block_row_rounds(1024, 32, 2)
    (2, 9)
    """
    return 1 + -(-reductions * -(-threads // warp) // BLOCK_REDUCE_WARPS)


def next_pow2(n: int) -> int:
    """Smallest power of two >= n: the width of a Triton tile that holds a whole row."""
    return 1 << (n - 1).bit_length()


SPILL_SATURATION = 9.0     # at most ~10x: past it every use already reloads from local memory (L1/L2)
LOOP_SPILL = 1.0           # traffic per 32 spilled loop-carried registers (triton_spill)


def triton_spill(regs: int, cap: int, pinned: int = 0) -> float:
    """DRAM traffic factor of a Triton row whose estimated register demand `regs` (fp32 copies)
    passes the per-thread cap: the compiler keeps 16-bit loads packed and rematerializes, so it
    holds about twice the estimate before spilling (H200, h200_kernels.json: no slowdown up to
    2x the cap, several times slower at 4x). `pinned` of the registers are loop-carried (dW/dB
    accumulators, a prefetched next row): live across the whole loop, they cannot be recomputed
    or re-packed, so they count in full (H200: layernorm_bwd persistent_prefetch at 64 elements a
    thread ran 12x slower than at 32). The penalty saturates (SPILL_SATURATION): once every use
    of the row reloads it, more excess adds little (rmsnorm_triton 16 rows x 4096 in one warp,
    2048 a thread: 0.28 ms, 20x its DRAM time, not the 46x a linear excess gives)."""
    excess = max(0.0, pinned + (regs - pinned) / 2 - cap)
    x = excess / 32
    # a loop-carried value that spills is stored and reloaded on every row the loop walks, not once
    # per use of one row, so its cost does not saturate (H200, layernorm_bwd persistent_prefetch at
    # 64 elements a thread: 8-18x slower than at 32, 2.4-7x what the saturating row term gives;
    # h200_gpucheck_pgrid.json, s3131 T=16384 D=8192)
    carried = min(pinned, excess) / 32
    return 1.0 + x * SPILL_SATURATION / (x + SPILL_SATURATION) + LOOP_SPILL * carried


def row_in_flight(per: int, elt: int) -> int:
    """Launch.bytes_per_access of a thread that loads its `per` row elements at once: 16-byte
    vectors, all issued before the reduction waits on them (the simulator counts two loads in
    flight per thread, so half the row's bytes)."""
    return max(min(16, per * elt), per * elt // 2)


def row_in_registers_launch(params: dict, task, rows: int, regs: int, threads: int, smem: int,
                            per: int, elt: int, util: float):
    """Launch model of a Triton program that holds a whole row in registers: the register file
    caps what one thread may hold and the excess spills through L1/L2; a persistent grid keeps a
    load in flight during the reduction, one program per row does not."""
    gpu = task.gpu
    cap = min(255, gpu.regs_per_sm // threads)
    spill = triton_spill(regs, cap)
    if "programs_per_sm" in params:
        grid = min(rows, gpu.sms * params["programs_per_sm"])
    else:
        grid, util = rows, util * 0.85
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(regs, cap),
                  bytes_per_access=row_in_flight(per, elt), traffic=spill, lane_util=util, rounds=-(-rows // grid),
                  unrolled=per)


PERSISTENT_GRID = "min(T, torch.cuda.get_device_properties(x.device).multi_processor_count * PROGRAMS_PER_SM)"


def row_program(task, entry, kernel: str, name: str, launch_args: str, consts: dict, params: dict,
                rows: int = 1) -> str:
    """A Triton candidate of one row kernel: imports, PROGRAMS_PER_SM when persistent, the
    @triton.jit source (`name` is the kernel it launches) and the wrapper (its def line from the
    entry) launching one program per `rows` rows, or a persistent grid."""
    kw = "".join(f"{k}={v}, " for k, v in consts.items())
    if "programs_per_sm" in params:
        grid, head = PERSISTENT_GRID, f"PROGRAMS_PER_SM = {params['programs_per_sm']}\n\n\n"
    else:
        grid, head = f"triton.cdiv(T, {rows})", ""
    return f"""{TRITON_PRELUDE}
{head}@triton.jit
{kernel.strip(chr(10))}


{entry.py_def(task)}:
    T, D = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    grid = ({grid},)
    {name}[grid]({launch_args}, {kw}num_warps={params['num_warps']})
    return y
"""


def lane_rows_launch(block: str, rows: str, traffic: float):
    """Launch model of a Triton rung whose every lane walks its own row (`block` rows a program,
    `rows` the task's row dim): uncoalesced 32-byte sectors, lanes past `block` replicate rows."""
    def launch(p, task):
        t, bt, threads = task[rows], p[block], p["num_warps"] * task.gpu.warp
        return Launch(grid=-(-t // bt), threads=threads, regs=32, bytes_per_access=32, traffic=traffic,
                      lane_util=min(1.0, bt / threads) * min(1.0, t / bt))
    return launch


def chunk_launch(rows: str, cols: str, regs_per: int, traffic: float, smem_per_warp: int = 4, launches: int = 1):
    """Launch model of a Triton program per row streaming BLOCK-wide chunks: `regs_per` registers
    per element a thread holds of a chunk."""
    def launch(p, task):
        c, elt, nw, block = task[cols], DTYPE_BYTES[task.dtype], p["num_warps"], p["BLOCK"]
        threads = nw * task.gpu.warp
        per = max(1, block // threads)
        return Launch(grid=task[rows], threads=threads, smem_bytes=smem_per_warp * nw, regs=24 + regs_per * per,
                      bytes_per_access=min(16, per * elt), traffic=traffic,
                      lane_util=min(1.0, c / block) * min(1.0, block / threads), launches=launches)
    return launch


class RowKernelTriton:
    """triton_kernels() and assemble() of a Triton norm whose candidate is one row kernel,
    `kernel_name`, taking `pointers` then T, D, eps and its rung's constants, launched by
    row_program with the wrapper's `launch_args`. Put it before the spec in the bases."""
    kernel_name = ""
    pointers: tuple = ()
    launch_args = ""

    def triton_kernels(self, variant, params, task) -> list:
        consts = variant.consts(params, task)
        sig = {**dict.fromkeys(self.pointers, triton_ptr(task.dtype, task)), "T": "i32", "D": "i32", "eps": "fp32",
               **dict.fromkeys(consts, "constexpr")}
        return [KernelSpec(self.kernel_name, sig, consts, num_warps=params["num_warps"], num_stages=1)]

    def assemble(self, kernel, variant, params, task) -> str:
        consts = variant.consts(params, task)
        return row_program(task, self.entry, kernel, self.kernel_name, self.launch_args, consts, params,
                           consts.get("BLOCK_T", consts.get("ROWS", 1)))


def rows_follow(task, p) -> bool:
    """rmsnorm_cuda vectorized_uint4's no_bounds_check runs its write loop one pass of THREADS chunks too far: row r
    writes that pass over row r + 1's first chunks. With one row (T 1) it writes only past y, where a check of y
    cannot see it: the H100 matched y exactly (rel_l2 0.0) at T 1 at all 4 configurations (labels n1, j2), only
    gpu-check's guard after y caught the write, and a harness's assert_close would pass it. Offered from T 2 (the H100
    at T 64: 32,000-128,000 of y's 262,144 values wrong at every configuration)."""
    return task["T"] >= 2
