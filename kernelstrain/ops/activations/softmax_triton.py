"""Row softmax in Triton: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), fp32 math.

Ladder: one lane per row walking columns (three passes, uncoalesced) -> program per row
streaming chunks three times (max, sum, output) -> online softmax (per-lane running max
and rescaled sum in one pass, then the output pass) -> the whole row in registers (one
read; spills once C is large) -> persistent programs that prefetch the next row -> few long
rows split over programs, partials merged by the output kernel (_softmax_split_triton.py).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, TRITON_PRELUDE, KernelSpec, triton_ptr, cdiv
from .. import l2_reuse, stream_stages
from ..unroll import LOOP_UNROLL, chunk_regs, chunk_trips, launch_of, render_of
from ..norms._norms import chunk_launch, lane_rows_launch, next_pow2, triton_spill
from ._softmax_rows import SPLIT_MEMORY_EFF
from ._softmax_split_triton import PARAMS as SPLIT_PARAMS, split_kernels, split_launch, split_src, split_wrapper
from .softmax_spec import ENTRY, SoftmaxSpec

# 2 warps (roomT, 2026-12-07): correct under TRITON_INTERPRET=1 with every bug failing (scripts/roomT_interpret.py),
# built for every target (scripts/room_compile_triton.py), and on the H100 (roomT/j4, 08:04 UTC, bugs failing) ahead
# of 4 or level: online_softmax R=16384 C=1024 31.7 vs 33.4 us, R=2048 C=4096 16.6 / 16.6; split_row_online R=16384
# C=1024 53.6 vs 62.3. The model has the order and overstates the gain (27.2 / 34.3, 44.4 / 58.4: the fitted num_warps
# bend carried past the 4-16 it was fitted on, where the launch model alone has 2 warps slower): a refit item
CHUNK = (Param("BLOCK", (512, 1024, 2048, 4096), 2048), Param("num_warps", (2, 4, 8, 16), 8), LOOP_UNROLL,
         stream_stages.STREAM_STAGES)
OUTPUT_LOOP = """    for off in range(0, {stop}, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < C
        v = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, (tl.exp(v - m){scale}).to(y_ptr.dtype.element_ty), mask=mask)
"""
ROW = """    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * C
    y_row = y_ptr + row * C
"""
NO_SCALE = {"scale": ""}


# -- row_per_lane --------------------------------------------------------------------------
def row_per_lane_src(p, task, init="tl.zeros([BLOCK_R], dtype=tl.float64)", stop="C"):
    return f"""
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr):
    # Each lane owns one row and walks it three times (max, sum, output):
    # neighbouring lanes read addresses C elements apart, so no load coalesces.
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    live = rows < R
    x_rows = x_ptr + rows.to(tl.int64) * C
    y_rows = y_ptr + rows.to(tl.int64) * C
    m = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    for i in range(0, C):
        m = tl.maximum(m, tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32))
    d = {init}   # fp64: a serial fp32 sum of ~1e5 terms drifts past fp32 tolerance
    for i in range(0, C):
        d += tl.exp(tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32) - m).to(tl.float64)
    inv = (1.0 / d).to(tl.float32)
    for i in range(0, {stop}):
        v = tl.load(x_rows + i, mask=live, other=0.0).to(tl.float32)
        tl.store(y_rows + i, (tl.exp(v - m) * inv).to(y_ptr.dtype.element_ty), mask=live)
