"""2-D convolution (NHWC input, KRSC weight) in Triton, fp32 accumulation.

Ladder: direct convolution as [BLOCK_M pixels, BLOCK_N filters] tiles of outer products over the
R x S x C window (CUDA cores) -> implicit GEMM with tl.dot on gathered im2col [BM, BK] tiles and
[BK, BN] filter tiles -> grouped tile order (GROUP_M pixel tiles share their filter tiles in L2)
-> the K loop software-pipelined STAGES deep (tl.range num_stages).
"""
from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, triton_stage_buffers
from .conv2d_nhwc_cuda import conv_traffic
from .conv2d_nhwc_spec import ENTRY, Conv2dNhwcSpec, gemm_dims, out_hw

ARGS = "x_ptr, w_ptr, y_ptr, N, H, W, C, K, R, S, U, PD, P, Q"
PIXELS = """    pix = pid_m * BM + tl.arange(0, BM)
    q = pix % Q
    p = (pix // Q) % P
    n = pix // (P * Q)
    cols = pid_n * BN + tl.arange(0, BN)
    M = N * P * Q"""
STORE = """    out = y_ptr + pix.to(tl.int64)[:, None] * K + cols[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=(pix < M)[:, None] & (cols < K)[None, :])"""


def launch_of(dot: bool, pipelined: bool = False):
    def launch(p, task):
        m, n, _ = gemm_dims(task)
        bm, bn, elt, gpu = p["BM"], p["BN"], DTYPE_BYTES[task.dtype], task.gpu
        threads = p["num_warps"] * gpu.warp
        if not dot:
            per = bm * bn // threads
            return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=threads, regs=min(255, 32 + per), bytes_per_access=elt,
                          traffic=conv_traffic(task, bm, bn), compute_scale=min(0.35, 0.08 + 0.01 * per),
                          tile_quant=m / (cdiv(m, bm) * bm))
        bk, st = p["BK"], p.get("STAGES", 1)
        bufs = triton_stage_buffers(task, st, bm) if pipelined else 1
        reuse = min(1.0, 0.4 + 0.25 * (bm * bn) / (64 * 64) ** 1 / max(1, p["num_warps"] / 4))
        depth = min(1.0, 0.6 + 0.03 * st) if pipelined else 0.6   # gathered im2col loads: little to hide (H200)
        grouped = 0.04 if "GROUP_M" in p else 0.0
        return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=threads, smem_bytes=bufs * (bm + bn) * bk * elt,
                      regs=min(255, 40 + bm * bn // threads + (bm + bn) * bk * elt // (4 * threads)),
                      bytes_per_access=16, traffic=conv_traffic(task, bm, bn) * (1 - grouped),
                      compute_scale=min(1.0, reuse) * depth * gpu.triton_dot_scale * (1 + grouped),
                      tile_quant=m / (cdiv(m, bm) * bm) * n / (cdiv(n, bn) * bn))
    return launch


# -- direct_outer ------------------------------------------------------------------------------
def direct_outer_src(p, task, init="tl.zeros((BM, BN), tl.float32)", stop="C"):
    return f"""
@triton.jit
def conv2d_nhwc_kernel({ARGS}, BM: tl.constexpr, BN: tl.constexpr):
    # direct convolution: a [BM pixels, BN filters] tile accumulates outer products of one input
    # channel column and one filter column at a time, on CUDA cores
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
{PIXELS}
    acc = {init}
    for r in range(0, R):
        for s in range(0, S):
            ih = p * U - PD + r
            iw = q * U - PD + s
            ok = (pix < M) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_row = x_ptr + ((n.to(tl.int64) * H + ih) * W + iw) * C
            w_row = w_ptr + cols.to(tl.int64) * (R * S * C) + (r * S + s) * C
            for c in range(0, {stop}):
                a = tl.load(x_row + c, mask=ok, other=0.0).to(tl.float32)
                b = tl.load(w_row + c, mask=cols < K, other=0.0).to(tl.float32)
                acc += a[:, None] * b[None, :]
{STORE}
"""


