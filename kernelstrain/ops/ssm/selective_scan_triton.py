"""Mamba selective scan forward in Triton (same math as selective_scan_cuda):
  dt = softplus(delta + delta_bias);  x_t = exp(dt A) x_{t-1} + dt B_t u_t;  y_t = (C_t . x_t + Dskip u_t) silu(z_t)

Ladder: program per (batch, BLOCK_D channels) stepping through time one step per iteration ->
chunks of CHUNK steps loaded as [BLOCK_D, CHUNK] tiles, the recurrence done by
tl.associative_scan over (a, b) pairs with a carried state -> exp2 with log2(e) folded into A and
a fused epilogue -> split-L state passing: chunk-state kernel, a sequential state-passing kernel
over chunks, and a chunk-output kernel (parallel over L for small batch x channels) -> (off the menus: it lost on the
H100) the next rung's order over spans of L
(_scan_split_outer.py: span end states, then each span from the ones before it) -> the N states in turn inside each
chunk, as Mamba's CUDA forward orders them (_scan_state_outer.py).
"""
import textwrap

from ..norms._norms import triton_spill
from ..base import KernelSpec, Launch, Param, Rung, DTYPE_BYTES, cdiv, triton_ptr, unchecked
from ._scan_state_outer import state_outer_launch, state_outer_src
from ._scan_split_outer import (SPLITS, spans_busy, split_l_state_outer_launch, split_l_state_outer_src,
                                split_outer_kernels, span_of)
from ._scan_triton import SIG, WRONG_INIT, X0, chunks_chained, program, prologue
from .selective_scan_spec import SelectiveScanSpec

BTERM = "(dt * ut)[:, None, :] * bt[None, :, :]"      # the input term; missing_scale drops dt

BD = Param("BLOCK_D", (1, 2, 4, 8, 16), 4)
OUTER = (Param("CHUNK", (64, 128, 256, 512), 128), Param("num_warps", (1, 2, 4, 8), 4))   # the state-outer rungs
CH = Param("CHUNK", (32, 64, 128), 64)
WARPS = Param("num_warps", (2, 4, 8), 4)


