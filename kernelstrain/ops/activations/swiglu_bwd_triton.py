"""SwiGLU backward in Triton: from dy [T, I] and the saved gate|up input x [T, 2*I], write
dx [T, 2*I] = [dy * up * s * (1 + g * (1 - s)) | dy * g * s], s = sigmoid(g).

Ladder: two flat kernels (d_gate, d_up) that each re-read dy and the gate -> one fused flat
kernel -> 2-D grid (column block x row) -> [BLOCK_T, BLOCK_I] tiles -> persistent programs.
"""
from ..base import KernelSpec, Launch, Param, Rung, TRITON_PRELUDE, DTYPE_BYTES, cdiv, triton_ptr
from ._swiglu_triton import BLOCK, WARPS, flat_lanes, persistent_programs
from .swiglu_bwd_spec import ENTRY, SwigluBwdSpec

FLAT = (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4))
D_UP = "dy.to(tl.float32) * g * tl.sigmoid(g)"      # missing_scale drops dy
NO_SCALE = {"d_up": "g * tl.sigmoid(g)"}
ONE_KERNEL, TWO_KERNELS = ("swiglu_bwd_kernel",), ("swiglu_bwd_gate_kernel", "swiglu_bwd_up_kernel")


def program(p, task, kernels: str, grid: str, names=ONE_KERNEL, d_up: str = D_UP) -> str:
    """The candidate: the gradient helpers, the rung's kernels and the wrapper launching them."""
    args = f"BLOCK={p['BLOCK']}" + (f", BLOCK_T={p['BLOCK_T']}" if "BLOCK_T" in p else "")
    if "programs_per_sm" in p:
        args += f", NUM_PROGS={persistent_programs(p, task)}"
    launches = "".join(f"    {n}[grid](dy, x, dx, T, I, {args}, num_warps={p['num_warps']})\n" for n in names)
    return f"""{TRITON_PRELUDE}

@triton.jit
def swiglu_d_up(dy, g):
    g = g.to(tl.float32)
    return {d_up}


@triton.jit
def swiglu_grads(dy, g, u):
    # returns (d_gate, d_up) in fp32; silu'(g) = s * (1 + g * (1 - s))
    dy, g, u = dy.to(tl.float32), g.to(tl.float32), u.to(tl.float32)
    s = tl.sigmoid(g)
    return dy * u * s * (1.0 + g * (1.0 - s)), swiglu_d_up(dy, g)

{kernels}

{ENTRY.py_def(task)}:
    T, I = dy.shape
    dx = torch.empty_like(x)
    grid = {grid}
{launches}    return dx
"""


def geometry(p, task):
    """(threads, contiguous elements per thread, bytes per access, lane use)."""
    block, threads = p["BLOCK"], p["num_warps"] * task.gpu.warp
    per_thread = max(1, block // threads)
    return threads, per_thread, min(16, per_thread * DTYPE_BYTES[task.dtype]), min(1.0, block / threads)


# -- two_kernels_flat, fused_flat: flat indexing -------------------------------------------
def flat_launch(two: bool):
    def launch(p, task):
        threads, _, _, util = geometry(p, task)
        # two kernels: kernel 1 reads dy, gate, up and writes d_gate; kernel 2 reads dy, gate again
        return Launch(grid=cdiv(task["T"] * task["I"], p["BLOCK"]), threads=threads, regs=24 if two else 28,
                      bytes_per_access=DTYPE_BYTES[task.dtype], traffic=7 / 5 if two else 1.0, lane_util=util,
                      launches=2 if two else 1)
    return launch


def flat(name: str, loads: tuple, outputs: str, stores: str, lanes: str, n: str = "T * I") -> str:
    body = "".join(f"    {v} = tl.load({src}, mask=mask)\n" for v, src in loads)
    return f"""@triton.jit
def {name}(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr):
    # flat index over T*I.
    {lanes}
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row, col = offs // I, offs % I
{body}    {outputs}
{stores}"""


LOADS = (("dy", "dy_ptr + offs"), ("g", "x_ptr + row * 2 * I + col"), ("u", "x_ptr + row * 2 * I + I + col"))
STORE_GATE = "    tl.store(dx_ptr + row * 2 * I + col, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)\n"
STORE_UP = "    tl.store(dx_ptr + row * 2 * I + I + col, d_up.to(dx_ptr.dtype.element_ty), mask=mask)\n"


def two_kernels_flat_src(p, task, d_up=D_UP):
    # each kernel recomputes the sigmoid and re-reads dy and the gate from DRAM
    gate = flat("swiglu_bwd_gate_kernel", LOADS, "d_gate, _ = swiglu_grads(dy, g, u)", STORE_GATE, flat_lanes(p, task))
    up = flat("swiglu_bwd_up_kernel", LOADS[:2], "d_up = swiglu_d_up(dy, g)", STORE_UP, flat_lanes(p, task))
    return program(p, task, f"{gate}\n\n{up}", f"(triton.cdiv(T * I, {p['BLOCK']}),)", TWO_KERNELS, d_up)


def fused_flat_src(p, task, n="T * I", d_up=D_UP):
    kernel = flat("swiglu_bwd_kernel", LOADS, "d_gate, d_up = swiglu_grads(dy, g, u)", STORE_GATE + STORE_UP,
                  flat_lanes(p, task), n)
    return program(p, task, kernel, f"(triton.cdiv(T * I, {p['BLOCK']}),)", d_up=d_up)


# -- tile_2d, multi_row_tile, persistent: column blocks of rows ----------------------------
def tile_launch(p, task):
    threads, per_thread, vec, util = geometry(p, task)
    t, col_blocks, rows = task["T"], cdiv(task["I"], p["BLOCK"]), p.get("BLOCK_T", 1)
    util *= task["I"] / (col_blocks * p["BLOCK"])
    if "programs_per_sm" in p:
        return Launch(grid=persistent_programs(p, task), threads=threads, regs=28 + 3 * per_thread,
                      bytes_per_access=vec, lane_util=util)
    return Launch(grid=col_blocks * cdiv(t, rows), threads=threads, regs=20 + 3 * per_thread * rows,
                  bytes_per_access=vec * rows, lane_util=util * t / (cdiv(t, rows) * rows))


def tile_body(mask: str, indent: str = "    ") -> str:
    lines = ["dy = tl.load(dy_ptr + rows * I + cols, mask=mask)",
             "g = tl.load(x_ptr + rows * 2 * I + cols, mask=mask)",
             "u = tl.load(x_ptr + rows * 2 * I + I + cols, mask=mask)",
             "d_gate, d_up = swiglu_grads(dy, g, u)",
             "tl.store(dx_ptr + rows * 2 * I + cols, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)",
             "tl.store(dx_ptr + rows * 2 * I + I + cols, d_up.to(dx_ptr.dtype.element_ty), mask=mask)"]
    return "".join(indent + ln.replace(", mask=mask", mask) + "\n" for ln in lines)


def tile_2d_src(p, task, bound="I"):
    return program(p, task, f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr):
    # axis 0: block of columns, axis 1: token row; one read of dy, gate, up feeds both halves of dx
    rows = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < {bound}
{tile_body(", mask=mask")}""", f"(triton.cdiv(I, {p['BLOCK']}), T)")


def multi_row_tile_src(p, task, col_bound="I"):
    return program(p, task, f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr):
    # [BLOCK_T, BLOCK] tile: each lane keeps 3 * BLOCK_T vectors of loads in flight
    rows = (tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)[:, None]
    cols = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))[None, :]
    mask = (rows < T) & (cols < {col_bound})
{tile_body(", mask=mask")}""", f"(triton.cdiv(I, {p['BLOCK']}), triton.cdiv(T, {p['BLOCK_T']}))")