# -- the tl.dot rungs ----------------------------------------------------------------------------
def dot_kernel(head: str, loop: str, init: str, stop: str, note: str) -> str:
    return f"""
@triton.jit
def conv2d_nhwc_kernel({ARGS}, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr{head[0]}):
    # {note}
{head[1]}
{PIXELS}
    ks = tl.arange(0, BK)
    taps_c = C // BK
    acc = {init}
    for kt in {loop.format(stop=stop)}:
        rs = kt // taps_c
        c0 = (kt % taps_c) * BK
        ih = p * U - PD + rs // S
        iw = q * U - PD + rs % S
        ok = (pix < M) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + (((n.to(tl.int64) * H + ih) * W + iw) * C + c0)[:, None] + ks[None, :],
                    mask=ok[:, None], other=0.0)               # [BM, BK] im2col tile, zeros in the padding
        b = tl.load(w_ptr + cols.to(tl.int64)[None, :] * (R * S * C) + kt * BK + ks[:, None],
                    mask=(cols < K)[None, :], other=0.0)       # [BK, BN] filter tile (KRSC rows)
        acc = tl.dot(a, b, acc)
{STORE}
"""


PLAIN = ("", "    pid_m, pid_n = tl.program_id(0), tl.program_id(1)")
GROUPED = (", GROUP_M: tl.constexpr", """    # grouped order: GROUP_M consecutive pixel tiles walk the filter tiles together (L2 reuse)
    pid = tl.program_id(0)
    num_m = tl.cdiv(N * P * Q, BM)
    num_n = tl.cdiv(K, BN)
    group = pid // (GROUP_M * num_n)
    first_m = group * GROUP_M
    rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * num_n)) % rows
    pid_n = (pid % (GROUP_M * num_n)) // rows""")
ZERO = "tl.zeros((BM, BN), tl.float32)"
ONES = {"init": "tl.full((BM, BN), 1.0, tl.float32)"}


def implicit_gemm_dot_src(p, task, init=ZERO, stop="R * S * taps_c"):
    return dot_kernel(PLAIN, "range(0, {stop})", init, stop, "implicit GEMM: tl.dot of gathered im2col tiles and filter tiles")


def grouped_swizzle_src(p, task, init=ZERO, stop="R * S * taps_c"):
    return dot_kernel(GROUPED, "range(0, {stop})", init, stop, "implicit GEMM, tiles in grouped (swizzled) order")


def pipelined_stages_src(p, task, init=ZERO, stop="R * S * taps_c"):
    return dot_kernel(GROUPED, "tl.range(0, {stop}, num_stages=STAGES)", init, stop,
                      "implicit GEMM, grouped order, the K loop pipelined STAGES deep").replace(
        "GROUP_M: tl.constexpr", "GROUP_M: tl.constexpr, STAGES: tl.constexpr")


WARPS = Param("num_warps", (2, 4, 8), 4)
# BK 64: one (r, s) tap's 64 channels a K step, half the trips of 32. H200 (room_device_check_triton, BM=BN=64):
# BK 16/32/64 ran 62.6/34.7/26.4 us (implicit_gemm_dot) and 59.9/33.4/26.5 (pipelined_stages) at N=16 14x14 C=256,
# 22.9/13.8/12.1 and 22.9/13.6/12.3 at N=8 56x56 C=64 (model 46.9/36.5/28.5 ... 19.7/15.8/12.8). The kernel walks
# C in BK steps, and every menu shape has C a multiple of 64
TILES = (Param("BM", (32, 64, 128), 64), Param("BN", (32, 64, 128), 64), Param("BK", (16, 32, 64), 32), WARPS)
GROUP = Param("GROUP_M", (4, 8, 16), 8)
KT_BUG = {"stop": "R * S * taps_c - 1"}