# -- sequential_loop -----------------------------------------------------------------------
def sequential_loop_launch(p, task):
    bd, n, threads = p["BLOCK_D"], task["N"], p["num_warps"] * task.gpu.warp
    per = max(1, bd * n // threads)
    return Launch(grid=task["B"] * cdiv(task["D"], bd), threads=threads, smem_bytes=4 * bd, regs=32 + 3 * per,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.6, lane_util=min(1.0, bd * n / threads))


def sequential_loop_src(p, task, x0=X0, bterm="(dt * ut)[:, None] * bt[None, :]"):
    return program(task, f"""

@triton.jit
def selective_scan_kernel({SIG}):
    # one program = BLOCK_D channels of one batch; the state [BLOCK_D, N] lives in registers
    b, blk = tl.program_id(0), tl.program_id(1)
    d = blk * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.arange(0, N)
    dm = d < D
    A = tl.load(A_ptr + d[:, None] * N + n[None, :], mask=dm[:, None], other=0.0)
    dskip = tl.load(Ds_ptr + d, mask=dm, other=0.0)
    dbias = tl.load(db_ptr + d, mask=dm, other=0.0)
    row = (b * D + d).to(tl.int64) * L
    bc = b.to(tl.int64) * N * L + n * L
    x = {x0}
    for t in range(L):
        # BLOCK_D loads L elements apart: every step touches BLOCK_D different lines
        ut = tl.load(u_ptr + row + t, mask=dm, other=0.0).to(tl.float32)
        dt = softplus(tl.load(dl_ptr + row + t, mask=dm, other=0.0).to(tl.float32) + dbias)
        zt = tl.load(z_ptr + row + t, mask=dm, other=0.0).to(tl.float32)
        bt = tl.load(B_ptr + bc + t).to(tl.float32)
        ct = tl.load(C_ptr + bc + t).to(tl.float32)
        x = tl.exp(dt[:, None] * A) * x + {bterm}
        yt = tl.sum(x * ct[None, :], axis=1) + dskip * ut
        tl.store(y_ptr + row + t, (yt * zt / (1.0 + tl.exp(-zt))).to(y_ptr.dtype.element_ty), mask=dm)
""",
                   f"selective_scan_kernel[(B, triton.cdiv(D, {p['BLOCK_D']}))](u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, "
                   f"D, L, N=N, BLOCK_D={p['BLOCK_D']}, num_warps={p['num_warps']})")


# -- the chunked rungs ---------------------------------------------------------------------
def chunk_launch(scale: float, launches: int = 1):
    """[BLOCK_D, N, CHUNK] tiles per program (x the L chunks when the scan is split over L)."""
    def launch(p, task):
        b, l, d, n, elt = task["B"], task["L"], task["D"], task["N"], DTYPE_BYTES[task.dtype]
        bd, ch, threads = p["BLOCK_D"], p["CHUNK"], p.get("num_warps", 4) * task.gpu.warp
        per = max(1, bd * n * ch // threads)                   # [BLOCK_D, N, CHUNK] elements per thread
        regs = 32 + 4 * per
        spill = triton_spill(regs, 255)        # H200: BLOCK_D 16, CHUNK 32 on 2 warps (544 by this count) ran 0.78 ms
        grid = b * cdiv(d, bd) * (cdiv(l, ch) if launches > 1 else 1)
        return Launch(grid=grid, threads=threads, smem_bytes=16 * threads, regs=min(regs, 255),
                      bytes_per_access=min(16, ch // 32 * elt * 4), traffic=(1.5 if launches > 1 else 1.0) * spill,
                      compute_scale=scale, lane_util=l / (cdiv(l, ch) * ch), launches=launches)
    return launch


def chunk_body(exp2: bool, carry_in: bool, outputs: bool, bterm: str = BTERM, tmask: str = "t < L",
               last: str = "CHUNK - 1") -> str:
    """Statements of one chunk (no indent): loads, scan, optional outputs; leaves a_end, x_end."""
    ex = "tl.exp2(dt[:, None, :] * A2[:, :, None])" if exp2 else "tl.exp(dt[:, None, :] * A2[:, :, None])"
    state = "x = a_cum * carry[:, :, None] + b_cum" if carry_in else "x = b_cum"
    out = ""
    if outputs:
        out = """
ct = tl.load(C_ptr + bc[:, None] + t[None, :], mask=tm[None, :], other=0.0).to(tl.float32)
zt = tl.load(z_ptr + offs, mask=m2, other=0.0).to(tl.float32)
yt = tl.sum(x * ct[None, :, :], axis=1) + dskip[:, None] * ut
tl.store(y_ptr + offs, (yt * zt / (1.0 + tl.exp(-zt))).to(y_ptr.dtype.element_ty), mask=m2)"""
    return f"""t = c0 + tl.arange(0, CHUNK)
tm = {tmask}
m2 = dm[:, None] & tm[None, :]
offs = row[:, None] + t[None, :]                          # [BLOCK_D, CHUNK], contiguous along t
ut = tl.load(u_ptr + offs, mask=m2, other=0.0).to(tl.float32)
dt = tl.where(m2, softplus(tl.load(dl_ptr + offs, mask=m2, other=0.0).to(tl.float32) + dbias[:, None]), 0.0)
bt = tl.load(B_ptr + bc[:, None] + t[None, :], mask=tm[None, :], other=0.0).to(tl.float32)
a = {ex}                                                  # [BLOCK_D, N, CHUNK]; masked steps: identity
bb = {bterm}
a_cum, b_cum = tl.associative_scan((a, bb), axis=2, combine_fn=combine)
{state}{out}
is_last = (tl.arange(0, CHUNK) == {last})[None, None, :]
a_end = tl.sum(tl.where(is_last, a_cum, 0.0), axis=2)
x_end = tl.sum(tl.where(is_last, x, 0.0), axis=2)"""


def chunked(p, task, exp2: bool, x0: str = X0, **slots) -> str:
    body = textwrap.indent(chunk_body(exp2, True, True, **slots), " " * 8)
    return program(task, f"""

@triton.jit
def selective_scan_kernel({SIG}, CHUNK: tl.constexpr):
    # CHUNK steps at a time: coalesced [BLOCK_D, CHUNK] tiles, the recurrence as a parallel scan
    b, blk = tl.program_id(0), tl.program_id(1)
{prologue(exp2)}
    carry = {x0}
    for c0 in range(0, L, CHUNK):
{body}
        carry = x_end
""",
                   f"selective_scan_kernel[(B, triton.cdiv(D, {p['BLOCK_D']}))](u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, "
                   f"D, L, N=N, BLOCK_D={p['BLOCK_D']}, CHUNK={p['CHUNK']}, num_warps={p.get('num_warps', 4)})")


def chunked_assoc_scan_src(p, task, **slots):
    return chunked(p, task, False, **slots)


def exp2_fused_epilogue_src(p, task, **slots):
    return chunked(p, task, True, **slots)


def split_l_state_passing_src(p, task, last="CHUNK - 1", chunks="NC"):
    state_body = textwrap.indent(chunk_body(True, False, False, last=last), " " * 4)
    out_body = textwrap.indent(chunk_body(True, True, True), " " * 4)
    grid = f"(B, triton.cdiv(D, {p['BLOCK_D']}), NC)"
    common = f"N=N, BLOCK_D={p['BLOCK_D']}"
    launch = f"""NC = triton.cdiv(L, {p['CHUNK']})
    # per (batch, channel, chunk): decay product and end state of the chunk, then the state entering it
    st = torch.empty((2, B, D, NC, N), dtype=torch.float32, device=u.device)
    ss_chunk_state_kernel[{grid}](u, delta, A, Bs, delta_bias, st, D, L, NC, {common}, CHUNK={p['CHUNK']}, num_warps={p['num_warps']})
    ss_state_pass_kernel[(B, triton.cdiv(D, {p['BLOCK_D']}))](st, D, NC, {common}, num_warps=1)
    selective_scan_kernel[{grid}](u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, D, L, {common}, CHUNK={p['CHUNK']},
                                  st_ptr=st, NC=NC, num_warps={p['num_warps']})"""
    st_addr = "((b * D + d)[:, None].to(tl.int64) * NC + c) * N + n[None, :]"
    plane = "tl.num_programs(0) * D * NC * N"        # offset of plane 1 (states) in st
    return program(task, f"""

@triton.jit
def ss_chunk_state_kernel(u_ptr, dl_ptr, A_ptr, B_ptr, db_ptr, st_ptr, D, L, NC,
                          N: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr):
    # chunk c alone, from a zero state: its decay product (plane 0) and end state (plane 1)
    b, blk, c = tl.program_id(0), tl.program_id(1), tl.program_id(2)
{prologue(True, skip=False)}
    c0 = c * CHUNK
{state_body}
    tl.store(st_ptr + {st_addr}, a_end, mask=dm[:, None])
    tl.store(st_ptr + {plane} + {st_addr}, x_end, mask=dm[:, None])


@triton.jit
def ss_state_pass_kernel(st_ptr, D, NC, N: tl.constexpr, BLOCK_D: tl.constexpr):
    # sequential over the NC chunks: plane 1 becomes the state ENTERING each chunk
    b, blk = tl.program_id(0), tl.program_id(1)
    d = blk * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.arange(0, N)
    dm = d < D
    s = tl.zeros((BLOCK_D, N), tl.float32)
    for c in range({chunks}):
        a_end = tl.load(st_ptr + {st_addr}, mask=dm[:, None], other=1.0)
        x_end = tl.load(st_ptr + {plane} + {st_addr}, mask=dm[:, None], other=0.0)
        tl.store(st_ptr + {plane} + {st_addr}, s, mask=dm[:, None])
        s = a_end * s + x_end


@triton.jit
def selective_scan_kernel({SIG}, CHUNK: tl.constexpr, st_ptr, NC):
    # chunk c again, now from its true incoming state: the outputs
    b, blk, c = tl.program_id(0), tl.program_id(1), tl.program_id(2)
{prologue(True)}
    carry = tl.load(st_ptr + {plane} + {st_addr}, mask=dm[:, None], other=0.0)
    c0 = c * CHUNK
{out_body}
""", launch)


BAD_LAST = {"last": "CHUNK - 2"}


class SelectiveScanTriton(SelectiveScanSpec):
    impl = "triton"
    desc = ("Selective scan (Mamba S6) forward with delta softplus, D skip and z gating. u, delta, z, y: [B, D, L]; "
            "Bs, Cs: [B, N, L] (same dtype); A: [D, N] fp32; Dskip, delta_bias: [D] fp32. fp32 state and math.")
    variants = (
        Rung("sequential_loop", "program per (batch, BLOCK_D channels), one time step per loop iteration",
             (Param("BLOCK_D", (16, 32, 64), 32), Param("num_warps", (1, 2, 4), 2)), compute_eff=0.25,
             memory_eff=0.3, launch=sequential_loop_launch, render=sequential_loop_src,
             bugs={"wrong_init": WRONG_INIT, "missing_scale": {"bterm": "bt[None, :] * ut[:, None]"}}),
        Rung("chunked_assoc_scan", "[BLOCK_D, CHUNK] tiles, tl.associative_scan of (a, b) pairs, carried state",
             (BD, CH, WARPS), compute_eff=0.3, memory_eff=0.72, launch=chunk_launch(0.55), render=chunked_assoc_scan_src,
             bugs={"bad_combine_index": BAD_LAST, "off_by_one": {"tmask": "t < L - 1"}}),
        Rung("exp2_fused_epilogue", "associative scan with exp2 (log2e folded into A), fused D-skip and SiLU gate",
             (BD, CH, WARPS), compute_eff=0.36, memory_eff=0.84, launch=chunk_launch(0.75),
             render=exp2_fused_epilogue_src,
             bugs={"missing_scale": {"bterm": "ut[:, None, :] * bt[None, :, :]"}, "wrong_init": WRONG_INIT}),
        Rung("split_l_state_passing", "3 kernels: per-chunk states, sequential state passing, chunk outputs",
             (BD, CH, WARPS), compute_eff=0.36, memory_eff=0.86, launch=chunk_launch(0.6, launches=3),
             render=split_l_state_passing_src, bugs={"bad_combine_index": BAD_LAST, "off_by_one": {"chunks": "NC - 1"}}),
        # OFF the menus (KERNELSTRAIN_DEVICE_UNCHECKED=1 reaches it): device-checked, and it loses. The H100 ran it
        # correct with its bugs failing (roomT/j1) and 1.4-1.5x slower than state_outer_scan at B=1 (118.2-128.8 us at
        # 2-16 spans against 84.8) and 1.66x at B=2 D=2048 (283.9 / 171.3), as modelled (150-193 / 97.0, 393.5 / 252.4):
        # BLOCK_D 2 / CHUNK 256 / 1 warp builds at 255 registers, so an SM holds 8 one-warp programs, which the B=1
        # grid (768) nearly fills already, and the spans add a second pass (measurements/h100_roomT_scan.json). On the
        # menus below state_outer_scan it intercepted climbers: room_table --seed 8282 --per 8, three of eight sessions
        # ended further from the oracle (1.006 -> 1.283, 1.000 -> 1.256, 1.975 -> 2.035), none nearer
        *unchecked(Rung("split_l_state_outer", "the state-outer scan over SPLITS spans of L: span end states, then each span "
             "again from the spans before it folded in", (BD,) + OUTER + (SPLITS,), compute_eff=0.36, memory_eff=0.84,
             launch=split_l_state_outer_launch, render=split_l_state_outer_src, fit_as="state_outer_scan",
             bugs={"bad_combine_index": BAD_LAST, "wrong_init": WRONG_INIT, "missing_scale": {"bterm": "ut * bt[None, :]"},
                   "off_by_one": {"fold_end": "s - 1"}},
             bug_tasks=(("off_by_one", spans_busy), ("bad_combine_index", chunks_chained)))),
        Rung("state_outer_scan", "per chunk the N states in turn: [BLOCK_D, CHUNK] scans, y summed in registers",
             (BD,) + OUTER, compute_eff=0.36, memory_eff=0.84, launch=state_outer_launch, render=state_outer_src,
             bugs={"bad_combine_index": BAD_LAST, "wrong_init": WRONG_INIT, "missing_scale": {"bterm": "ut * bt[None, :]"}},
             bug_tasks=(("bad_combine_index", chunks_chained),)),
    )

    def triton_kernels(self, variant, params, task) -> list:
        x = triton_ptr(task.dtype, task)
        warps = params.get("num_warps", 4)
        sig = {"u_ptr": x, "dl_ptr": x, "A_ptr": "*fp32", "B_ptr": x, "C_ptr": x, "Ds_ptr": "*fp32", "z_ptr": x,
               "db_ptr": "*fp32", "y_ptr": x, "D": "i32", "L": "i32", "N": "constexpr", "BLOCK_D": "constexpr"}
        c = {"N": task["N"], "BLOCK_D": params["BLOCK_D"]}
        if "CHUNK" not in params:
            return [KernelSpec("selective_scan_kernel", sig, c, num_warps=warps)]
        if variant.tag == "split_l_state_outer":
            return split_outer_kernels(sig, {**c, "CHUNK": params["CHUNK"], "SPLITS": params["SPLITS"]}, x, warps,
                                       span_of(task, params))
        sig, c = {**sig, "CHUNK": "constexpr"}, {**c, "CHUNK": params["CHUNK"]}
        if variant.tag != "split_l_state_passing":
            return [KernelSpec("selective_scan_kernel", sig, c, num_warps=warps)]
        sig = {**sig, "st_ptr": "*fp32", "NC": "i32"}
        st = {"u_ptr": x, "dl_ptr": x, "A_ptr": "*fp32", "B_ptr": x, "db_ptr": "*fp32", "st_ptr": "*fp32", "D": "i32",
              "L": "i32", "NC": "i32", "N": "constexpr", "BLOCK_D": "constexpr", "CHUNK": "constexpr"}
        ps = {"st_ptr": "*fp32", "D": "i32", "NC": "i32", "N": "constexpr", "BLOCK_D": "constexpr"}
        return [KernelSpec("ss_chunk_state_kernel", st, c, num_warps=warps),
                KernelSpec("ss_state_pass_kernel", ps, {"N": task["N"], "BLOCK_D": params["BLOCK_D"]}, num_warps=1),
                KernelSpec("selective_scan_kernel", sig, c, num_warps=warps)]
