"""Split-K GEMM in Triton for small M and long K: C = A . B^T (B [N, K]), fp32 accumulate.

Ladder: tl.dot tiles, one program per output tile -> K split over program_id(1) into fp32
partial slices plus a reduce kernel -> tl.atomic_add of the splits into one fp32 workspace ->
software-pipelined loads (num_stages) with the reduce kernel -> one launch: the last program of
each tile to finish (an atomic ticket) sums the partials itself.
"""
from dataclasses import replace

from ..base import KernelSpec, Param, Rung, TRITON_PRELUDE, triton_ptr
from .gemm_fp16_triton import tile_launch
from .gemm_splitk_spec import ENTRY, SPLIT_VALUES, GemmSplitkSpec, split_launch

TILE = (Param("BLOCK_M", (16, 32, 64), 16), Param("BLOCK_N", (32, 64, 128), 64), Param("BLOCK_K", (64, 128), 64))
SPLIT_K = Param("SPLIT_K", SPLIT_VALUES, 8)
# 2 warps: Triton's tutorial small-tile configs (scripts/roomK_interpret.py runs them correct on every rung). On
# sm_90a Triton builds a 2-warp tl.dot with mma.sync, not wgmma, and one fewer operand buffer (base.triton_wgmma: 64 x
# 128 x 128 at 5 stages, metadata.shared 196,608 B), which the launch model prices (gemm_fp16_triton._launch:
# mma_sync_scale where a 64+-row tile would have had wgmma, triton_stage_buffers' count). Device-checked: plan w2 of
# scripts/sim_device.py (measurements/h100_sim_w2.json, an H100 on 2026-12-07) built split_k_reduce, pipelined_split_k
# and split_k_fused_reduce at 2 warps (16 builds), each correct against the PyTorch reference and timed about level
# with the same tile at 4 warps (2-warp / 4-warp time, geomean per shape 1.03 at M=16 K=14336, 1.01 at M=128 K=4096;
# single pairs 0.94-1.23x); tl_dot_tiles and split_k_atomic, the same tl.dot loop, pass at 2 warps under
# TRITON_INTERPRET=1 (scripts/roomK_interpret.py). The Triton smem corpus holds their over-the-cap builds
# (scripts/triton_smem_corpus.py --keep --modules gemm_splitk_triton).
WARPS = Param("num_warps", (2, 4, 8), 4)
PIPE = (Param("num_stages", (3, 4, 5), 4), WARPS)
OUT = "rm[:, None] * N + rn[None, :]"
EPILOGUES = {
    "direct": f"tl.store(out_ptr + {OUT}, acc.to(out_ptr.dtype.element_ty), mask=mask)",
    "partials": f"tl.store(out_ptr + pid_k * M * N + {OUT}, acc, mask=mask)   # this split's fp32 slice",
    "atomic": f"tl.atomic_add(out_ptr + {OUT}, acc, mask=mask, sem=\"relaxed\")   # order-free fp32 sum",
}
RACY = {"store": f"tl.store(out_ptr + {OUT}, tl.load(out_ptr + {OUT}, mask=mask) + acc, mask=mask)"}
SHORT_COMBINE, SHORT_K = {"combine_end": "SPLIT_K - 1"}, {"kt_stop": "kt_end - 1"}
# the last program of a tile (its ticket is SPLIT_K - 1) reads the other splits' partials from L2
FUSED = f"""tl.store(ws_ptr + pid_k * M * N + {OUT}, acc, mask=mask)
    tl.debug_barrier()                       # every thread's slice is stored before the ticket releases it
    ticket = tl.atomic_add(locks_ptr + pid_mn, 1, sem="acq_rel")   # release my slice, acquire theirs
    if ticket == SPLIT_K - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range({{combine_end}}):
            total += tl.load(ws_ptr + s * M * N + {OUT}, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(c_ptr + {OUT}, total.to(c_ptr.dtype.element_ty), mask=mask)"""