class Conv2dNhwcTriton(Conv2dNhwcSpec):
    impl = "triton"
    variants = (
        Rung("direct_outer", "direct convolution: [BM, BN] tiles of outer products over R x S x C, CUDA cores",
             (Param("BM", (32, 64, 128), 64), Param("BN", (16, 32, 64), 32), WARPS), compute_eff=0.5,
             memory_eff=0.6, launch=launch_of(False), render=direct_outer_src,
             consts=lambda p, t: {"BM": p["BM"], "BN": p["BN"]},
             bugs={"off_by_one": {"stop": "C - 1"}, "wrong_init": {"init": "tl.full((BM, BN), 1.0, tl.float32)"}}),
        Rung("implicit_gemm_dot", "implicit GEMM: tl.dot of gathered [BM, BK] im2col and [BK, BN] filter tiles",
             TILES, path="fp16", compute_eff=0.6, memory_eff=0.8, launch=launch_of(True), render=implicit_gemm_dot_src,
             consts=lambda p, t: {"BM": p["BM"], "BN": p["BN"], "BK": p["BK"]}, bugs={"off_by_one": KT_BUG, "wrong_init": ONES}),
        Rung("grouped_swizzle", "implicit GEMM with grouped (swizzled) tile order for L2 reuse",
             (*TILES, GROUP), path="fp16", compute_eff=0.62, memory_eff=0.82, launch=launch_of(True),
             render=grouped_swizzle_src, consts=lambda p, t: {"BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "GROUP_M": p["GROUP_M"]},
             bugs={"off_by_one": KT_BUG, "wrong_init": ONES}),
        Rung("pipelined_stages", "grouped implicit GEMM, K loop software-pipelined STAGES deep",
             (*TILES[:3], Param("num_warps", (4, 8), 4), GROUP, Param("STAGES", (2, 3, 4), 3)), path="fp16",
             compute_eff=0.72, memory_eff=0.85, smem="dynamic", launch=launch_of(True, pipelined=True),
             render=pipelined_stages_src,
             consts=lambda p, t: {"BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "GROUP_M": p["GROUP_M"], "STAGES": p["STAGES"]},
             bugs={"off_by_one": KT_BUG, "wrong_init": ONES}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        consts = variant.consts(params, task)
        p_, q_ = out_hw(task)
        sig = {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, **{k: "i32" for k in ARGS.split(", ")[3:]}}
        return [KernelSpec("conv2d_nhwc_kernel", {**sig, **{k: "constexpr" for k in consts}}, consts,
                           num_warps=params["num_warps"], num_stages=params.get("STAGES", 1), ints={"P": p_, "Q": q_})]

    def assemble(self, kernel, variant, params, task) -> str:
        consts = variant.consts(params, task)
        kw = "".join(f"{k}={v}, " for k, v in consts.items())
        grid = ("(triton.cdiv(N * P * Q, {BM}) * triton.cdiv(K, {BN}),)" if "GROUP_M" in params
                else "(triton.cdiv(N * P * Q, {BM}), triton.cdiv(K, {BN}))").format(**params)
        stages = f", num_stages={params['STAGES']}" if "STAGES" in params else ""
        return f"""{TRITON_PRELUDE}
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    N, H, W, C = x.shape
    K, R, S, _ = weight.shape
    U, PD = {task['U']}, {task['PD']}                   # stride and padding of this convolution
    P, Q = (H + 2 * PD - R) // U + 1, (W + 2 * PD - S) // U + 1
    x, weight = x.contiguous(), weight.contiguous()
    y = torch.empty((N, P, Q, K), dtype=x.dtype, device=x.device)
    grid = {grid}
    conv2d_nhwc_kernel[grid](x, weight, y, N, H, W, C, K, R, S, U, PD, P, Q, {kw}num_warps={params['num_warps']}{stages})
    return y
"""
