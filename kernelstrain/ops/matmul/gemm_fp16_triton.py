"""Dense GEMM C = A . B^T in Triton (B [N, K], the nn.Linear layout), fp16/bf16 in, fp32 accumulate.

Ladder: broadcast-multiply-sum on CUDA cores -> tl.dot tiles (tensor cores, no pipelining)
-> grouped program order for L2 reuse -> software-pipelined loads with tuned stages/warps
-> persistent programs (grid = #SMs) fed by tensor descriptors (TMA on Hopper).
"""
from dataclasses import replace

from .._triton_smem import dot_loop_smem
from ..base import KernelSpec, Launch, Param, Rung, Task, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, triton_wgmma
from ._gemm_dot_triton import dot_kernel
from ._narrow_k import narrow_k_s
from .gemm_fp16_spec import ENTRY, HALF_BF16, GemmFp16Spec

BLOCK_M = Param("BLOCK_M", (64, 128), 128)
BLOCK_N = Param("BLOCK_N", (64, 128, 256), 128)
BLOCK_K = Param("BLOCK_K", (32, 64), 32)
# 2: one K step's tiles in flight while the other's feed the dot (the shallowest real pipeline; fits where 3
# stages of a wide tile do not: sm_86's 99 KB block)
STAGES = Param("num_stages", (2, 3, 4, 5), 3)
WARPS = Param("num_warps", (4, 8), 4)
PERSISTENT_TMA = (BLOCK_M, Param("BLOCK_N", (128, 256), 128), Param("BLOCK_K", (64, 128), 64), STAGES, WARPS)
# the accumulator (init, step) and the K loop bound; half_accumulator and off_by_one replace them
ACC32 = ("tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", "acc = tl.dot(a, b, acc)   # fp32 accumulate on tensor cores")
ACC16 = ("tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)", "acc += tl.dot(a, b).to(c_ptr.dtype.element_ty)")
K_TILES = "tl.cdiv(K, BLOCK_K)"
PIPE_DEPTH = {2: 0.85, 3: 0.95, 4: 1.0, 5: 1.0}   # tensor-core share a pipelined K loop keeps fed, by num_stages
# A 64-wide wgmma (m64n64k16) re-reads its A operand from shared memory for half the MMA work of an n128 one. H100
# (room_device_check_triton KNOBT_SET=tuning, 2026-12-06), pipelined_stages 128 x 64 x 32 at 3 stages: 400.6 us at
# 4096^3 against 128 x 128's 280.1 (1.43x), where _tile_scale alone left them equal; 183.4 vs 203.8 at M=128 N=4096
# K=14336 (twice the programs on 132 SMs). 0.5 (the A reads a FLOP doubled): 250 vs 192 us and 155 vs 175 modelled
WGMMA_N64 = 0.5
SHORT_K = {"k_tiles": K_TILES + " - 1"}


def _tile_scale(bm: int, bn: int, bk: int) -> float:
    """Tensor-core efficiency of a BM x BN x BK tile: operand reuse per smem byte (128x256 best)."""
    intensity = bm * bn / (bm + bn)
    return min(1.0, intensity / 85.3) ** 0.35 * {16: 0.8, 32: 0.93, 64: 1.0, 128: 0.97}[bk]


def acc_spill(acc_regs: int) -> float:
    """Tensor-core share left by a tl.dot accumulator of acc_regs fp32 registers a thread: past ~160 it
    spills; past the 255-register file (128x256, 4 warps) every K step reloads it (H200: 4-13x)."""
    return 1.0 if acc_regs <= 160 else 0.6 if acc_regs + 40 <= 255 else 0.12


# -- constexprs and the wrapper --------------------------------------------------------------
def tile_consts(p, task) -> dict:
    """constexpr kernel arguments: the tile params."""
    return {k: v for k, v in p.items() if k not in ("num_warps", "num_stages")}


def fixed_group_consts(p, task) -> dict:
    return {**tile_consts(p, task), "GROUP_M": 8}      # where the ladder stops tuning GROUP_M


def persistent_consts(p, task) -> dict:
    return {**fixed_group_consts(p, task), "NUM_PROGS": task.gpu.sms * resident(p, task)}


def wrapper(p, task, grid: str, consts=tile_consts) -> str:
    kw = ", ".join(f"{k}={v}" for k, v in consts(p, task).items())
    warps, stages = p.get("num_warps", 4), p.get("num_stages", 1)
    note = "# num_stages=1: each K step waits for its own loads" if stages == 1 else "# loads run num_stages-1 K steps ahead"
    return f"""

BLOCK_M, BLOCK_N = {p['BLOCK_M']}, {p['BLOCK_N']}


{ENTRY.py_def(task)}:
    M, K = A.shape
    N = B.shape[0]                          # B is [N, K] (an nn.Linear weight): C = A @ B.T
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    grid = {grid}
    {note}
    gemm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(1), B.stride(0),
                      C.stride(0), C.stride(1), {kw},
                      num_warps={warps}, num_stages={stages})
    return C
"""


