"""SwiGLU forward in Triton: y[t, i] = silu(x[t, i]) * x[t, I + i] from the fused gate|up output.

Ladder: flat 1-D blocks with div/mod per element -> one program per token row looping over I
-> 2-D grid (column block x row) -> [BLOCK_T, BLOCK_I] tiles per program -> persistent
programs (#SMs x k) striding over the tiles.
"""
from ..base import KernelSpec, Launch, Param, Rung, TRITON_PRELUDE, DTYPE_BYTES, cdiv, triton_ptr
from .. import stream_stages
from ._swiglu_triton import BLOCK, WARPS, flat_lanes, persistent_programs
from .swiglu_fwd_spec import ENTRY, SwigluFwdSpec


def program(p, task, kernel: str, grid: str) -> str:
    """The candidate: silu_mul, the rung's kernel and the wrapper launching it on `grid`."""
    extra = "".join(f", {k}={p[k]}" for k in ("BLOCK_T",) if k in p)
    if "programs_per_sm" in p:
        extra += f", NUM_PROGS={persistent_programs(p, task)}"
    return f"""{TRITON_PRELUDE}

@triton.jit
def silu_mul(g, u):
    g = g.to(tl.float32)
    return g * tl.sigmoid(g) * u.to(tl.float32)

{kernel}

{ENTRY.py_def(task)}:
    T, I = x.shape[0], x.shape[1] // 2
    y = torch.empty((T, I), dtype=x.dtype, device=x.device)
    grid = {grid}
    swiglu_fwd_kernel[grid](x, y, T, I, BLOCK={p['BLOCK']}{extra}, num_warps={p['num_warps']})
    return y
"""