def reduce_kernel_src(combine_end: str = "SPLIT_K") -> str:
    """The partials' reduce kernel (also gemm_fp4_triton's split_k_dot_scaled): SPLIT_K fp32 [M, N] slices summed."""
    return f"""

@triton.jit
def splitk_reduce_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    # fixed-order fp32 sum of the SPLIT_K partial slices, one rounding to the output type
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range({combine_end}):
        total += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, total.to(c_ptr.dtype.element_ty), mask=mask)"""


def kernel_src(mode: str, p, store: str, kt_stop: str, combine_end: str) -> str:
    outs = "ws_ptr, c_ptr, locks_ptr" if mode == "fused" else "out_ptr"
    split = ", SPLIT_K: tl.constexpr" if mode != "direct" else ""
    k_range = ("    per = tl.cdiv(k_tiles, SPLIT_K)          # K tiles of one split\n"
               "    kt_begin = pid_k * per\n    kt_end = tl.minimum(k_tiles, kt_begin + per)"
               if mode != "direct" else "    kt_begin = 0\n    kt_end = k_tiles")
    epilogue = FUSED.format(combine_end=combine_end) if mode == "fused" else store
    reduce = "" if mode not in ("partials",) else reduce_kernel_src(combine_end)
    return f"""
@triton.jit
def gemm_splitk_kernel(a_ptr, b_ptr, {outs}, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{split}):
    pid_mn = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid_mn // num_pid_n
    pid_n = pid_mn % num_pid_n
    k_tiles = K // BLOCK_K                   # K is a multiple of BLOCK_K: no K mask
{k_range}
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = kt_begin * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rn[None, :] * K + rk[:, None]     # B is [N, K]: a [BLOCK_K, BLOCK_N] view of B^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(kt_begin, {kt_stop}):
        a = tl.load(a_ptrs, mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    {epilogue}{reduce}
"""


def wrapper(mode: str, p, task) -> str:
    kw = ", ".join(f"{k}={v}" for k, v in p.items() if k not in ("num_warps", "num_stages"))
    launch = f"num_warps={p.get('num_warps', 4)}, num_stages={p.get('num_stages', 1)}"
    tiles = f"triton.cdiv(M, {p['BLOCK_M']}) * triton.cdiv(N, {p['BLOCK_N']})"
    splits = p.get("SPLIT_K", 1)
    head = f"""

{ENTRY.py_def(task)}:
    M, K = A.shape
    N = B.shape[0]                          # B is [N, K] (an nn.Linear weight): C = A @ B.T
    grid = ({tiles}, {splits})
"""
    if mode == "direct":
        return head + f"""    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    gemm_splitk_kernel[grid](A, B, C, M, N, K, {kw}, {launch})
    return C
"""
    if mode == "atomic":
        return head + f"""    ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)   # atomics add into zeros
    gemm_splitk_kernel[grid](A, B, ws, M, N, K, {kw}, {launch})
    return ws.to(A.dtype)
"""
    if mode == "fused":
        return head + f"""    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    ws = torch.empty(({splits}, M, N), device=A.device, dtype=torch.float32)
    locks = torch.zeros(({tiles},), device=A.device, dtype=torch.int32)   # one ticket counter a tile
    gemm_splitk_kernel[grid](A, B, ws, C, locks, M, N, K, {kw}, {launch})
    return C
"""
    return head + f"""    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    ws = torch.empty(({splits}, M, N), device=A.device, dtype=torch.float32)
    gemm_splitk_kernel[grid](A, B, ws, M, N, K, {kw}, {launch})
    splitk_reduce_kernel[(triton.cdiv(M * N, 1024),)](ws, C, M * N, SPLIT_K={splits}, BLOCK=1024)
    return C
"""


def rung_src(mode: str):
    def render(p, task, store=None, kt_stop="kt_end", combine_end="SPLIT_K"):
        return kernel_src(mode, p, store or EPILOGUES.get(mode, ""), kt_stop, combine_end) + wrapper(mode, p, task)
    return render


