"""selective_scan_triton's state_outer_scan rung: Mamba's CUDA forward (selective_scan_fwd_kernel) loops the state
index outside its block scan over time and keeps y in registers; here, per CHUNK of time, the N states one after
another, each a [BLOCK_D, CHUNK] tl.associative_scan, y summed elementwise, only the chunk's end state crossing lanes.
"""
import textwrap

from ..base import Launch, DTYPE_BYTES, cdiv
from ..norms._norms import triton_spill
from ._scan_triton import SIG, X0, program, prologue

SCAN_SCALE, SCAN_EXP = 0.3, 0.8     # compute_scale of a thread's values (state_outer_launch)
TILE_LOADS = 3                      # u, delta and z: the [BLOCK_D, CHUNK] tiles a chunk's top loads together
# A chunk longer than one warp's span of 16-byte vectors (32 lanes x 8 fp16/bf16 values: 256 steps) scans in that
# many segments, one after another, each starting from the last one's total: compute_scale x segments ** -SEGMENT_EXP.
# The H200 rows below: CHUNK 512 ran slower than 256 at both shapes (139 vs 109 us, 370 vs 294) where BLOCK_D 16 and
# 1 warp, the same 16 values a thread, ran faster than their 8-value neighbours; 0.7 orders both CHUNK sweeps
# (0.8 / 0.8 -> 1.0 / 1.0; geomean 1.035 -> 1.065), and moves the model's best off CHUNK 512.
SEGMENT_EXP = 0.7


