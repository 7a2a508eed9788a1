"""LayerNorm forward in Triton: y = (x - mean) * rsqrt(var + eps) * w + b, one row of D per token.

Ladder: one lane per row walking columns (three passes, uncoalesced) -> program per row
streaming chunks three times (mean, variance, output) -> one chunked pass of per-lane
Welford statistics merged with tl.reduce -> the whole row in registers (exact two-pass
statistics, one read) -> persistent programs with weight/bias hoisted and the next row prefetched.
The off_by_one bugs read the wrong element (never skip a write): an unwritten output can hold the
reference's value in recycled memory and pass a harness that does not poison outputs.
"""
import math
from dataclasses import replace

from ..base import Param, Rung, DTYPE_BYTES
from .. import l2_reuse, stream_stages
from ..unroll import LOOP_UNROLL, chunk_regs, chunk_trips, launch_of, render_of
from ._norms import RowKernelTriton, chunk_launch, lane_rows_launch, next_pow2, row_in_registers_launch
from .layernorm_spec import LayerNormSpec

CHUNK = (Param("BLOCK", (256, 512, 1024, 2048), 1024), Param("num_warps", (2, 4, 8), 4), LOOP_UNROLL,
         stream_stages.STREAM_STAGES)
NO_SCALE = {"scale": ""}               # missing_scale drops the weight multiply
SIG = "def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, T, D, eps, "
OUTPUT_LOOP = """    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < D
        v = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((v - mean) * rstd{scale} + b).to(y_ptr.dtype.element_ty), mask=mask)
"""


# welford_chunked's instruction issue, in fp32 lane slots (sim: Launch.issue_s, a floor beside the roofline): a row
# costs WELFORD_ROW_SLOTS, each element of its BLOCK-padded chunks WELFORD_ELEMENT_SLOTS (the per-lane update divides
# by the count), each thread WELFORD_THREAD_SLOTS (tl.reduce's shuffle tree and cross-warp merge of (mean, M2, n),
# each step dividing). H100 gpu-checks, T=8192 D=1024 fp16/bf16 (whole_row_registers 15.0 us, the second read
# from L2 ~19): BLOCK 512 on 2 warps 19.6 us (s96969), 256 or 1024 on 4 warps 26.2 / 25.4 (sim30 call), 1024 on 8
# warps 36.1 (s40404); H200 (same fp32 peak): 512 on 2 warps 20.1-21.7 (s50505; its whole row ~11), 2048 on 4 warps
# 39.0; the floor: 19.6, 25.1 / 25.1, 36.0, 19.6, 35.1 us. The constants keep it under the rows that streamed:
# T=4096 D=4096 on 4 warps 32.7-36.6 (floor 27.6) and T=8192 D=5120 69.3-75.3 (65.1). The DRAM-read model it
# replaces (the second read from DRAM, no issue floor) put those D >= 4096 rows 1.23-1.40x slow (s93131-s96969).
WELFORD_ROW_SLOTS = 16800
WELFORD_ELEMENT_SLOTS = 40
WELFORD_THREAD_SLOTS = 350


