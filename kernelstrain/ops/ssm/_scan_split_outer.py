"""selective_scan_triton's split_l_state_outer rung: state_outer_scan's order (the N states in turn inside a chunk)
with the sequence split into SPLITS spans run by separate programs, as Mamba-2's chunked scan passes states between
chunks (ssd_combined: chunk states, state passing, chunk outputs). At small batch x channels state_outer_scan's grid is
a few warps an SM (B=1 D=1536 at BLOCK_D 2: 768 one-warp programs on 132 SMs), each a long serial chain of scans; the
H100 ran it 88 us against a ~8 us DRAM floor (measurements/h100_gpucheck_s96969.json). Splitting L multiplies the
programs by SPLITS at the price of a second pass over u, delta and B.

Two kernels: (1) every (batch, channel block, span) from a zero state stores the span's end state and its summed dt
(the span's decay is exp2(A dsum), no scan needed); (2) every (batch, channel block, span) folds the spans before its
own in order into its entering state (SPLITS - 1 small steps at most) and scans its span again from it, writing y.
"""
import textwrap
from dataclasses import replace

from ..base import KernelSpec, Param, cdiv
from ._scan_state_outer import outer_chunk, state_outer_launch
from ._scan_triton import SIG, X0, program, prologue

SPLITS = Param("SPLITS", (2, 4, 8, 16), 4)
ST_ADDR = "((b * D + d)[:, None].to(tl.int64) * SPLITS + {j}) * N + n[None, :]"     # st[b, d, span, n]
DS_ADDR = "(b * D + d).to(tl.int64) * SPLITS + {j}"                                 # ds[b, d, span]


def span_loop(body: str) -> str:
    """This program's span of whole chunks (the last span may be short or empty), `body` once a chunk."""
    return f"""    lo = s * span
    for c0 in range(lo, tl.minimum(lo + span, L), CHUNK):
{textwrap.indent(body, " " * 8)}"""


def split_l_state_outer_src(p, task, x0=X0, last="CHUNK - 1", bterm="dtu * bt[None, :]", fold_end="s"):
    grid = f"(B, triton.cdiv(D, {p['BLOCK_D']}), {p['SPLITS']})"
    consts = f"N=N, BLOCK_D={p['BLOCK_D']}, CHUNK={p['CHUNK']}, SPLITS={p['SPLITS']}, num_warps={p['num_warps']}"
    launch = f"""span = triton.cdiv(triton.cdiv(L, {p['SPLITS']}), {p['CHUNK']}) * {p['CHUNK']}   # whole chunks a span
    # per (batch, channel, span): end state from a zero state, and the span's summed dt
    st = torch.empty((B, D, {p['SPLITS']}, N), dtype=torch.float32, device=u.device)
    ds = torch.empty((B, D, {p['SPLITS']}), dtype=torch.float32, device=u.device)
    ss_span_state_kernel[{grid}](u, delta, A, Bs, delta_bias, st, ds, D, L, span, {consts})
    selective_scan_kernel[{grid}](u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, D, L, st_ptr=st, ds_ptr=ds, span=span,
                                  {consts})"""
    head = f"""    b, blk, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
{{}}
    is_last = (tl.arange(0, CHUNK) == {last})[None, :]
    b_row = b.to(tl.int64) * N * L                              # B_t, C_t of state i: b_row + i * L + t"""
    return program(task, f"""

@triton.jit
def ss_span_state_kernel(u_ptr, dl_ptr, A_ptr, B_ptr, db_ptr, st_ptr, ds_ptr, D, L, span,
                         N: tl.constexpr, BLOCK_D: tl.constexpr, CHUNK: tl.constexpr, SPLITS: tl.constexpr):
    # span s alone, from a zero state: its end state and its summed dt (the span's decay is exp2(A dsum))
{head.format(prologue(True, skip=False))}
    carry = tl.zeros((BLOCK_D, N), tl.float32)
    dsum = tl.zeros((BLOCK_D,), tl.float32)
{span_loop(outer_chunk(bterm=bterm, outputs=False))}
    tl.store(st_ptr + {ST_ADDR.format(j="s")}, carry, mask=dm[:, None])
    tl.store(ds_ptr + {DS_ADDR.format(j="s")}, dsum, mask=dm)


@triton.jit
def selective_scan_kernel({SIG}, st_ptr, ds_ptr, span, CHUNK: tl.constexpr,
                          SPLITS: tl.constexpr):
    # span s again, from its true entering state: the spans before it folded in order, then its outputs
{head.format(prologue(True))}
    carry = {x0}
    for j in range(0, {fold_end}):
        end_j = tl.load(st_ptr + {ST_ADDR.format(j="j")}, mask=dm[:, None], other=0.0)
        dsum_j = tl.load(ds_ptr + {DS_ADDR.format(j="j")}, mask=dm, other=0.0)
        carry = tl.exp2(A2 * dsum_j[:, None]) * carry + end_j
{span_loop(outer_chunk(bterm=bterm))}
""", launch)


def spans_busy(task, p) -> bool:
    """The fold that skips the span just before is wrong only where a second span has steps (L 256 in 512-step
    chunks is one span)."""
    return task["L"] > span_of(task, p)


def split_l_state_outer_launch(p, task):
    """state_outer_scan's launch x SPLITS programs, each over L / SPLITS steps: two passes (the state pass scans
    without the C dot and the gated store), so ~2x the scans' work a useful element, and u, delta, B read twice
    (6 of the op's 4 [B, D, L] planes' bytes); the spans' states (fp32 [B, D, SPLITS, N]) are small."""
    one = state_outer_launch(p, task)
    return replace(one, grid=one.grid * p["SPLITS"], traffic=one.traffic * 1.5, compute_scale=one.compute_scale / 2,
                   launches=2)


def span_of(task, p) -> int:
    """Steps of one span: whole chunks, the wrapper's `span` (a multiple of CHUNK, so of 16: Triton's launcher marks it
    divisible and the span's loads stay aligned vectors)."""
    return cdiv(cdiv(task["L"], p["SPLITS"]), p["CHUNK"]) * p["CHUNK"]


def split_outer_kernels(sig: dict, consts: dict, x: str, warps: int, span: int) -> list:
    """The rung's two kernels as Triton declares them (`sig`: selective_scan_kernel's leading parameters)."""
    tail = {"CHUNK": "constexpr", "SPLITS": "constexpr"}
    state = {"u_ptr": x, "dl_ptr": x, "A_ptr": "*fp32", "B_ptr": x, "db_ptr": "*fp32", "st_ptr": "*fp32",
             "ds_ptr": "*fp32", "D": "i32", "L": "i32", "span": "i32", "N": "constexpr", "BLOCK_D": "constexpr", **tail}
    out = {**sig, "st_ptr": "*fp32", "ds_ptr": "*fp32", "span": "i32", **tail}
    return [KernelSpec("ss_span_state_kernel", state, consts, num_warps=warps, ints={"span": span}),
            KernelSpec("selective_scan_kernel", out, consts, num_warps=warps, ints={"span": span})]
