"""SwiGLU forward in Triton: y[t, i] = silu(x[t, i]) * x[t, I + i] from the fused gate|up output.

Ladder: flat 1-D blocks with div/mod per element -> one program per token row looping over I
-> 2-D grid (column block x row) -> [BLOCK_T, BLOCK_I] tiles per program -> persistent
programs (#SMs x k) striding over the tiles.
"""
from ..base import KernelSpec, Launch, Param, Task, TRITON_PRELUDE, Variant, DTYPE_BYTES, cdiv, triton_ptr
from ._swiglu_triton import BLOCK, WARPS, persistent_programs
from .swiglu_fwd_spec import SwigluFwdSpec


class SwigluFwdTriton(SwigluFwdSpec):
    impl = "triton"
    variants = (
        Variant("flat_index", "1-D blocks over T*I outputs, one element per lane, // and % per element",
                (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4)),
                compute_eff=0.2, memory_eff=0.5, bugs=("off_by_one",)),
        Variant("row_program", "one program per token row, tl.range loop over I in BLOCK chunks",
                (BLOCK, WARPS), compute_eff=0.3, memory_eff=0.79, bugs=("no_bounds_check",)),
        Variant("tile_2d", "2-D grid (column block, row): contiguous, vectorizable loads, no loop",
                (BLOCK, WARPS), compute_eff=0.4, memory_eff=0.82, bugs=("no_bounds_check",)),
        Variant("multi_row_tile", "[BLOCK_T, BLOCK_I] tile per program: more bytes in flight per thread",
                (Param("BLOCK_T", (1, 2, 4, 8), 2), BLOCK, WARPS), compute_eff=0.4, memory_eff=0.81,
                bugs=("off_by_one",)),
        Variant("persistent", "#SMs x k programs loop over the row-tiles with tl.range",
                (BLOCK, WARPS, Param("programs_per_sm", (8, 16, 32), 16)), compute_eff=0.4, memory_eff=0.79,
                bugs=("off_by_one",)),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, i, elt = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        block, threads = params["BLOCK"], params["num_warps"] * task.gpu.warp
        per_thread = max(1, block // threads)                      # contiguous elements per thread
        vec = min(16, per_thread * elt)
        if variant.tag == "flat_index":
            return Launch(grid=cdiv(t * i, block), threads=threads, regs=24, bytes_per_access=elt,
                          lane_util=min(1.0, block / threads))
        if variant.tag == "row_program":
            return Launch(grid=t, threads=threads, regs=16 + 2 * per_thread, bytes_per_access=vec,
                          lane_util=i / (cdiv(i, block) * block) * min(1.0, block / threads))
        col_blocks = cdiv(i, block)
        util = i / (col_blocks * block) * min(1.0, block / threads)
        if variant.tag == "tile_2d":
            return Launch(grid=col_blocks * t, threads=threads, regs=16 + 2 * per_thread, bytes_per_access=vec,
                          lane_util=util)
        if variant.tag == "multi_row_tile":
            rows = params["BLOCK_T"]
            return Launch(grid=col_blocks * cdiv(t, rows), threads=threads, regs=16 + 2 * per_thread * rows,
                          bytes_per_access=vec * rows, lane_util=util * t / (cdiv(t, rows) * rows))
        return Launch(grid=persistent_programs(params, task), threads=threads, regs=24 + 2 * per_thread,
                      bytes_per_access=vec, lane_util=util)

    def signature(self, task: Task) -> str:
        return "def swiglu_fwd(x: torch.Tensor) -> torch.Tensor  # x [T, 2*I] -> y [T, I]"

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"x_ptr": ptr, "y_ptr": ptr, "T": "i32", "I": "i32", "BLOCK": "constexpr"}
        consts = {"BLOCK": params["BLOCK"]}
        if variant.tag == "multi_row_tile":
            sig["BLOCK_T"], consts["BLOCK_T"] = "constexpr", params["BLOCK_T"]
        if variant.tag == "persistent":
            sig["NUM_PROGS"], consts["NUM_PROGS"] = "constexpr", persistent_programs(params, task)
        return [KernelSpec("swiglu_fwd_kernel", sig, consts, num_warps=params["num_warps"], num_stages=1)]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        kernel, grid = getattr(self, "_" + variant.tag)(params, task, bug)
        extra = "".join(f", {k}={params[k]}" for k in ("BLOCK_T",) if k in params)
        if variant.tag == "persistent":
            extra += f", NUM_PROGS={persistent_programs(params, task)}"
        return f"""{TRITON_PRELUDE}

@triton.jit
def silu_mul(g, u):
    g = g.to(tl.float32)
    return g * tl.sigmoid(g) * u.to(tl.float32)

{kernel}

def swiglu_fwd(x: torch.Tensor) -> torch.Tensor:
    T, I = x.shape[0], x.shape[1] // 2
    y = torch.empty((T, I), dtype=x.dtype, device=x.device)
    grid = {grid}
    swiglu_fwd_kernel[grid](x, y, T, I, BLOCK={params['BLOCK']}{extra}, num_warps={params['num_warps']})
    return y
"""

    def _flat_index(self, p, task, bug):
        n = "T * I - 1" if bug == "off_by_one" else "T * I"
        return f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    # one output per lane (BLOCK of 128 over 4 warps): 2-byte accesses, and an integer
    # division and modulo per element to find (row, col)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row, col = offs // I, offs % I
    g = tl.load(x_ptr + row * 2 * I + col, mask=mask)
    u = tl.load(x_ptr + row * 2 * I + I + col, mask=mask)
    tl.store(y_ptr + offs, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"(triton.cdiv(T * I, {p['BLOCK']}),)"

    def _row_program(self, p, task, bug):
        mask = "" if bug == "no_bounds_check" else ", mask=mask"
        return f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    # one program walks a whole token row: contiguous loads, but only T programs in flight
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * 2 * I, y_ptr + row * I
    for start in tl.range(0, I, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < I
        g = tl.load(x_row + cols{mask})
        u = tl.load(x_row + I + cols{mask})
        tl.store(y_row + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty){mask})
""", "(T,)"

    def _tile_2d(self, p, task, bug):
        mask = "" if bug == "no_bounds_check" else ", mask=mask"
        return f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr):
    # axis 0: block of columns, axis 1: token row -> T * I / BLOCK independent programs
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(x_ptr + row * 2 * I + cols{mask})
    u = tl.load(x_ptr + row * 2 * I + I + cols{mask})
    tl.store(y_ptr + row * I + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty){mask})
""", f"(triton.cdiv(I, {p['BLOCK']}), T)"

    def _multi_row_tile(self, p, task, bug):
        col_bound = "I - 1" if bug == "off_by_one" else "I"
        return f"""@triton.jit
def swiglu_fwd_kernel(x_ptr, y_ptr, T, I, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr):
    # a [BLOCK_T, BLOCK] tile: each lane holds BLOCK_T independent vectors in flight
    rows = (tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)[:, None]
    cols = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))[None, :]
    mask = (rows < T) & (cols < {col_bound})
    g = tl.load(x_ptr + rows * 2 * I + cols, mask=mask)
    u = tl.load(x_ptr + rows * 2 * I + I + cols, mask=mask)
    tl.store(y_ptr + rows * I + cols, silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)
""", f"(triton.cdiv(I, {p['BLOCK']}), triton.cdiv(T, {p['BLOCK_T']}))"

    def _persistent(self, p, task, bug):
        tiles = "num_tiles - 1" if bug == "off_by_one" else "num_tiles"
        return f"""@triton.jit
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
""", f"({persistent_programs(p, task)},)"