def state_outer_launch(p, task):
    """[BLOCK_D, CHUNK] tiles, N scans of them a chunk. tl.associative_scan runs the values a thread holds in
    sequence, then shuffles across lanes and, where the chunk spans warps, through shared memory with barriers:
    the more values a thread holds, the fewer cross-lane and cross-warp steps per element. The H200 (22:00
    UTC, room_device_check_triton, B=1 L=2048 D=1536 and B=4 L=1024 D=3072) ran faster with every change
    that gives a thread more values: num_warps 8/4/2/1 at BLOCK_D 4, CHUNK 128: 454/258/207/163 us (B=1),
    1698/550/312/239 us (B=4); BLOCK_D 1/2/4/8/16 at 4 warps: 548/392/258/217/214 and 2039/1217/550/318/281;
    CHUNK 64/128/256 at 4 warps: 282/258/109 and 678/550/294 (512: 139 and 370). Time fell about as values
    a thread ^ -0.45 (x 0.73 a doubling) up to 16 values; past that the registers the 2 scanned pairs hold
    spill. The best, 109 us at B=1 and 239 us at B=4, beat exp2_fused_epilogue's best (213 and 788 us).

    The scan is the kernel's time, not its bytes (B=4: 100 MB, 21 us at the H200's bandwidth, for 239-2039 us):
    compute_scale (SCAN_SCALE x values a thread ** SCAN_EXP) puts the roofline on the compute side, and a thread's
    three [BLOCK_D, CHUNK] tile loads at a chunk's top (u, delta, z: independent, issued together) are its bytes in
    flight. The earlier 0.75 x values ** 0.45 and one 16-byte load left it memory-bound, where only the borrowed
    memory ceiling (chunked_assoc_scan's) and the module's BLOCK_D exponent (+0.23 a doubling) moved it: it ordered
    the six H200 sweeps above at Spearman -0.4 / -0.3 / 1.0 / 0.8 / 0.4 / 1.0 (geomean 0.84), its best at BLOCK_D 1
    (the device's slowest); these constants (fitted on the same 26 rows): 1.0 / 1.0 / 0.8 / 1.0 / 1.0 / 0.8, 1.04;
    with SEGMENT_EXP all six 1.0, 1.07."""
    b, l, d, elt = task["B"], task["L"], task["D"], DTYPE_BYTES[task.dtype]
    bd, ch, threads = p["BLOCK_D"], p["CHUNK"], p["num_warps"] * task.gpu.warp
    per = max(1, bd * ch // threads)
    segments = max(1, ch // (task.gpu.warp * 16 // elt))
    regs = 40 + 12 * per                   # u, dt, dt*u, y, a, b, the scan's pair and its result: live tiles
    return Launch(grid=b * cdiv(d, bd), threads=threads, smem_bytes=16 * threads, regs=min(regs, 255),
                  bytes_per_access=TILE_LOADS * per * elt, traffic=triton_spill(regs, 255),
                  compute_scale=SCAN_SCALE * min(per, 16) ** SCAN_EXP * segments ** -SEGMENT_EXP,
                  lane_util=l / (cdiv(l, ch) * ch))


def outer_chunk(tmask: str = "t < L", bterm: str = "dtu * bt[None, :]", outputs: bool = True) -> str:
    """One chunk of the state-outer order (no indent): the N states in turn, each a [BLOCK_D, CHUNK] scan from the
    carried state; with `outputs` y summed in registers, gated and stored, else the chunk's summed dt (`dsum`, the
    decay exp2(A dsum) of the chunk) for split_l_state_outer's span states. Leaves the end state in `carry`."""
    y = lambda line: line if outputs else None     # noqa: E731  (a line of the output pass only)
    lines = [
        "t = c0 + tl.arange(0, CHUNK)",
        f"tm = {tmask}",
        "m2 = dm[:, None] & tm[None, :]",
        "offs = row[:, None] + t[None, :]                      # [BLOCK_D, CHUNK], contiguous along t",
        "ut = tl.load(u_ptr + offs, mask=m2, other=0.0).to(tl.float32)",
        "dt = tl.where(m2, softplus(tl.load(dl_ptr + offs, mask=m2, other=0.0).to(tl.float32) + dbias[:, None]), 0.0)",
        "dtu = dt * ut",
        y("yt = dskip[:, None] * ut") or "dsum += tl.sum(dt, axis=1)",
        "nxt = tl.zeros((BLOCK_D, N), tl.float32)",
        "for i in tl.static_range(N):",
        "    sel = (n == i)[None, :]",
        "    a_i = tl.sum(tl.where(sel, A2, 0.0), axis=1)         # column i of the [BLOCK_D, N] tiles",
        "    x_in = tl.sum(tl.where(sel, carry, 0.0), axis=1)",
        "    bt = tl.load(B_ptr + b_row + i * L + t, mask=tm, other=0.0).to(tl.float32)",
        y("    ct = tl.load(C_ptr + b_row + i * L + t, mask=tm, other=0.0).to(tl.float32)"),
        "    a = tl.exp2(dt * a_i[:, None])                          # masked steps: dt 0, identity",
        f"    a_cum, b_cum = tl.associative_scan((a, {bterm}), axis=1, combine_fn=combine)",
        "    x = a_cum * x_in[:, None] + b_cum",
        y("    yt += x * ct[None, :]"),
        "    nxt = tl.where(sel, tl.sum(tl.where(is_last, x, 0.0), axis=1)[:, None], nxt)",
        "carry = nxt",
        y("zt = tl.load(z_ptr + offs, mask=m2, other=0.0).to(tl.float32)"),
        y("tl.store(y_ptr + offs, (yt * zt / (1.0 + tl.exp(-zt))).to(y_ptr.dtype.element_ty), mask=m2)"),
    ]
    return "\n".join(line for line in lines if line is not None)


def state_outer_src(p, task, x0=X0, last="CHUNK - 1", tmask="t < L", bterm="dtu * bt[None, :]"):
    """Mamba's CUDA forward order in Triton: the N states one after another inside a chunk."""
    return program(task, f"""

@triton.jit
def selective_scan_kernel({SIG}, CHUNK: tl.constexpr):
    # the N states one after another (as Mamba's selective_scan_fwd_kernel loops state_idx): each a
    # [BLOCK_D, CHUNK] scan, y summed elementwise in registers; only the chunk's end state crosses lanes
    b, blk = tl.program_id(0), tl.program_id(1)
{prologue(True)}
    is_last = (tl.arange(0, CHUNK) == {last})[None, :]
    b_row = b.to(tl.int64) * N * L                              # B_t, C_t of state i: b_row + i * L + t
    carry = {x0}
    for c0 in range(0, L, CHUNK):
{textwrap.indent(outer_chunk(tmask, bterm), " " * 8)}
""",
                   f"selective_scan_kernel[(B, triton.cdiv(D, {p['BLOCK_D']}))](u, delta, A, Bs, Cs, Dskip, z, delta_bias, y, "
                   f"D, L, N=N, BLOCK_D={p['BLOCK_D']}, CHUNK={p['CHUNK']}, num_warps={p['num_warps']})")