# -- launch models ---------------------------------------------------------------------------
def tile_launch(l2_hit: float, mode: str = "dot", n64: bool = False, narrow: bool = False):
    """Launch model of a rung: mode 'broadcast' (no tl.dot), 'dot', 'pipelined' (num_stages tuned) or
    'persistent'; l2_hit: the share of the A/B panel re-reads that L2 serves; n64: 64-wide tiles pay
    WGMMA_N64 (the 16-bit pipelined K loops it was timed on; gemm_splitk / gemm_fp4 untimed); narrow: pointer loads
    at a K not divisible by 16 go one element at a time (narrow_k_s, a floor; timed on this module's rungs only)."""
    def launch(p, task):
        out = _launch(p, task, l2_hit, mode, n64)
        if narrow and task["K"] % 16:
            out = replace(out, issue_s=max(out.issue_s, narrow_k_s(out, task, p["BLOCK_M"], p["BLOCK_N"], p["BLOCK_K"])))
        return out
    return launch


def _launch(params, task, l2_hit: float, mode: str, n64: bool = False) -> Launch:
    m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
    gpu = task.gpu
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    warps = params.get("num_warps", 4)
    stages = params.get("num_stages", 1)
    threads = warps * gpu.warp
    tiles = cdiv(m, bm) * cdiv(n, bn)
    # DRAM traffic: every tile row re-reads its A panel and every tile column its B panel; L2 catches most
    a, b, c = m * k * e, k * n * e, m * n * e
    rereads = a * (cdiv(n, bn) - 1) + b * (cdiv(m, bm) - 1)
    traffic = (a + b + c + (1 - l2_hit) * rereads) / (a + b + c)
    quant = m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)
    vendor = gpu.triton_dot_scale    # MFMA codegen of Triton trails cuBLAS-class on MI300X (catalog)
    stage_bytes = (bm * bk + bk * bn) * e
    in_flight = stage_bytes * max(1, stages - 1) // (threads * 2)   # bytes per thread per load slot
    acc_regs = bm * bn // threads
    # num_stages=1 (the unpipelined rungs' launch): each K step waits for its own loads, a DRAM round trip
    # wherever a step's row segment starts a new 32-byte sector (sim.chain_floor_s)
    trips = cdiv(k, bk) * min(1.0, bk * e / 32) if stages == 1 else cdiv(k, bk) / (stages - 1)
    if mode == "broadcast":
        # ptxas fuses the [BM, BK, BN] product into the reduction's adds: the accumulator and the operand tiles
        # stay live, not the product. Triton 3.9 for sm_90a, 4 warps (cuobjdump --dump-resource-usage): 44-79
        # registers for 16x16x16..32x64x16, 40 + 2 x the accumulator's values a thread within 7 (was up to 255);
        # shared: the operand tiles' fp32 layout conversion (metadata.shared 1.5-6 KB, exact but at 32x64x8)
        regs = 40 + 2 * bm * bn // threads
        smem = max((bm * bk + bk * bn) * 4, bm * bn * 2)
        # a K step's fixed cost (loads, smem layout conversion) spreads over BM*BN*BK FMAs (H200: BK 8->16 1.5x)
        return Launch(grid=tiles, threads=threads, smem_bytes=smem, regs=regs, bytes_per_access=4, traffic=traffic,
                      compute_scale=vendor * min(1.0, (bm * bn / (bm + bn)) / 16 * bk / 16) ** 0.6,
                      tile_quant=quant, serial_trips=trips)
    scale = vendor * _tile_scale(bm, bn, bk) * acc_spill(acc_regs)
    if mode in ("pipelined", "persistent"):
        # a K step's loads issued stages - 1 steps ahead: 2 stages leave one step of MMA (~0.3-1 us at these tiles)
        # to hide an L2/DRAM round trip of the same order, so part of every step still waits
        scale *= PIPE_DEPTH[stages]
    if n64 and bn == 64 and "wgmma" in gpu.features:
        scale *= WGMMA_N64
    smem = dot_loop_smem(task, bm, bn, bk, e, stages, threads if mode == "persistent" else 0, warps=warps)
    # a 64+-row tile on 2 warps: mma.sync, not wgmma (base.triton_wgmma), a ceiling at its rate (sim.compute_ceiling)
    mma_rate = gpu.mma_sync_scale("fp16") if bm >= gpu.triton_full_stage_rows > 0 and not triton_wgmma(task, bm, warps) else 1.0
    grid = tiles
    if mode == "persistent" and "tma" in gpu.features:
        smem += bm * bn * e + 24  # C tile staged for the TMA store, plus mbarriers
        grid = min(tiles, gpu.sms * resident(params, task))
        # the tile loop spreads tiles evenly; the last round is partly idle
        scale *= tiles / (cdiv(tiles, grid) * grid)
        if "tma" not in gpu.features:
            scale *= 0.93   # descriptors fall back to pointer loads without TMA hardware
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=min(255, acc_regs + 40),
                  bytes_per_access=max(4, in_flight), traffic=traffic, compute_scale=scale, tile_quant=quant,
                  serial_trips=trips, mma_rate=mma_rate)


