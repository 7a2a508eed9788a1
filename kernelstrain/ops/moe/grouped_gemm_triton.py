"""MoE grouped GEMM in Triton: every routed (token, slot) row times its expert's weight matrix.

Rows arrive expert-sorted: sorted_ids holds assignment ids a = t * topk + j grouped by expert, expert_offsets[e]..
expert_offsets[e + 1] is expert e's range; y[a] = x[a // topk] @ w[e]^T. Ladder: one program per row (CUDA-core dot
products) -> tl.dot tiles over an E x max-blocks grid (most programs exit) -> compact grid with in-kernel expert lookup
and pipelined loads -> m-fastest program order so concurrent programs share expert weight tiles in L2 -> persistent
programs with tensor-descriptor (TMA) loads of the weights.
"""
import math
from functools import partial

from .._triton_smem import dot_loop_smem
from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr
from .grouped_gemm_spec import ENTRY, GroupedGemmSpec, routing, short_runs
from ..matmul.gemm_fp16_spec import HALF_BF16
from ..matmul.gemm_fp16_triton import acc_spill

BM = Param("BLOCK_M", (16, 32, 64, 128), 64)
BN = Param("BLOCK_N", (64, 128), 128)
STAGES = Param("num_stages", (2, 3, 4), 3)
WARPS = Param("num_warps", (4, 8), 4)
# N tiles 256 wide on m_fastest_order (as vLLM's tuned fused_moe configs) and persistent_tma (TMA's largest box): the
# H100 ran the latter correct, 1.18x ahead of 128 at T=4096 E=8, 1.10x at T=2048 E=64 on 3 stages, 1.19x behind on 4
# (modelled level; 128 rows, 8 warps: measurements/h100_roomT_r1.json)
BN_WIDE = Param("BLOCK_N", (64, 128, 256), 128)
LOOKUP = (BM, BN_WIDE, Param("BLOCK_K", (32, 64), 64), STAGES, WARPS)
KERNEL_ARGS = ("x_ptr, w_ptr, y_ptr, ids_ptr, offsets_ptr, N, K, E: tl.constexpr, E_P2: tl.constexpr, "
               "TOPK: tl.constexpr,\n                        ")
# the accumulator (init, step) and the K loop bound; half_accumulator and off_by_one replace them
ACC32 = ("tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", "acc = tl.dot(a, tl.trans(b), acc)")
ACC16 = ("tl.zeros((BLOCK_M, BLOCK_N), dtype=y_ptr.dtype.element_ty)", "acc += tl.dot(a, tl.trans(b)).to(y_ptr.dtype.element_ty)")
K_TILES = "tl.cdiv(K, BLOCK_K)"
# upper bound on m-blocks without a host sync: every expert adds at most one partial block
COMPACT_GRID = "((triton.cdiv(sorted_ids.numel(), {bm}) + {E}) * triton.cdiv(N, {bn}),)"


# -- constexprs and the wrapper ------------------------------------------------------------
def base_consts(p, task) -> dict:
    consts = {"E": task["E"], "E_P2": 1 << (task["E"] - 1).bit_length(), "TOPK": task["topk"]}
    consts.update({k: v for k, v in p.items() if k not in ("num_warps", "num_stages")})
    return consts

def grid_consts(p, task) -> dict:
    return {**base_consts(p, task), "MAX_M_BLOCKS": cdiv(task["T"], p["BLOCK_M"])}   # an expert gets at most T rows

def persistent_consts(p, task) -> dict:
    return {**base_consts(p, task), "NUM_PROGS": task.gpu.sms * resident(p, task)}

def wrapper(p, task, grid: str, pre: str = "", consts=base_consts, extra: str = "") -> str:
    kw = ", ".join(f"{k}={v}" for k, v in consts(p, task).items() if k != "NUM_PROGS") + extra
    return f"""

{ENTRY.py_def(task)}:
    N, K = w.shape[1], w.shape[2]
    y = torch.empty((sorted_ids.numel(), N), device=x.device, dtype=x.dtype)
{pre}    grid = {grid}
    grouped_gemm_kernel[grid](x, w, y, sorted_ids, expert_offsets, N, K, {kw},
                              num_warps={p.get('num_warps', 4)}, num_stages={p.get('num_stages', 1)})
    return y
"""