def welford_issue(launch_of_p):
    def launch(p, task):
        base = launch_of_p(p, task)
        padded = -(-task["D"] // p["BLOCK"]) * p["BLOCK"]
        slots = task["T"] * (WELFORD_ROW_SLOTS + WELFORD_ELEMENT_SLOTS * padded + WELFORD_THREAD_SLOTS * base.threads)
        return replace(base, issue_s=max(base.issue_s, slots / (task.gpu.peak("fp32") / 2)))
    return launch


# -- row_per_lane --------------------------------------------------------------------------
def row_per_lane_src(p, task, col="i", scale=" * w"):
    return f"""
{SIG}BLOCK_T: tl.constexpr):
    # Each lane owns one row and walks it three times (mean, variance, output):
    # neighbouring lanes read addresses D elements apart, so no load coalesces.
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    live = rows < T
    x_rows = x_ptr + rows.to(tl.int64) * D
    y_rows = y_ptr + rows.to(tl.int64) * D
    total = tl.zeros([BLOCK_T], dtype=tl.float32)
    for i in range(0, D):
        total += tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32)
    mean = total / D
    sq = tl.zeros([BLOCK_T], dtype=tl.float32)
    for i in range(0, D):
        d = tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32) - mean
        sq += d * d
    rstd = tl.rsqrt(sq / D + eps)
    for i in range(0, D):
        v = tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + {col}).to(tl.float32)
        b = tl.load(b_ptr + {col}).to(tl.float32)
        tl.store(y_rows + i, ((v - mean) * rstd{scale} + b).to(y_ptr.dtype.element_ty), mask=live)
"""


# -- chunked_three_pass, welford_chunked ---------------------------------------------------
def chunked_three_pass_src(p, task, stop="D", scale=" * w"):
    return f"""
{SIG}BLOCK: tl.constexpr):
    # One program per row, streamed in BLOCK-wide coalesced chunks three times:
    # the mean, the centred variance (numerically safe), then the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * D
    y_row = y_ptr + row * D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < D, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / D
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, {stop}, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < D, other=0.0).to(tl.float32)
        acc += tl.where(cols < D, (v - mean) * (v - mean), 0.0)
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / D + eps)
{OUTPUT_LOOP.format(scale=scale)}"""


def welford_chunked_src(p, task, init="tl.zeros([BLOCK], dtype=tl.float32)", scale=" * w"):
    return f"""
def welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    # Chan's parallel merge of two (mean, M2, count) partials.
    n = n_a + n_b
    w_b = tl.where(n == 0.0, 0.0, n_b / n)
    delta = mean_b - mean_a
    return mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b, n


@triton.jit
{SIG}BLOCK: tl.constexpr):
    # Statistics in ONE pass: every lane keeps its own Welford (n, mean, M2) over
    # the columns it sees; tl.reduce merges the BLOCK lanes at the end. A second
    # pass (from L2 when the row is still resident) writes the output.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * D
    y_row = y_ptr + row * D
    n_l = {init}
    mean_l = tl.zeros([BLOCK], dtype=tl.float32)
    m2_l = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, D, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        live = cols < D
        v = tl.load(x_row + cols, mask=live, other=0.0).to(tl.float32)
        n_new = n_l + live.to(tl.float32)
        delta = v - mean_l
        mean_l += tl.where(live, delta / tl.maximum(n_new, 1.0), 0.0)
        m2_l += tl.where(live, delta * (v - mean_l), 0.0)
        n_l = n_new
    mean, m2, n = tl.reduce((mean_l, m2_l, n_l), 0, welford_combine)
    rstd = tl.rsqrt(m2 / n + eps)
{OUTPUT_LOOP.format(scale=scale)}"""


# -- whole_row_registers, persistent: the row lives in registers ---------------------------
# whole_row_registers' off_by_one loads x[D - 1] as 0 (its store mask is intact): one output a row is off by about
# x * w, the rest by ~1/D; that output meets fp16's / bf16's class in 0.15% / 0.19% of rows (emulated,
# tests/test_label_truth.py), so a pass needs every row's: offered from T >= 3 rows (below 1e-8)
ONE_ELEMENT_A_ROW = (("off_by_one", lambda t, p: t["T"] >= 3),)
# Registers a persistent program's thread wants per row element it holds, by the row's storage dtype. fp16: the
# fp32 row (centred in place), fp32 weight and bias hoisted, the prefetched next row packed two a register: 3.5,
# about 4 with the loop's addresses; on 2 warps at T=8192 D=5120 (128 elements a thread) that spills a little:
# H100 171.4 / 186.8 us (seeds 96161 / 95353), 2.3-2.5x whole_row_registers on 8 warps (62-75 us). bf16 ran far
# slower there, 1,167-1,262 us on the H200 (seeds 6868 / 8484 / 9191, the rows the fit's 6.3 came from), and on
# the H100 bf16 ran 1.4x fp16 on 8 warps too (105.8 us, seed 96262, against 75.6, seed 93131) where neither
# spills: the bf16 row costs more registers than its packed 16 bits say. One H100 ran both (plan sim31c,
# measurements/h100_sim31c_checks.json): 2 warps at T=8192 D=5120 fp16 187.8 / bf16 1,252.6 us (modelled 185 /
# 1,328), held out at T=4096 D=8192 100.8 / 731.0 (108.7 / 790.0). Not caught: fp16 on 4 warps ran 1.4x the model
# (131.9 us at D=5120, where bf16 ran 84.2).
PERSISTENT_REGS = {"fp16": 4.0, "bf16": 6.3}
# A lone persistent program (programs_per_sm 1) of more than LONE_WARPS warps waits, row after row, at its two
# dependent block reductions (the mean, then the centred variance: 4 bar.sync a row in the sm_90a SASS at every
# num_warps, Triton 3.9) for its slowest warp, and no other program on the SM fills the wait: LONE_SYNC_S more a row a
# program per doubling past LONE_WARPS (Launch.later_s). H100, fp16: T=16384 D=8192 (125 rows a program) 16 warps
# 243.2 us vs 8 warps 210.1 (measurements/h100_gpucheck_s98282.json, one episode; the model had 187 vs 194), T=8192
# D=5120 (63 rows) 98.8 vs 76.1 (h100_sim31c_checks.json; modelled 90.3 vs 96.5): 0.27 and 0.36 us a row more than
# 8 warps. Two programs a SM hide it: T=4096 D=4096 16 warps 28.7 us beside 8 warps' 28.9 (sim31c, s95353).
LONE_WARPS = 8
LONE_SYNC_S = 0.3e-6


def row_launch(p, task):
    d, elt, nw = task["D"], DTYPE_BYTES[task.dtype], p["num_warps"]
    threads, block_d = nw * task.gpu.warp, next_pow2(d)
    per = max(1, block_d // threads)                  # elements each thread holds
    # fp32 copy of the row (+ hoisted weight/bias and the prefetched next row when persistent)
    regs = 24 + int(PERSISTENT_REGS[task.dtype] * per) if "programs_per_sm" in p else 20 + int(1.9 * per)
    util = min(1.0, d / block_d) * min(1.0, block_d / threads)
    launch = row_in_registers_launch(p, task, task["T"], regs, threads, 4 * nw, per, elt, util)
    if p.get("programs_per_sm") == 1 and nw > LONE_WARPS:
        launch = replace(launch, later_s=launch.rounds * LONE_SYNC_S * math.log2(nw / LONE_WARPS))
    return launch


def whole_row_registers_src(p, task, bound="D", scale=" * w"):
    return f"""
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # BLOCK_D = next_pow2(D): the row is loaded once; the mean and the centred
    # variance (exact two-pass, no E[x^2] - mean^2 cancellation) come from registers.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=cols < {bound}, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * D + cols, (xc * rstd{scale} + b).to(y_ptr.dtype.element_ty), mask=mask)
"""


def persistent_src(p, task, first="pid", scale=" * w"):
    return f"""
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, T, D, eps, BLOCK_D: tl.constexpr):
    # Persistent: #SMs x PROGRAMS_PER_SM programs stride over the rows. Weight and
    # bias are loaded once per program, and the next row's load is issued before
    # this row's two reductions so DRAM stays busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    x_next = tl.load(x_ptr + ({first}).to(tl.int64) * D + cols, mask=mask & ({first} < T), other=0.0)
    for row in range(pid, T, step):
        x = x_next.to(tl.float32)
        nxt = row + step
        x_next = tl.load(x_ptr + nxt.to(tl.int64) * D + cols, mask=mask & (nxt < T), other=0.0)
        mean = tl.sum(x, axis=0) / D
        xc = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / D + eps)
        tl.store(y_ptr + row.to(tl.int64) * D + cols, (xc * rstd{scale} + b).to(y_ptr.dtype.element_ty), mask=mask)
"""


def block_d(p, task) -> dict:
    return {"BLOCK_D": next_pow2(task["D"])}


class LayerNormTriton(RowKernelTriton, LayerNormSpec):
    impl = "triton"
    kernel_name, pointers = "layernorm_kernel", ("x_ptr", "w_ptr", "b_ptr", "y_ptr")
    launch_args = "x, weight, bias, y, T, D, eps"
    desc = ("y[t, :] = (x[t, :] - mean) * rsqrt(var + eps) * weight + bias over the last dim, "
            "biased variance, eps = 1e-5; fp32 statistics.")
    variants = (
        Rung("row_per_lane", "each lane owns a row: mean, variance and output loops over its columns",
             (Param("BLOCK_T", (32, 64, 128), 64), Param("num_warps", (1, 2, 4), 2)), memory_eff=0.45,
             launch=lane_rows_launch("BLOCK_T", "T", 3.4), render=row_per_lane_src, consts=lambda p, task: {"BLOCK_T": p["BLOCK_T"]},
             bugs={"off_by_one": {"col": "i + 1"}, "missing_scale": NO_SCALE}),
        Rung("chunked_three_pass", "program per row, BLOCK-wide chunks: mean pass, variance pass, output pass",
             CHUNK, memory_eff=0.8, launch=stream_stages.ca_staged(l2_reuse.row_rereads(stream_stages.launch_of(
                 launch_of(chunk_launch("T", "D", 2, 2.0), chunk_trips("D"), chunk_regs), chunk_trips("D"), loads=3, row="D"),
                 "T", "D"), chunk_trips("D")),
             render=stream_stages.render_of(render_of(chunked_three_pass_src)),
             consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"off_by_one": {"stop": "D - BLOCK"}, "missing_scale": NO_SCALE}),
        Rung("welford_chunked", "one chunked pass of per-lane Welford (n, mean, M2), merged by tl.reduce",
             CHUNK, memory_eff=0.84,
             launch=welford_issue(stream_stages.ca_staged(l2_reuse.row_rereads(stream_stages.launch_of(
                 launch_of(chunk_launch("T", "D", 4, 1.5, smem_per_warp=12), chunk_trips("D"), chunk_regs),
                 chunk_trips("D"), loads=3, row="D"), "T", "D"), chunk_trips("D"))),
             render=stream_stages.render_of(render_of(welford_chunked_src)),
             consts=lambda p, task: {"BLOCK": p["BLOCK"]},
             bugs={"wrong_init": {"init": "tl.full([BLOCK], 1.0, dtype=tl.float32)"}, "missing_scale": NO_SCALE}),
        Rung("whole_row_registers", "BLOCK_D = next_pow2(D): row loaded once, exact two-pass stats in registers",
             (Param("num_warps", (1, 2, 4, 8, 16), 4),), memory_eff=0.9, launch=row_launch,
             render=whole_row_registers_src, consts=block_d,
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"bound": "D - 1"}}, bug_tasks=ONE_ELEMENT_A_ROW),
        Rung("persistent", "grid of #SMs x k programs striding over rows, weight/bias hoisted, next row prefetched",
             (Param("num_warps", (2, 4, 8, 16), 16), Param("programs_per_sm", (1, 2, 4), 1)), memory_eff=0.92,
             launch=row_launch, render=persistent_src, consts=block_d,
             bugs={"off_by_one": {"first": "pid + 1"}, "missing_scale": NO_SCALE}),
    )