def resident(params: dict, task: Task) -> int:
    """Programs of the persistent kernel resident per SM (smem, registers, threads)."""
    gpu, e = task.gpu, DTYPE_BYTES[task.dtype]
    bm, bn, bk, stages = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"], params["num_stages"]
    threads = params["num_warps"] * gpu.warp
    smem = (bm * bk + bk * bn) * e * stages + (bm * bn * e if "tma" in gpu.features else 0)
    regs = min(255, bm * bn // threads + 40)
    return max(1, min(gpu.smem_per_sm // smem, gpu.regs_per_sm // (threads * regs),
                      gpu.max_threads_per_sm // threads))


def broadcast_sum_src(p, task, acc=("tl.float32", "acc += tl.sum(prod, axis=1)"), k_tiles=K_TILES):
    init, step = acc
    return f"""
@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype={init})
    for kt in range(0, {k_tiles}):
        k = kt * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
        # no tensor cores: a [BM, BK, 1] * b [1, BK, BN] outer products, reduced over K on CUDA cores
        prod = a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :]
        {step}
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
""" + wrapper(p, task, "(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))")


def dot_src(grouped: bool, consts=None):
    """tl_dot_blocked (row-major program order) or the GROUP_M-swizzled rungs; consts: the rung's."""
    def render(p, task, acc=ACC32, k_tiles=K_TILES):
        return dot_kernel(grouped, acc, k_tiles) + wrapper(p, task, "(triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)",
                                                            consts or tile_consts)
    return render


def persistent_tma_kernel(acc=ACC32, k_tiles=K_TILES) -> str:
    """The persistent TMA GEMM kernel (gemm_kernel) and its descriptors' allocator; A [M, K], B [N, K] 16-bit."""
    init, step = acc
    return f"""
@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGS: tl.constexpr):
    # tensor descriptors: on Hopper each tile load is one TMA copy into swizzled shared memory
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = {k_tiles}
    num_pid_in_group = GROUP_M * num_pid_n
    # persistent: NUM_PROGS resident programs stride over the tiles (no launch tail, prologue paid once)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGS, flatten=True):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        acc = {init}
        for kt in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, kt * BLOCK_K])   # out-of-bounds rows/cols arrive as zeros
            b = b_desc.load([pid_n * BLOCK_N, kt * BLOCK_K]).T   # B is [N, K]: a K-major tile
            {step}
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


def _alloc(size: int, alignment: int, stream):
    # device-side descriptors need a small global scratch buffer per program
    return torch.empty(size, device="cuda", dtype=torch.int8)
"""


def persistent_tma_launch(p, task, args="A, B, C") -> str:
    """The wrapper's lines that size the persistent grid and launch persistent_tma_kernel's gemm_kernel on `args`."""
    consts = ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("num_warps", "num_stages"))
    occ = resident(p, task)
    return f"""    triton.set_allocator(_alloc)
    # one program per resident slot: {occ} per SM fit this tile's shared memory and registers
    num_progs = torch.cuda.get_device_properties(A.device).multi_processor_count * {occ}
    tiles = triton.cdiv(M, {p['BLOCK_M']}) * triton.cdiv(N, {p['BLOCK_N']})
    grid = (min(num_progs, tiles),)
    gemm_kernel[grid]({args}, M, N, K, {consts}, GROUP_M=8, NUM_PROGS=num_progs,
                      num_warps={p['num_warps']}, num_stages={p['num_stages']})
"""


def persistent_tma_src(p, task, acc=ACC32, k_tiles=K_TILES):
    return (persistent_tma_kernel(acc, k_tiles) + f"\n\n{ENTRY.py_def(task)}:\n    M, K = A.shape\n    N = B.shape[0]" + " " * 26
            + "# B is [N, K] (an nn.Linear weight): C = A @ B.T\n    C = torch.empty((M, N), device=A.device, dtype=A.dtype)\n"
            + persistent_tma_launch(p, task) + "    return C\n")


class GemmFp16Triton(GemmFp16Spec):
    impl = "triton"
    shapes = ({"M": 16, "N": 8192, "K": 8192}, {"M": 128, "N": 4096, "K": 14336},
              {"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096},
              {"M": 4096, "N": 14336, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192})
    variants = (
        Rung("broadcast_sum", "no tl.dot: outer products over a K chunk summed on CUDA cores",
             (Param("BLOCK_M", (16, 32), 32), Param("BLOCK_N", (16, 32, 64), 32), Param("BLOCK_K", (8, 16), 8)),
             path="fp32", compute_eff=0.12, memory_eff=0.5, smem="dynamic", launch=tile_launch(0.8, "broadcast"),
             render=broadcast_sum_src, consts=tile_consts,
             bug_dtypes=HALF_BF16, bugs={"half_accumulator": {"acc": ("c_ptr.dtype.element_ty",
                                                "acc += tl.sum(prod, axis=1).to(c_ptr.dtype.element_ty)")},
                   "off_by_one": SHORT_K}),
        Rung("tl_dot_blocked", "tl.dot on BMxBK and BKxBN tiles (tensor cores), row-major program order, no pipelining",
             (Param("BLOCK_M", (32, 64, 128), 64), Param("BLOCK_N", (32, 64, 128), 64), BLOCK_K, WARPS),
             path="fp16", compute_eff=0.42, memory_eff=0.75, smem="dynamic", launch=tile_launch(0.85, narrow=True),
             render=dot_src(False), consts=tile_consts, bug_dtypes=HALF_BF16, bugs={"half_accumulator": {"acc": ACC16}, "off_by_one": SHORT_K}),
        Rung("grouped_swizzle", "GROUP_M program swizzle: neighbouring programs share A rows and B columns in L2",
             (BLOCK_M, BLOCK_N, BLOCK_K, Param("GROUP_M", (4, 8, 16), 8), WARPS),
             path="fp16", compute_eff=0.48, memory_eff=0.8, smem="dynamic", launch=tile_launch(0.95, narrow=True),
             render=dot_src(True), consts=tile_consts, bug_dtypes=HALF_BF16, bugs={"off_by_one": SHORT_K, "half_accumulator": {"acc": ACC16}}),
        Rung("pipelined_stages", "num_stages-deep software pipeline of tile loads, tuned num_warps",
             (BLOCK_M, BLOCK_N, Param("BLOCK_K", (32, 64), 32), STAGES, WARPS),
             path="fp16", compute_eff=0.71, memory_eff=0.88, smem="dynamic", launch=tile_launch(0.95, "pipelined", n64=True, narrow=True),
             render=dot_src(True, fixed_group_consts), consts=fixed_group_consts,
             bug_dtypes=HALF_BF16, bugs={"half_accumulator": {"acc": ACC16}, "off_by_one": SHORT_K}),
        Rung("persistent_tma", "persistent programs (grid = #SMs) looping over tiles, tensor-descriptor (TMA) loads",
             PERSISTENT_TMA, path="fp16", compute_eff=0.8, memory_eff=0.9, smem="dynamic", launch=tile_launch(0.96, "persistent"),
             render=persistent_tma_src, consts=persistent_consts,
             bug_dtypes=HALF_BF16, bugs={"half_accumulator": {"acc": ACC16}, "off_by_one": SHORT_K}),
    )

    def assemble(self, kernel, variant, params, task):
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        consts = variant.consts(params, task)
        sig = {"a_ptr": ptr, "b_ptr": ptr, "c_ptr": ptr, "M": "i32", "N": "i32", "K": "i32"}
        if "NUM_PROGS" not in consts:              # the pointer rungs take strides; descriptors know theirs
            sig.update({s: "i32" for s in ("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")})
        sig.update({name: "constexpr" for name in consts})
        k, n = task["K"], task["N"]   # row-major A [M, K], B [N, K] (read as B^T: stride_bk 1), C [M, N]
        strides = {"stride_am": k, "stride_ak": 1, "stride_bk": 1, "stride_bn": k, "stride_cm": n, "stride_cn": 1}
        return [KernelSpec("gemm_kernel", sig, consts, num_warps=params.get("num_warps", 4),
                           num_stages=params.get("num_stages", 1), ints={a: strides[a] for a in sig if a in strides})]