# -- launch models ---------------------------------------------------------------------------
def row_per_program_launch(p, task):
    rows, active, per_expert = routing(task)
    n, bn, bk, threads = task["N"], p["BLOCK_N"], p["BLOCK_K"], 4 * task.gpu.warp
    w_bytes = active * n * task["K"] * DTYPE_BYTES[task.dtype]
    # rows of one expert run side by side, so their weight tiles mostly come from L2
    return Launch(grid=rows * cdiv(n, bn), threads=threads, regs=32 + bn * bk // threads,
                  bytes_per_access=16, traffic=1 + 0.05 * w_bytes * (per_expert - 1) / GroupedGemmSpec().cost(task).bytes,
                  compute_scale=task.gpu.triton_dot_scale, lane_util=min(1.0, n / bn))


def tile_launch(l2_w_hit: float, mode: str = "lookup"):
    """The tl.dot rungs: mode 'grid' (E x max-blocks grid, most programs exit), 'lookup' (compact
    grid, pipelined) or 'persistent' (programs loop over the tiles); l2_w_hit: the share of w[e]
    re-reads L2 serves."""
    def launch(p, task):
        t, k, n, e, gpu = task["T"], task["K"], task["N"], DTYPE_BYTES[task.dtype], task.gpu
        rows, active, per_expert = routing(task)
        bm, bn, bk, stages = p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"], p.get("num_stages", 1)
        threads = p.get("num_warps", 4) * gpu.warp
        m_blocks, n_blocks = active * cdiv(math.ceil(per_expert), bm), cdiv(n, bn)
        tiles = int(m_blocks) * n_blocks
        quant = rows / (m_blocks * bm) * n / (n_blocks * bn)
        scale = gpu.triton_dot_scale * min(1.0, (bm * bn / (bm + bn)) / 85.3) ** 0.35 * (0.93 if bk == 32 else 1.0)
        scale *= acc_spill(bm * bn // threads)      # 128 x 256 on 4 warps: 256 accumulators a thread
        if mode == "grid":
            launched = task["E"] * cdiv(t, bm) * n_blocks     # programs past their expert's rows exit at once
            scale *= tiles / (tiles + 0.1 * (launched - tiles))
        else:
            scale *= {1: 0.85, 2: 0.9, 3: 0.97, 4: 1.0, 5: 1.0}[stages]    # 5 (a stored roomK j1 row) as 4
        # DRAM: w[e] re-streamed per m-block unless resident programs share it; gathered x rows mostly hit L2
        w_reread = active * n * k * e * (m_blocks / active - 1) * (1 - l2_w_hit)
        x_reread = rows * k * e * (n_blocks - 1) * 0.05
        stage_bytes, smem, grid = (bm * bk + bn * bk) * e, dot_loop_smem(task, bm, bn, bk, e, stages, gathered=True), tiles
        if mode == "persistent":
            if "tma" in gpu.features:
                smem += 24                                   # mbarriers of the descriptor loads
            else:
                scale *= 0.93                                # descriptors fall back to pointer loads
            grid = min(tiles, gpu.sms * resident(p, task))
            scale *= tiles / (cdiv(tiles, grid) * grid)
        return Launch(grid=max(1, grid), threads=threads, smem_bytes=smem, regs=min(255, bm * bn // threads + 40),
                      bytes_per_access=max(4, stage_bytes * max(1, stages - 1) // (threads * 2)),
                      traffic=short_runs(bk * e) * (1 + (w_reread + x_reread) / GroupedGemmSpec().cost(task).bytes),
                      compute_scale=scale, tile_quant=quant)
    return launch


# -- row_per_program -----------------------------------------------------------------------
def row_per_program_src(p, task, cmp="<=", acc_t="tl.float32"):
    grid = f"(sorted_ids.numel(), triton.cdiv(N, {p['BLOCK_N']}))"
    return f"""
@triton.jit
def grouped_gemm_kernel({KERNEL_ARGS}BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pos = tl.program_id(0)                 # position in expert-sorted order
    pid_n = tl.program_id(1)
    e_idx = tl.arange(0, E_P2)
    ends = tl.load(offsets_ptr + 1 + e_idx, mask=e_idx < E, other=2147483647)
    expert = tl.sum((ends {cmp} pos).to(tl.int32), axis=0)   # experts that end at or before this row
    a_id = tl.load(ids_ptr + pos)
    x_row = x_ptr + (a_id // TOPK).to(tl.int64) * K
    w_e = w_ptr + expert.to(tl.int64) * N * K
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_N,), dtype={acc_t})
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        xv = tl.load(x_row + kk, mask=kk < K, other=0.0).to(tl.float32)
        wt = tl.load(w_e + rn[:, None] * K + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        # CUDA cores: one row dotted with BLOCK_N weight rows
        acc += tl.sum(wt.to(tl.float32) * xv[None, :], axis=1).to({acc_t})
    tl.store(y_ptr + a_id.to(tl.int64) * N + rn, acc.to(y_ptr.dtype.element_ty), mask=rn < N)
""" + wrapper(p, task, grid)

# -- the tl.dot rungs -----------------------------------------------------------------------
def tile_body(acc, k_tiles: str) -> str:
    """Gather BLOCK_M expert-sorted rows, multiply by w[expert] tiles, scatter to y by assignment id."""
    init, step = acc
    return f"""    rm = tl.arange(0, BLOCK_M)
    row_ok = start + rm < row_hi
    a_id = tl.load(ids_ptr + start + rm, mask=row_ok, other=0)
    tok = a_id // TOPK
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = x_ptr + tok[:, None].to(tl.int64) * K + rk[None, :]            # gathered token rows
    b_ptrs = w_ptr + expert.to(tl.int64) * N * K + rn[:, None] * K + rk[None, :]
    acc = {init}
    for kt in range(0, {k_tiles}):
        k_left = K - kt * BLOCK_K
        a = tl.load(a_ptrs, mask=row_ok[:, None] & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < k_left), other=0.0)
        {step}
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    y_ptrs = y_ptr + a_id[:, None].to(tl.int64) * N + rn[None, :]          # scatter back by assignment id
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & (rn[None, :] < N))
"""

def expert_grid_dot_src(p, task, acc=ACC32, k_tiles=K_TILES):
    grid = f"({task['E']} * {cdiv(task['T'], p['BLOCK_M'])} * triton.cdiv(N, {p['BLOCK_N']}),)"
    return f"""
@triton.jit
def grouped_gemm_kernel({KERNEL_ARGS}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        MAX_M_BLOCKS: tl.constexpr):
    # grid covers every expert as if it got all T tokens; row-major order (N blocks fastest)
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = pid // num_pid_n, pid % num_pid_n
    expert = pid_m // MAX_M_BLOCKS
    row_lo = tl.load(offsets_ptr + expert)
    row_hi = tl.load(offsets_ptr + expert + 1)
    start = row_lo + (pid_m % MAX_M_BLOCKS) * BLOCK_M
    if start >= row_hi:                    # most programs: this expert has fewer rows
        return
{tile_body(acc, k_tiles)}""" + wrapper(p, task, grid, consts=grid_consts)

def lookup(cmp: str) -> str:
    return f"""    # expert of m-block pid_m: per-expert block counts, inclusive cumsum, count the ends <= pid_m
    e_idx = tl.arange(0, E_P2)
    lo = tl.load(offsets_ptr + e_idx, mask=e_idx < E, other=0)
    hi = tl.load(offsets_ptr + e_idx + 1, mask=e_idx < E, other=0)
    blocks = tl.cdiv(hi - lo, BLOCK_M)
    ends = tl.cumsum(blocks, axis=0)
    expert = tl.sum((ends {cmp} pid_m).to(tl.int32), axis=0)
    sel = e_idx == expert
    first = tl.sum(tl.where(sel, ends - blocks, 0), axis=0)
    row_hi = tl.sum(tl.where(sel, hi, 0), axis=0)
    start = tl.sum(tl.where(sel, lo, 0), axis=0) + (pid_m - first) * BLOCK_M
"""

def block_lookup_src(p, task, cmp="<=", acc=ACC32, order: str = "n"):
    if order == "m":
        pick = """    # m-blocks fastest: the programs resident together work on one N block of consecutive
    # m-blocks, so each w[e] tile is fetched from DRAM about once
    num_pid_m = tl.num_programs(0) // num_pid_n
    pid_m, pid_n = pid % num_pid_m, pid // num_pid_m"""
    else:
        pick = """    pid_m, pid_n = pid // num_pid_n, pid % num_pid_n      # N blocks fastest"""
    return f"""
@triton.jit
def grouped_gemm_kernel({KERNEL_ARGS}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
{pick}
{lookup(cmp)}    if pid_m >= tl.sum(blocks, axis=0):    # grid is an upper bound on the m-blocks
        return
{tile_body(acc, K_TILES)}""" + wrapper(p, task, COMPACT_GRID.format(bm=p["BLOCK_M"], E=task["E"], bn=p["BLOCK_N"]))

# -- persistent_tma ------------------------------------------------------------------------
def resident(p, task) -> int:
    """Persistent programs per SM that fit the pipeline's shared memory and the thread limit."""
    gpu, e = task.gpu, DTYPE_BYTES[task.dtype]
    smem = (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] * e * p["num_stages"] + 24
    return max(1, min(gpu.smem_per_sm // smem, gpu.max_threads_per_sm // (p["num_warps"] * gpu.warp)))


def persistent_tma_src(p, task, acc=ACC32, k_tiles=K_TILES):
    init, step = acc
    pre = ("    triton.set_allocator(_alloc)\n"
           f"    # {resident(p, task)} programs per SM fit this pipeline's shared memory\n"
           "    num_progs = torch.cuda.get_device_properties(x.device).multi_processor_count"
           f" * {resident(p, task)}\n")
    return f"""
@triton.jit
def grouped_gemm_kernel({KERNEL_ARGS}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        NUM_PROGS: tl.constexpr):
    # all experts' weights as one [E * N, K] matrix: a tile of expert e starts at row e * N (N % BLOCK_N == 0)
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    e_idx = tl.arange(0, E_P2)
    lo = tl.load(offsets_ptr + e_idx, mask=e_idx < E, other=0)
    hi = tl.load(offsets_ptr + e_idx + 1, mask=e_idx < E, other=0)
    blocks = tl.cdiv(hi - lo, BLOCK_M)
    ends = tl.cumsum(blocks, axis=0)
    num_pid_m = tl.sum(blocks, axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGS):
        pid_m, pid_n = tile % num_pid_m, tile // num_pid_m     # m fastest across the resident programs
        expert = tl.sum((ends <= pid_m).to(tl.int32), axis=0)
        sel = e_idx == expert
        row_hi = tl.sum(tl.where(sel, hi, 0), axis=0)
        start = tl.sum(tl.where(sel, lo, 0), axis=0) + (pid_m - tl.sum(tl.where(sel, ends - blocks, 0), axis=0)) * BLOCK_M
        row_ok = start + rm < row_hi
        a_id = tl.load(ids_ptr + start + rm, mask=row_ok, other=0)
        a_ptrs = x_ptr + (a_id // TOPK)[:, None].to(tl.int64) * K + rk[None, :]
        acc = {init}
        for kt in range(0, {k_tiles}):
            a = tl.load(a_ptrs, mask=row_ok[:, None] & (rk[None, :] < K - kt * BLOCK_K), other=0.0)
            b = w_desc.load([expert * N + pid_n * BLOCK_N, kt * BLOCK_K])   # TMA on Hopper
            {step}
            a_ptrs += BLOCK_K
        cols = pid_n * BLOCK_N + rn
        tl.store(y_ptr + a_id[:, None].to(tl.int64) * N + cols[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & (cols[None, :] < N))


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)   # scratch for device-side descriptors
""" + wrapper(p, task, "(num_progs,)", pre, persistent_consts, ", NUM_PROGS=num_progs")


class GroupedGemmTriton(GroupedGemmSpec):
    impl = "triton"
    variants = (
        Rung("row_per_program", "one program per (row, N block): expert found by comparing offsets, CUDA-core dot",
             (Param("BLOCK_N", (32, 64, 128), 64), Param("BLOCK_K", (64, 128), 64)), path="fp32",
             compute_eff=0.1, memory_eff=0.6, launch=row_per_program_launch, render=row_per_program_src,
             consts=base_consts, bug_dtypes=HALF_BF16, bugs={"off_by_one": {"cmp": "<"}, "half_accumulator": {"acc_t": "y_ptr.dtype.element_ty"}}),
        Rung("expert_grid_dot", "tl.dot tiles; grid = E x ceil(T / BLOCK_M) m-blocks, programs past an expert's rows exit",
             (BM, BN, Param("BLOCK_K", (32, 64), 32), WARPS), path="fp16", compute_eff=0.42, memory_eff=0.75,
             smem="dynamic", launch=tile_launch(0.5, "grid"), render=expert_grid_dot_src, consts=grid_consts,
             bug_dtypes=HALF_BF16, bugs={"off_by_one": {"k_tiles": K_TILES + " - 1"}, "half_accumulator": {"acc": ACC16}}),
        Rung("block_lookup", "compact grid: each program finds its expert from a cumsum of per-expert block counts; pipelined",
             (BM, BN, Param("BLOCK_K", (32, 64), 64), STAGES, WARPS), path="fp16", compute_eff=0.62,
             memory_eff=0.85, smem="dynamic", launch=tile_launch(0.5), render=block_lookup_src, consts=base_consts,
             bug_dtypes=HALF_BF16, bugs={"off_by_one": {"cmp": "<"}, "half_accumulator": {"acc": ACC16}}),
        Rung("m_fastest_order", "m-blocks fastest in program order: resident programs share w[e] tiles in L2",
             LOOKUP, path="fp16", compute_eff=0.66,
             memory_eff=0.88, smem="dynamic", launch=tile_launch(0.95), render=partial(block_lookup_src, order="m"),
             consts=base_consts, bug_dtypes=HALF_BF16, bugs={"off_by_one": {"cmp": "<"}, "half_accumulator": {"acc": ACC16}}),
        Rung("persistent_tma", "persistent programs loop over (m-block, n-block) tiles; weights via tensor descriptors",
             (Param("BLOCK_M", (32, 64, 128), 64), BN_WIDE, Param("BLOCK_K", (64, 128), 64), STAGES, WARPS),
             path="fp16", compute_eff=0.72, memory_eff=0.9, smem="dynamic", launch=tile_launch(0.96, "persistent"),
             render=persistent_tma_src, consts=persistent_consts,
             bug_dtypes=HALF_BF16, bugs={"half_accumulator": {"acc": ACC16}, "off_by_one": {"k_tiles": K_TILES + " - 1"}}),
    )

    def assemble(self, kernel, variant, params, task):
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, "ids_ptr": "*i32", "offsets_ptr": "*i32", "N": "i32", "K": "i32"}
        consts = variant.consts(params, task)
        sig.update({name: "constexpr" for name in consts})
        return [KernelSpec("grouped_gemm_kernel", sig, consts, num_warps=params.get("num_warps", 4),
                           num_stages=params.get("num_stages", 1))]
