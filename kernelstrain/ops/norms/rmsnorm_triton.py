"""RMSNorm forward in Triton: y = x * rsqrt(mean(x^2) + eps) * w, one row of D per token.

Ladder: one lane per row walking columns (uncoalesced) -> one program per row streaming
BLOCK-wide chunks twice -> the whole row in registers (one read) -> several rows per
program as a 2-D tile -> persistent programs that keep the weight resident and prefetch
the next row under the current row's reduction.
"""

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from .. import stream_stages
from ..unroll import LOOP_UNROLL, chunk_regs, chunk_trips, launch_of, render_of
from ._norms import RowKernelTriton, chunk_launch, lane_rows_launch, next_pow2, triton_spill
from .rmsnorm_spec import RMSNormSpec

NUM_WARPS = Param("num_warps", (1, 2, 4, 8, 16), 4)
# persistent programs an SM. 16 (roomT, 2026-12-07): q/k-norm rows (D = 128: 256 B a row) leave each program one
# small row in flight, so the grid's bytes in flight set the time: H100 T=65536 D=128 (h100_gpucheck_s40404, 2 warps)
# 1 / 2 / 8 programs an SM ran 204.7 / 107.6 / 34.6 us (modelled 184.6 / 101.3 / 32.6), 3.5x the DRAM floor at 8.
# 16 ran correct on the H100 with both bugs failing (roomT/j3, 07:27 UTC; Triton 3.9's interpreter cannot run the
# rung): 21.7 us against 8's 34.4 on 2 warps (modelled 19.3 / 32.6), 28.6 / 34.8 on 4 warps, level at 4096-wide rows
# (26.2 / 26.2 us on 16 warps, modelled 27.4 / 28.2)
PERSISTENT_PER_SM = Param("programs_per_sm", (1, 2, 4, 8, 16), 1)
NO_SCALE = {"scale": ""}                 # missing_scale drops the weight multiply


def block_d(p, task) -> dict:
    return {"BLOCK_D": next_pow2(task["D"])}


# -- row_per_lane --------------------------------------------------------------------------
def row_per_lane_src(p, task, stop="D", scale=" * w"):
    return f"""
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, T, D, eps, BLOCK_T: tl.constexpr):
    # Each lane owns one row and walks it column by column, like the CPU loop:
    # neighbouring lanes read addresses D elements apart, so no load coalesces.
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    live = rows < T
    x_rows = x_ptr + rows.to(tl.int64) * D
    y_rows = y_ptr + rows.to(tl.int64) * D
    sum_sq = tl.zeros([BLOCK_T], dtype=tl.float32)
    for i in range(0, D):
        v = tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32)
        sum_sq += v * v
    inv_rms = tl.rsqrt(sum_sq / D + eps)
    for i in range(0, {stop}):
        v = tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + i).to(tl.float32)
        tl.store(y_rows + i, (v * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=live)
"""