def geometry(p, task):
    """(threads, contiguous elements per thread, bytes per access, column blocks, lane use)."""
    block, threads = p["BLOCK"], p["num_warps"] * task.gpu.warp
    per_thread = max(1, block // threads)
    col_blocks = cdiv(task["I"], block)
    return (threads, per_thread, min(16, per_thread * DTYPE_BYTES[task.dtype]), col_blocks,
            task["I"] / (col_blocks * block) * min(1.0, block / threads))


# -- flat_index ----------------------------------------------------------------------------
def flat_index_launch(p, task):
    threads = p["num_warps"] * task.gpu.warp
    # a lane's BLOCK / threads consecutive outputs load as one vector (_swiglu_triton.flat_lanes: the PTX's .b32 /
    # .v2.b32 at 2 / 4 bf16 a lane where I is a multiple of 16). An H100 (measurements/h100_roomS_order.json,
    # T=4096 I=11008 bf16): BLOCK 256 over 4 warps 110.1 us, which the 2-byte width modelled at 212 (now 161)
    per = max(1, p["BLOCK"] // threads) if task["I"] % 16 == 0 else 1
    return Launch(grid=cdiv(task["T"] * task["I"], p["BLOCK"]), threads=threads, regs=24,
                  bytes_per_access=min(16, per * DTYPE_BYTES[task.dtype]), lane_util=min(1.0, p["BLOCK"] / threads))


def flat_index_src(p, task, n="T * I"):
    return program(p, task, f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    {flat_lanes(p, task)}
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row, col = offs // I, offs % I
    g = tl.load(x_ptr + row * 2 * I + col, mask=mask)
    u = tl.load(x_ptr + row * 2 * I + I + col, mask=mask)
    tl.store(y_ptr + offs, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"(triton.cdiv(T * I, {p['BLOCK']}),)")


# -- row_program, tile_2d ------------------------------------------------------------------
def row_program_launch(p, task):
    threads, per_thread, vec, _, util = geometry(p, task)
    return Launch(grid=task["T"], threads=threads, regs=16 + 2 * per_thread, bytes_per_access=vec, lane_util=util)


def row_program_src(p, task, bound="I"):
    return program(p, task, f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    # one program walks a whole token row: contiguous loads, but only T programs in flight
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * 2 * I, y_ptr + row * I
    for start in tl.range(0, I, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < {bound}
        g = tl.load(x_row + cols, mask=mask)
        u = tl.load(x_row + I + cols, mask=mask)
        tl.store(y_row + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", "(T,)")


def tile_2d_launch(p, task):
    threads, per_thread, vec, col_blocks, util = geometry(p, task)
    return Launch(grid=col_blocks * task["T"], threads=threads, regs=16 + 2 * per_thread, bytes_per_access=vec,
                  lane_util=util)


def tile_2d_src(p, task, bound="I"):
    return program(p, task, f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    # axis 0: block of columns, axis 1: token row -> T * I / BLOCK independent programs
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < {bound}
    g = tl.load(x_ptr + row * 2 * I + cols, mask=mask)
    u = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask)
    tl.store(y_ptr + row * I + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"(triton.cdiv(I, {p['BLOCK']}), T)")


# -- multi_row_tile, persistent ------------------------------------------------------------
def multi_row_tile_launch(p, task):
    threads, per_thread, vec, col_blocks, util = geometry(p, task)
    t, rows = task["T"], p["BLOCK_T"]
    return Launch(grid=col_blocks * cdiv(t, rows), threads=threads, regs=16 + 2 * per_thread * rows,
                  bytes_per_access=vec * rows, lane_util=util * t / (cdiv(t, rows) * rows))


def multi_row_tile_src(p, task, col_bound="I"):
    return program(p, task, f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr):
    # a [BLOCK_T, BLOCK] tile: each lane holds BLOCK_T independent vectors in flight
    rows = (tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)[:, None]
    cols = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))[None, :]
    mask = (rows < T) & (cols < {col_bound})
    g = tl.load(x_ptr + rows * 2 * I + cols, mask=mask)
    u = tl.load(x_ptr + rows * 2 * I + I + cols, mask=mask)
    tl.store(y_ptr + rows * I + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"(triton.cdiv(I, {p['BLOCK']}), triton.cdiv(T, {p['BLOCK_T']}))")


def persistent_launch(p, task):
    threads, per_thread, vec, _, util = geometry(p, task)
    return Launch(grid=persistent_programs(p, task), threads=threads, regs=24 + 2 * per_thread,
                  bytes_per_access=vec, lane_util=util)


def persistent_src(p, task, tiles="num_tiles"):
    return program(p, task, f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr, NUM_PROGS: tl.constexpr):
    # NUM_PROGS programs (#SMs x k, capped by the tile count) stay resident and stride over
    # the (row, column-block) tiles: no block scheduling tail, loads of the next tile overlap.
    col_blocks = tl.cdiv(I, BLOCK)
    num_tiles = T * col_blocks
    for tile in tl.range(tl.program_id(0), {tiles}, NUM_PROGS):
        row = (tile // col_blocks).to(tl.int64)
        cols = (tile % col_blocks) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < I
        g = tl.load(x_ptr + row * 2 * I + cols, mask=mask)
        u = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask)
        tl.store(y_ptr + row * I + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"({persistent_programs(p, task)},)")


class SwigluFwdTriton(SwigluFwdSpec):
    impl = "triton"
    variants = (
        Rung("flat_index", "1-D blocks over T*I outputs, // and % per element",
             (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4)), compute_eff=0.2, memory_eff=0.5,
             launch=flat_index_launch, render=flat_index_src, bugs={"off_by_one": {"n": "T * I - 1"}}),
        Rung("row_program", "one program per token row, tl.range loop over I in BLOCK chunks",
             (BLOCK, WARPS, stream_stages.STREAM_STAGES), compute_eff=0.3, memory_eff=0.79,
             launch=stream_stages.launch_of(row_program_launch, lambda p, task: task["I"] / p["BLOCK"], loads=2, row="I"),
             render=stream_stages.render_of(row_program_src),
             bugs={"off_by_one": {"bound": "I - 1"}}),
        Rung("tile_2d", "2-D grid (column block, row): contiguous, vectorizable loads, no loop",
             (BLOCK, WARPS), compute_eff=0.4, memory_eff=0.82, launch=tile_2d_launch, render=tile_2d_src,
             # off_by_one: the last column is never written (no_bounds_check, as in row_program, was
             # invisible wherever BLOCK divides I: an H200 matched it at I = 14336, BLOCK 1024)
             bugs={"off_by_one": {"bound": "I - 1"}}),
        Rung("multi_row_tile", "[BLOCK_T, BLOCK_I] tile per program: more bytes in flight per thread",
             (Param("BLOCK_T", (1, 2, 4, 8), 2), BLOCK, WARPS), compute_eff=0.4, memory_eff=0.81,
             launch=multi_row_tile_launch, render=multi_row_tile_src, bugs={"off_by_one": {"col_bound": "I - 1"}}),
        Rung("persistent", "#SMs x k programs loop over the row-tiles with tl.range",
             (BLOCK, WARPS, Param("programs_per_sm", (8, 16, 32), 16)), compute_eff=0.4, memory_eff=0.79,
             launch=persistent_launch, render=persistent_src, bugs={"off_by_one": {"tiles": "num_tiles - 1"}}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"x_ptr": ptr, "y_ptr": ptr, "T": "i32", "I": "i32", "BLOCK": "constexpr"}
        consts = {"BLOCK": params["BLOCK"]}
        if "BLOCK_T" in params:
            sig["BLOCK_T"], consts["BLOCK_T"] = "constexpr", params["BLOCK_T"]
        if "programs_per_sm" in params:
            sig["NUM_PROGS"], consts["NUM_PROGS"] = "constexpr", persistent_programs(params, task)
        return [KernelSpec("swiglu_fwd_kernel", sig, consts, num_warps=params["num_warps"], num_stages=1)]