"""


# -- chunked_three_pass, online_softmax: BLOCK-wide chunks ---------------------------------
def chunked_three_pass_src(p, task, init="tl.zeros([BLOCK], dtype=tl.float32)", scale=" * inv"):
    return f"""
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK: tl.constexpr):
    # One program per row, streamed in BLOCK-wide coalesced chunks three times:
    # the row max, the sum of exp(x - max), then the output.
{ROW}    m_l = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for off in range(0, C, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m_l = tl.maximum(m_l, tl.load(x_row + cols, mask=cols < C, other=float("-inf")).to(tl.float32))
    m = tl.max(m_l, axis=0)
    d_l = {init}
    for off in range(0, C, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        d_l += tl.exp(tl.load(x_row + cols, mask=cols < C, other=float("-inf")).to(tl.float32) - m)
    inv = 1.0 / tl.sum(d_l, axis=0)
{OUTPUT_LOOP.format(stop="C", scale=scale)}"""


def online_softmax_src(p, task, rescale=" * tl.exp(m_l - m)", stop="C"):
    return f"""
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK: tl.constexpr):
    # Online softmax: every lane keeps a running max m_l and a sum d_l that is
    # rescaled by exp(m_old - m_new) whenever its max grows, so the statistics
    # take ONE read of the row; the lanes are merged at the end.
{ROW}    m_l = tl.full([BLOCK], -3.0e38, dtype=tl.float32)   # finite: -3e38 - (-3e38) = 0, not NaN
    d_l = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, C, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_l, v)
        d_l = d_l * tl.exp(m_l - m_new) + tl.exp(v - m_new)
        m_l = m_new
    m = tl.max(m_l, axis=0)
    inv = 1.0 / tl.sum(d_l{rescale}, axis=0)
{OUTPUT_LOOP.format(stop=stop, scale=" * inv")}"""


# -- whole_row_registers, persistent: the row lives in registers ---------------------------
def row_launch(p, task):
    r, c, elt, gpu, nw = task["R"], task["C"], DTYPE_BYTES[task.dtype], task.gpu, p["num_warps"]
    threads, block_c = nw * gpu.warp, next_pow2(c)
    persistent = "programs_per_sm" in p
    per = max(1, block_c // threads)                  # elements of the row each thread holds
    # fp32 copy of the row (+ the prefetched next row in storage precision when persistent: loop-carried)
    prefetched = per * elt // 4 if persistent else 0
    regs = 16 + int(1.65 * per) + prefetched
    cap = min(255, gpu.regs_per_sm // threads)        # the register file bounds what one thread may hold
    # past the register file the row spills as rmsnorm's does (norms._norms.triton_spill; the prefetched row
    # pinned). H100, fp32 C=32000 (measurements/h100_gpucheck_kigrid.json): persistent on 8 warps (355
    # registers wanted, cap 255) ran 1.15x the unspilled whole-row rung, on 4 warps (694) 7.7x; the old
    # min(1 + excess / 64, 2.5) gave both 2.5. H200, C=128256-151936: whole-row and persistent 2-3.5x slower
    # than 2.5 said (sim/measured 0.29-0.65 in scripts/calibration_cv.py).
    spill = triton_spill(regs, cap, prefetched)
    util = min(1.0, c / block_c) * min(1.0, block_c / threads)
    if persistent:
        grid = min(r, gpu.sms * p["programs_per_sm"])
    else:
        grid, util = r, util * 0.85                   # no load in flight while the row is reduced
    return Launch(grid=grid, threads=threads, smem_bytes=4 * nw, regs=min(regs, cap), bytes_per_access=min(16, per * elt),
                  traffic=spill, lane_util=util, rounds=cdiv(r, grid), unrolled=per)


def whole_row_registers_src(p, task, norm=" / tl.sum(e, axis=0)", bound="C"):
    return f"""
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK_C: tl.constexpr):
    # BLOCK_C = next_pow2(C): the row is read once and max, sum and output all
    # come from registers. Padding lanes load -inf so they add exp(-inf) = 0.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_C)
    mask = cols < {bound}
    x = tl.load(x_ptr + row * C + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e{norm}
    tl.store(y_ptr + row * C + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
"""


def persistent_src(p, task, norm=" / tl.sum(e, axis=0)", stop="R"):
    return f"""
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK_C: tl.constexpr):
    # Persistent: #SMs x PROGRAMS_PER_SM programs stride over the rows; the next
    # row's load is issued before this row's max/sum reductions, so DRAM stays
    # busy while the program reduces.
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_C)
    mask = cols < C
    x_next = tl.load(x_ptr + pid.to(tl.int64) * C + cols, mask=mask & (pid < R), other=float("-inf"))
    for row in range(pid, {stop}, step):
        x = x_next.to(tl.float32)
        nxt = row + step
        x_next = tl.load(x_ptr + nxt.to(tl.int64) * C + cols, mask=mask & (nxt < R), other=float("-inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        y = e{norm}
        tl.store(y_ptr + row.to(tl.int64) * C + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
"""


def block_c(p, task) -> dict:
    return {"BLOCK_C": next_pow2(task["C"])}


def chunk(p, task) -> dict:
    return {"BLOCK": p["BLOCK"]}


def ROW_REREADS(launch_of_p):  # noqa: N802 (a launch wrapper, as stream_stages.launch_of)
    """The chunked rungs' later passes over a row served by L2 as far as the resident rows fit it
    (l2_reuse.row_rereads, layernorm_triton's chunked_three_pass model). Measured on the H100 at R=2048 C=4096
    (fp32 32 MB, bf16 16 MB: every resident row fits the 50 MB L2), gpu-check seeds 95353, 98181, 98282, 98989:
    chunked_three_pass ran 26.9-30.7 us fp32 and 15.4-17.7 bf16, online_softmax 26.5-28.4 fp32 and 16.6 bf16,
    within 1.04-1.2x of whole_row_registers' one read (25.2-25.9 fp32), where three and two DRAM reads of the
    row modelled 39.9-46.5 fp32 (1.35-1.73x over); at R=4096 C=32000 fp32 (128 KB rows, resident rows past the
    L2) chunked ran 705-709 us beside whole_row's 359: re-read from DRAM, as modelled."""
    return l2_reuse.row_rereads(launch_of_p, "R", "C")


class SoftmaxTriton(SoftmaxSpec):
    impl = "triton"
    variants = (
        Rung("row_per_lane", "each lane owns a row: max, sum-of-exp and output loops over its columns",
             (Param("BLOCK_R", (16, 32, 64), 32), Param("num_warps", (1, 2), 1)), memory_eff=0.45,
             launch=lane_rows_launch("BLOCK_R", "R", 3.4), render=row_per_lane_src, consts=lambda p, task: {"BLOCK_R": p["BLOCK_R"]},
             bugs={"wrong_init": {"init": "tl.full([BLOCK_R], 1.0, dtype=tl.float64)"}, "off_by_one": {"stop": "C - 1"}}),
        Rung("chunked_three_pass", "program per row, BLOCK-wide chunks: max pass, sum pass, output pass",
             CHUNK, memory_eff=0.82, launch=ROW_REREADS(stream_stages.launch_of(
                 launch_of(chunk_launch("R", "C", 2, 2.0), chunk_trips("C"), chunk_regs), chunk_trips("C"), loads=1, row="C")),
             render=stream_stages.render_of(render_of(chunked_three_pass_src)), consts=chunk,
             bugs={"wrong_init": {"init": "tl.full([BLOCK], 1.0, dtype=tl.float32)"}, "missing_scale": NO_SCALE}),
        Rung("online_softmax", "per-lane running max and rescaled sum in one chunked pass, then the output pass",
             CHUNK, memory_eff=0.88, launch=ROW_REREADS(stream_stages.launch_of(
                 launch_of(chunk_launch("R", "C", 3, 1.5), chunk_trips("C"), chunk_regs), chunk_trips("C"), loads=1, row="C")),
             render=stream_stages.render_of(render_of(online_softmax_src)), consts=chunk,
             bugs={"missing_scale": {"rescale": ""}, "off_by_one": {"stop": "C - BLOCK"}}),
        Rung("whole_row_registers", "BLOCK_C = next_pow2(C): the row is read once and kept in registers",
             (Param("num_warps", (4, 8, 16), 8),), memory_eff=0.9, launch=row_launch, render=whole_row_registers_src,
             consts=block_c, bugs={"missing_scale": {"norm": ""}, "off_by_one": {"bound": "C - 1"}}),
        Rung("persistent", "grid of #SMs x k programs striding over rows, next row prefetched in registers",
             (Param("num_warps", (4, 8, 16), 8), Param("programs_per_sm", (1, 2, 4), 2)), memory_eff=0.92,
             launch=row_launch, render=persistent_src, consts=block_c,
             bugs={"missing_scale": {"norm": ""}, "off_by_one": {"stop": "R - 1"}}),
        Rung("split_row_online", "SPLITS programs per row: per-part online (max, sum), an output kernel merges and writes",
             SPLIT_PARAMS, memory_eff=SPLIT_MEMORY_EFF, launch=split_launch, render=split_src,
             consts=lambda p, task: {"BLOCK": p["BLOCK"], "SPLITS": p["SPLITS"]},
             # no wrong_init: lanes' sums started at 1 are rescaled by exp(-3e38 - max) = 0 on their
             # first load (an H100 passed it 3x)
             bugs={"missing_scale": {"rescale": ""}}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        consts = variant.consts(params, task)
        if "SPLITS" in params:
            return split_kernels(params, task, consts)
        sig = {"x_ptr": ptr, "y_ptr": ptr, "R": "i32", "C": "i32", **{k: "constexpr" for k in consts}}
        return [KernelSpec("softmax_kernel", sig, consts, num_warps=params["num_warps"], num_stages=1)]

    def assemble(self, kernel, variant, params, task) -> str:
        consts = variant.consts(params, task)
        kw = "".join(f"{k}={v}, " for k, v in consts.items())
        if "SPLITS" in params:
            return f"{TRITON_PRELUDE}\n@triton.jit\n{kernel.strip(chr(10))}\n\n\n{split_wrapper(ENTRY.py_def(task), params, consts)}"
        if "programs_per_sm" in params:
            grid = "min(R, torch.cuda.get_device_properties(x.device).multi_processor_count * PROGRAMS_PER_SM)"
            head = f"PROGRAMS_PER_SM = {params['programs_per_sm']}\n\n\n"
        else:
            grid, head = f"triton.cdiv(R, {consts.get('BLOCK_R', 1)})", ""
        return f"""{TRITON_PRELUDE}
{head}@triton.jit
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    R, C = x.shape
    x = x.contiguous()
    y = torch.empty_like(x)
    softmax_kernel[({grid},)](x, y, R, C, {kw}num_warps={params['num_warps']})
    return y
"""