# -- chunked_two_pass ----------------------------------------------------------------------
def chunked_two_pass_src(p, task, stop="D", scale=" * w"):
    return f"""
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, T, D, eps, BLOCK: tl.constexpr):
    # One program per row, streamed in BLOCK-wide coalesced chunks: once for the
    # sum of squares, once more (from L2 at best) for the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * D
    y_row = y_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, {stop}, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < D, other=0.0).to(tl.float32)
        acc += v * v
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / D + eps)
    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < D
        v = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (v * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


# -- whole_row_registers, multi_row_tile, persistent: the row lives in registers -----------
def row_tile_launch(p, task):
    t, d, elt, gpu = task["T"], task["D"], DTYPE_BYTES[task.dtype], task.gpu
    threads, width, rows = p["num_warps"] * gpu.warp, next_pow2(d), p.get("ROWS", 1)
    persistent = "programs_per_sm" in p
    per = max(1, rows * width // threads)          # elements each thread holds
    # fp32 copy of the row (+ the hoisted weight and the prefetched next row when persistent)
    regs = 40 + 4 * per if persistent else 16 + int(1.65 * per)
    cap = min(255, gpu.regs_per_sm // threads)       # the register file bounds what one thread may hold
    spill = triton_spill(regs, cap)                  # the excess spills (or reloads) through L1/L2
    grid = cdiv(t, rows)
    util = min(1.0, d / width) * min(1.0, rows * width / threads)
    if persistent:
        grid = min(t, gpu.sms * p["programs_per_sm"])
    else:
        util *= 0.85                                  # load -> reduce -> store: no load in flight during the reduction
    return Launch(grid=grid, threads=threads, smem_bytes=4 * p["num_warps"] * rows, regs=min(regs, cap),
                  bytes_per_access=min(16, per * elt), traffic=spill, lane_util=util, rounds=cdiv(cdiv(t, rows), grid),
                  unrolled=per)


def whole_row_registers_src(p, task, bound="D", scale=" * w"):
    return f"""
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # BLOCK_D = next_pow2(D): the whole row is loaded once, reduced and scaled in
    # registers, so x crosses DRAM exactly once.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < {bound}
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * D + cols, (x * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


def multi_row_tile_src(p, task, bound="D", mean=" / D"):
    return f"""
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, T, D, eps, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    # ROWS rows per program as one [ROWS, BLOCK_D] tile: short rows (q/k-norm,
    # D = 128) still give every lane a full 16-byte vector, and the weight
    # vector is loaded once for ROWS rows.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < {bound}
    mask = (rows < T)[:, None] & col_ok[None, :]
    offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1){mean} + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
"""


def persistent_src(p, task, stop="T", scale=" * w"):
    return f"""
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # Persistent: #SMs x PROGRAMS_PER_SM programs stride over the rows. The weight
    # is loaded once per program, and the next row's load is issued before this
    # row's reduction so DRAM stays busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    x_next = tl.load(x_ptr + pid.to(tl.int64) * D + cols, mask=mask & (pid < T), other=0.0)
    for row in range(pid, {stop}, step):
        x = x_next.to(tl.float32)
        nxt = row + step
        x_next = tl.load(x_ptr + nxt.to(tl.int64) * D + cols, mask=mask & (nxt < T), other=0.0)
        inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        tl.store(y_ptr + row.to(tl.int64) * D + cols, (x * inv_rms{scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""


class RMSNormTriton(RowKernelTriton, RMSNormSpec):
    impl = "triton"
    kernel_name, pointers = "rmsnorm_kernel", ("x_ptr", "w_ptr", "y_ptr")
    launch_args = "x, weight, y, T, D, eps"
    dims = {"T": "rows (tokens, or tokens x heads for q/k-norm)", "D": "row length (hidden or head size)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 64, "D": 4096}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}, {"T": 65536, "D": 128})
    variants = (
        Rung("row_per_lane", "each lane owns a row and loops over its columns: loads D elements apart",
             (Param("BLOCK_T", (32, 64, 128), 64), Param("num_warps", (1, 2, 4), 2)), memory_eff=0.45,
             launch=lane_rows_launch("BLOCK_T", "T", 2.5), render=row_per_lane_src, consts=lambda p, task: {"BLOCK_T": p["BLOCK_T"]},
             bugs={"off_by_one": {"stop": "D - 1"}, "missing_scale": NO_SCALE}),
        Rung("chunked_two_pass", "program per row, BLOCK-wide chunks: sum-of-squares pass, then output pass",
             (Param("BLOCK", (256, 512, 1024, 2048), 1024), Param("num_warps", (2, 4, 8), 4), LOOP_UNROLL,
              stream_stages.STREAM_STAGES), memory_eff=0.82,
             launch=stream_stages.launch_of(launch_of(chunk_launch("T", "D", 2, 1.5), chunk_trips("D"), chunk_regs),
                                            chunk_trips("D"), loads=2, row="D"),
             render=stream_stages.render_of(render_of(chunked_two_pass_src)),
             consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"off_by_one": {"stop": "D - BLOCK"}, "missing_scale": NO_SCALE}),
        Rung("whole_row_registers", "BLOCK_D = next_pow2(D): the row is loaded once and reduced in registers",
             (NUM_WARPS,), memory_eff=0.9, launch=row_tile_launch, render=whole_row_registers_src, consts=block_d,
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"bound": "D - 1"}}),
        Rung("multi_row_tile", "ROWS x BLOCK_D tile per program, reduced along axis 1: small rows fill the SM",
             (Param("ROWS", (2, 4, 8, 16), 4), NUM_WARPS), memory_eff=0.91, launch=row_tile_launch,
             render=multi_row_tile_src, consts=lambda p, task: {"ROWS": p["ROWS"], **block_d(p, task)},
             bugs={"missing_scale": {"mean": ""}, "off_by_one": {"bound": "D - 1"}}),
        Rung("persistent", "grid of #SMs x k programs striding over rows, weight hoisted, next row prefetched",
             (Param("num_warps", (2, 4, 8, 16), 16), PERSISTENT_PER_SM), memory_eff=0.93,
             launch=row_tile_launch, render=persistent_src, consts=block_d,
             bugs={"off_by_one": {"stop": "T - 1"}, "missing_scale": NO_SCALE}),
    )