def fused_launch(p, task):
    one = split_launch(tile_launch(0.95, "pipelined"), "partials")(p, task)
    return replace(one, launches=one.launches - 1, serial_atomics=p["SPLIT_K"])   # no reduce kernel


def consts(p, task) -> dict:
    return {k: v for k, v in p.items() if k not in ("num_warps", "num_stages")}


class GemmSplitkTriton(GemmSplitkSpec):
    impl = "triton"
    variants = (
        Rung("tl_dot_tiles", "tl.dot tiles (tensor cores), one program per output tile, no split, no pipelining",
             TILE + (WARPS,), path="fp16", compute_eff=0.42, memory_eff=0.75, smem="dynamic",
             launch=split_launch(tile_launch(0.85), "none"), render=rung_src("direct"), consts=consts,
             bugs={"off_by_one": SHORT_K}),
        Rung("split_k_reduce", "K split over program_id(1) into fp32 partial slices, a reduce kernel sums them",
             TILE + (SPLIT_K, WARPS), path="fp16", compute_eff=0.3, memory_eff=0.8, smem="dynamic",
             launch=split_launch(tile_launch(0.85), "partials"), render=rung_src("partials"), consts=consts,
             bugs={"bad_combine_index": SHORT_COMBINE, "off_by_one": SHORT_K}),
        Rung("split_k_atomic", "splits tl.atomic_add into one zeroed fp32 workspace, cast to the output type",
             TILE + (SPLIT_K, WARPS), path="fp16", compute_eff=0.42, memory_eff=0.8, smem="dynamic",
             launch=split_launch(tile_launch(0.85), "atomic"), render=rung_src("atomic"), consts=consts,
             bugs={"racy_update": RACY, "off_by_one": SHORT_K}),
        Rung("pipelined_split_k", "num_stages-deep software pipeline per split, tuned num_warps, reduce kernel",
             TILE + (SPLIT_K,) + PIPE, path="fp16", compute_eff=0.7, memory_eff=0.9, smem="dynamic",
             launch=split_launch(tile_launch(0.95, "pipelined"), "partials"), render=rung_src("partials"),
             consts=consts, bugs={"bad_combine_index": SHORT_COMBINE, "off_by_one": SHORT_K}),
        Rung("split_k_fused_reduce", "one launch: the last split program of a tile (atomic ticket) sums the partials",
             TILE + (SPLIT_K,) + PIPE, path="fp16", compute_eff=0.62, memory_eff=0.9, smem="dynamic",
             launch=fused_launch, render=rung_src("fused"), consts=consts,
             bugs={"bad_combine_index": SHORT_COMBINE, "off_by_one": SHORT_K}),
    )

    def assemble(self, kernel, variant, params, task):
        return TRITON_PRELUDE + kernel

    def triton_kernels(self, variant, params, task) -> list:
        ptr, c = triton_ptr(task.dtype, task), self.variant(variant.tag).consts(params, task)
        mode = {"tl_dot_tiles": "direct", "split_k_atomic": "atomic", "split_k_fused_reduce": "fused"}.get(
            variant.tag, "partials")
        outs = {"direct": {"out_ptr": ptr}, "fused": {"ws_ptr": "*fp32", "c_ptr": ptr, "locks_ptr": "*i32"}}.get(
            mode, {"out_ptr": "*fp32"})
        sig = {"a_ptr": ptr, "b_ptr": ptr, **outs, "M": "i32", "N": "i32", "K": "i32", **{k: "constexpr" for k in c}}
        warps, stages = params.get("num_warps", 4), params.get("num_stages", 1)
        specs = [KernelSpec("gemm_splitk_kernel", sig, c, num_warps=warps, num_stages=stages)]
        if mode == "partials":
            specs.append(KernelSpec("splitk_reduce_kernel", {"ws_ptr": "*fp32", "c_ptr": ptr, "MN": "i32",
                                                             "SPLIT_K": "constexpr", "BLOCK": "constexpr"},
                                    {"SPLIT_K": params["SPLIT_K"], "BLOCK": 1024}, ints={"MN": task["M"] * task["N"]}))
        return specs