def persistent_src(p, task, tiles="num_tiles", d_up=D_UP):
    return program(p, task, f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr, NUM_PROGS: tl.constexpr):
    # NUM_PROGS resident programs (#SMs x k) stride over the (row, column-block) tiles
    col_blocks = tl.cdiv(I, BLOCK)
    num_tiles = T * col_blocks
    for tile in tl.range(tl.program_id(0), {tiles}, NUM_PROGS):
        rows = (tile // col_blocks).to(tl.int64)
        cols = (tile % col_blocks) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < I
{tile_body(", mask=mask", "        ")}""", f"({persistent_programs(p, task)},)", d_up=d_up)


class SwigluBwdTriton(SwigluBwdSpec):
    impl = "triton"
    variants = (
        Rung("two_kernels_flat", "separate d_gate and d_up kernels, flat // and % indexing, dy and gate read twice",
             FLAT, compute_eff=0.2, memory_eff=0.63, launch=flat_launch(two=True), render=two_kernels_flat_src,
             bugs={"missing_scale": NO_SCALE}),
        Rung("fused_flat", "one kernel writes both halves of dx from a single read of dy, gate, up",
             FLAT, compute_eff=0.2, memory_eff=0.86, launch=flat_launch(two=False), render=fused_flat_src,
             bugs={"off_by_one": {"n": "T * I - 1"}, "missing_scale": NO_SCALE}),
        Rung("tile_2d", "2-D grid (column block, row): contiguous vectorizable loads and stores",
             (BLOCK, WARPS), compute_eff=0.4, memory_eff=0.84, launch=tile_launch, render=tile_2d_src,
             # off_by_one: the last column of both halves is never written (no_bounds_check was
             # invisible wherever BLOCK divides I: an H200 matched it at I = 13824, BLOCK 512)
             bugs={"off_by_one": {"bound": "I - 1"}}),
        Rung("multi_row_tile", "[BLOCK_T, BLOCK_I] tile per program: more independent loads per lane",
             (Param("BLOCK_T", (1, 2, 4), 2), BLOCK, WARPS), compute_eff=0.4, memory_eff=0.79,
             launch=tile_launch, render=multi_row_tile_src, bugs={"off_by_one": {"col_bound": "I - 1"}}),
        Rung("persistent", "#SMs x k programs loop over the row-tiles with tl.range",
             (BLOCK, WARPS, Param("programs_per_sm", (8, 16, 32), 16)), compute_eff=0.4, memory_eff=0.73,
             launch=tile_launch, render=persistent_src,
             bugs={"off_by_one": {"tiles": "num_tiles - 1"}, "missing_scale": NO_SCALE}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"dy_ptr": ptr, "x_ptr": ptr, "dx_ptr": ptr, "T": "i32", "I": "i32", "BLOCK": "constexpr"}
        consts = {"BLOCK": params["BLOCK"]}
        if "BLOCK_T" in params:
            sig["BLOCK_T"], consts["BLOCK_T"] = "constexpr", params["BLOCK_T"]
        if "programs_per_sm" in params:
            sig["NUM_PROGS"], consts["NUM_PROGS"] = "constexpr", persistent_programs(params, task)
        names = TWO_KERNELS if variant.tag == "two_kernels_flat" else ONE_KERNEL
        return [KernelSpec(n, sig, consts, num_warps=params["num_warps"], num_stages=1) for n in names]
