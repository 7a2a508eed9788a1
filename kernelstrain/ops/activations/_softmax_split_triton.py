"""softmax_triton's split_row_online rung (not an op module itself): few long rows split over programs.

A program per row leaves SMs idle when the rows are few (R=32 on 108-170 SMs), each walking a
32k-150k-element row alone. The stats kernel, grid (SPLITS, R), keeps an online (max, sum) per lane
over its part of a row and stores the part's merged pair; the output kernel, the same grid, merges
the row's SPLITS pairs (every program in the same order) and writes its part. The row is read twice,
as in online_softmax, by SPLITS times more programs (the CUDA module's rung, in Triton).
"""
from dataclasses import replace

from ..base import KernelSpec, Param, cdiv, triton_ptr
from ..norms._norms import chunk_launch
from ._softmax_rows import PASS2_ROUNDS

# 2 warps: as softmax_triton.CHUNK's (its comment has the H100's rows)
PARAMS = (Param("SPLITS", (2, 4, 8, 16, 32), 8), Param("BLOCK", (512, 1024, 2048, 4096), 2048),
          Param("num_warps", (2, 4, 8, 16), 8))
PART = """    row = tl.program_id(1).to(tl.int64)
    per = tl.cdiv(C, SPLITS)
    lo = tl.program_id(0) * per
    hi = tl.minimum(lo + per, C)                       # this program's part of the row: [lo, hi)
    x_row = x_ptr + row * C
"""


def split_launch(p, task):
    """chunk_launch of a program per (part, row): the part's chunks, two launches."""
    base = chunk_launch("R", "C", 3, 1.5, launches=2)(p, task)
    part = cdiv(task["C"], p["SPLITS"])
    threads = p["num_warps"] * task.gpu.warp
    return replace(base, grid=task["R"] * p["SPLITS"], rounds=base.rounds + PASS2_ROUNDS,
                   lane_util=min(1.0, part / p["BLOCK"]) * min(1.0, p["BLOCK"] / threads))


def split_src(p, task, rescale=" * tl.exp(ms - m)"):
    return f"""
def softmax_stats_kernel(x_ptr, part_ptr, R, C, BLOCK: tl.constexpr, SPLITS: tl.constexpr):
    # Few long rows: SPLITS programs share a row, each keeping per-lane running maxima and
    # rescaled sums over its part; the part's (max, sum) goes to part_ptr.
{PART}    m_l = tl.full([BLOCK], -3.0e38, dtype=tl.float32)   # finite: -3e38 - (-3e38) = 0, not NaN
    d_l = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(lo, hi, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < hi, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_l, v)
        d_l = d_l * tl.exp(m_l - m_new) + tl.exp(v - m_new)
        m_l = m_new
    m = tl.max(m_l, axis=0)
    slot = part_ptr + (row * SPLITS + tl.program_id(0)) * 2
    tl.store(slot, m)
    tl.store(slot + 1, tl.sum(d_l * tl.exp(m_l - m), axis=0))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, part_ptr, R, C, BLOCK: tl.constexpr, SPLITS: tl.constexpr):
    # Every program of a row merges the row's SPLITS partials in the same order, then
    # writes its own part.
{PART}    y_row = y_ptr + row * C
    parts = (row * SPLITS + tl.arange(0, SPLITS)) * 2
    ms = tl.load(part_ptr + parts)
    ds = tl.load(part_ptr + parts + 1)
    m = tl.max(ms, axis=0)
    inv = 1.0 / tl.sum(ds{rescale}, axis=0)
    for off in range(lo, hi, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < hi
        v = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(v - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)
"""


def split_kernels(params, task, consts: dict) -> list:
    """The two kernels' KernelSpecs (verify.py compiles them without a GPU)."""
    ptr, const = triton_ptr(task.dtype, task), dict.fromkeys(consts, "constexpr")
    stats = {"x_ptr": ptr, "part_ptr": "*fp32", "R": "i32", "C": "i32", **const}
    out = {"x_ptr": ptr, "y_ptr": ptr, "part_ptr": "*fp32", "R": "i32", "C": "i32", **const}
    return [KernelSpec("softmax_stats_kernel", stats, consts, num_warps=params["num_warps"], num_stages=1),
            KernelSpec("softmax_kernel", out, consts, num_warps=params["num_warps"], num_stages=1)]


def split_wrapper(entry_def: str, params, consts: dict) -> str:
    kw = "".join(f"{k}={v}, " for k, v in consts.items())
    return f"""{entry_def}:
    R, C = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    parts = torch.empty((R, {consts['SPLITS']}, 2), device=x.device, dtype=torch.float32)   # (max, sum) a part
    grid = ({consts['SPLITS']}, R)
    softmax_stats_kernel[grid](x, parts, R, C, {kw}num_warps={params['num_warps']})
    softmax_kernel[grid](x, y, parts, R, C, {kw}num_warps={params['num_warps']})
    return y
"""
