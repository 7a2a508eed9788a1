"""SwiGLU backward in Triton: from dy [T, I] and the saved gate|up input x [T, 2*I], write
dx [T, 2*I] = [dy * up * s * (1 + g * (1 - s)) | dy * g * s], s = sigmoid(g).

Ladder: two flat kernels (d_gate, d_up) that each re-read dy and the gate -> one fused flat
kernel -> 2-D grid (column block x row) -> [BLOCK_T, BLOCK_I] tiles -> persistent programs.
"""
from ..base import (Cost, KernelSpec, Launch, OpModule, Param, Task, TRITON_PRELUDE, Variant, DTYPE_BYTES,
                    cdiv, kernelbench_program, triton_ptr)
from ._swiglu_triton import BLOCK, WARPS, persistent_programs

FLAT = (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4))


class SwigluBwdTriton(OpModule):
    op, impl, family = "swiglu_bwd", "triton", "activations"
    title = "SwiGLU backward"
    desc = ("Given dy [T, I] and the saved fused input x = [gate | up] [T, 2*I], writes "
            "dx = [dy * up * s * (1 + g * (1 - s)) | dy * g * s] with s = sigmoid(gate), in fp32.")
    dims = {"T": "tokens (rows)", "I": "intermediate size (width of dy; x and dx are 2*I wide)"}
    shapes = ({"T": 1, "I": 14336}, {"T": 64, "I": 11008}, {"T": 1024, "I": 13824},
              {"T": 4096, "I": 11008}, {"T": 8192, "I": 14336}, {"T": 16384, "I": 13824})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("two_kernels_flat", "separate d_gate and d_up kernels, flat // and % indexing, dy and gate read twice",
                FLAT, compute_eff=0.2, memory_eff=0.63, bugs=("missing_scale",)),
        Variant("fused_flat", "one kernel writes both halves of dx from a single read of dy, gate, up",
                FLAT, compute_eff=0.2, memory_eff=0.86, bugs=("off_by_one", "missing_scale")),
        Variant("tile_2d", "2-D grid (column block, row): contiguous vectorizable loads and stores",
                (BLOCK, WARPS), compute_eff=0.4, memory_eff=0.84, bugs=("no_bounds_check",)),
        Variant("multi_row_tile", "[BLOCK_T, BLOCK_I] tile per program: more independent loads per lane",
                (Param("BLOCK_T", (1, 2, 4), 2), BLOCK, WARPS), compute_eff=0.4, memory_eff=0.79,
                bugs=("off_by_one",)),
        Variant("persistent", "#SMs x k programs loop over the row-tiles with tl.range",
                (BLOCK, WARPS, Param("programs_per_sm", (8, 16, 32), 16)), compute_eff=0.4, memory_eff=0.73,
                bugs=("off_by_one", "missing_scale")),
    )

    def cost(self, task: Task) -> Cost:
        t, i, e = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        return Cost(flops=12 * t * i, bytes=5 * t * i * e)     # read dy, gate, up; write d_gate, d_up

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, i, elt = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        block, threads = params["BLOCK"], params["num_warps"] * task.gpu.warp
        per_thread = max(1, block // threads)
        vec = min(16, per_thread * elt)
        util = min(1.0, block / threads)
        if variant.tag == "two_kernels_flat":
            # kernel 1 reads dy, gate, up and writes d_gate; kernel 2 reads dy, gate again
            return Launch(grid=cdiv(t * i, block), threads=threads, regs=24, bytes_per_access=elt,
                          traffic=7 / 5, lane_util=util, launches=2)
        if variant.tag == "fused_flat":
            return Launch(grid=cdiv(t * i, block), threads=threads, regs=28, bytes_per_access=elt, lane_util=util)
        col_blocks = cdiv(i, block)
        util *= i / (col_blocks * block)
        if variant.tag == "tile_2d":
            return Launch(grid=col_blocks * t, threads=threads, regs=20 + 3 * per_thread, bytes_per_access=vec,
                          lane_util=util)
        if variant.tag == "multi_row_tile":
            rows = params["BLOCK_T"]
            return Launch(grid=col_blocks * cdiv(t, rows), threads=threads, regs=20 + 3 * per_thread * rows,
                          bytes_per_access=vec * rows, lane_util=util * t / (cdiv(t, rows) * rows))
        return Launch(grid=persistent_programs(params, task), threads=threads, regs=28 + 3 * per_thread,
                      bytes_per_access=vec, lane_util=util)

    def signature(self, task: Task) -> str:
        return "def swiglu_bwd(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor  # dy [T, I], x [T, 2*I] -> dx [T, 2*I]"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="dy, x",
            body="g, u = x.float().chunk(2, dim=-1)\n        s = torch.sigmoid(g)\n        dy32 = dy.float()\n"
                 "        d_gate = dy32 * u * s * (1 + g * (1 - s))\n"
                 "        return torch.cat([d_gate, dy32 * g * s], dim=-1).to(x.dtype)",
            inputs="[torch.randn(T, I, dtype=DTYPE, device='cuda'), torch.randn(T, 2 * I, dtype=DTYPE, device='cuda')]")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        sig = {"dy_ptr": ptr, "x_ptr": ptr, "dx_ptr": ptr, "T": "i32", "I": "i32", "BLOCK": "constexpr"}
        consts = {"BLOCK": params["BLOCK"]}
        if variant.tag == "multi_row_tile":
            sig["BLOCK_T"], consts["BLOCK_T"] = "constexpr", params["BLOCK_T"]
        if variant.tag == "persistent":
            sig["NUM_PROGS"], consts["NUM_PROGS"] = "constexpr", persistent_programs(params, task)
        names = ("swiglu_bwd_gate_kernel", "swiglu_bwd_up_kernel") if variant.tag == "two_kernels_flat" \
            else ("swiglu_bwd_kernel",)
        return [KernelSpec(n, sig, consts, num_warps=params["num_warps"], num_stages=1) for n in names]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        kernels, grid = getattr(self, "_" + variant.tag)(params, task, bug)
        args = f"BLOCK={params['BLOCK']}" + (f", BLOCK_T={params['BLOCK_T']}" if "BLOCK_T" in params else "")
        if variant.tag == "persistent":
            args += f", NUM_PROGS={persistent_programs(params, task)}"
        names = ("swiglu_bwd_gate_kernel", "swiglu_bwd_up_kernel") if variant.tag == "two_kernels_flat" \
            else ("swiglu_bwd_kernel",)
        launches = "".join(f"    {n}[grid](dy, x, dx, T, I, {args}, num_warps={params['num_warps']})\n" for n in names)
        d_up = "g * tl.sigmoid(g)" if bug == "missing_scale" else "dy.to(tl.float32) * g * tl.sigmoid(g)"
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

def swiglu_bwd(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    T, I = dy.shape
    dx = torch.empty_like(x)
    grid = {grid}
{launches}    return dx
"""

    def _flat(self, name: str, loads: tuple, outputs: str, stores: str, n: str = "T * I") -> str:
        body = "".join(f"    {v} = tl.load({src}, mask=mask)\n" for v, src in loads)
        return f"""@triton.jit
def {name}(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr):
    # flat index over T*I, one element per lane: 2-byte accesses and a // and % per element
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row, col = offs // I, offs % I
{body}    {outputs}
{stores}"""

    _LOADS = (("dy", "dy_ptr + offs"), ("g", "x_ptr + row * 2 * I + col"), ("u", "x_ptr + row * 2 * I + I + col"))
    _STORE_GATE = "    tl.store(dx_ptr + row * 2 * I + col, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)\n"
    _STORE_UP = "    tl.store(dx_ptr + row * 2 * I + I + col, d_up.to(dx_ptr.dtype.element_ty), mask=mask)\n"

    def _two_kernels_flat(self, p, task, bug):
        # each kernel recomputes the sigmoid and re-reads dy and the gate from DRAM
        gate = self._flat("swiglu_bwd_gate_kernel", self._LOADS, "d_gate, _ = swiglu_grads(dy, g, u)",
                          self._STORE_GATE)
        up = self._flat("swiglu_bwd_up_kernel", self._LOADS[:2], "d_up = swiglu_d_up(dy, g)",
                        self._STORE_UP)
        return f"{gate}\n\n{up}", f"(triton.cdiv(T * I, {p['BLOCK']}),)"

    def _fused_flat(self, p, task, bug):
        n = "T * I - 1" if bug == "off_by_one" else "T * I"
        return self._flat("swiglu_bwd_kernel", self._LOADS, "d_gate, d_up = swiglu_grads(dy, g, u)",
                          self._STORE_GATE + self._STORE_UP, n), \
            f"(triton.cdiv(T * I, {p['BLOCK']}),)"

    def _tile_body(self, mask: str, indent: str = "    ") -> str:
        lines = ["dy = tl.load(dy_ptr + rows * I + cols, mask=mask)",
                 "g = tl.load(x_ptr + rows * 2 * I + cols, mask=mask)",
                 "u = tl.load(x_ptr + rows * 2 * I + I + cols, mask=mask)",
                 "d_gate, d_up = swiglu_grads(dy, g, u)",
                 "tl.store(dx_ptr + rows * 2 * I + cols, d_gate.to(dx_ptr.dtype.element_ty), mask=mask)",
                 "tl.store(dx_ptr + rows * 2 * I + I + cols, d_up.to(dx_ptr.dtype.element_ty), mask=mask)"]
        return "".join(indent + ln.replace(", mask=mask", mask) + "\n" for ln in lines)

    def _tile_2d(self, p, task, bug):
        mask = "" if bug == "no_bounds_check" else ", mask=mask"
        return f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr):
    # axis 0: block of columns, axis 1: token row; one read of dy, gate, up feeds both halves of dx
    rows = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
{self._tile_body(mask)}""", f"(triton.cdiv(I, {p['BLOCK']}), T)"

    def _multi_row_tile(self, p, task, bug):
        col_bound = "I - 1" if bug == "off_by_one" else "I"
        return f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr, BLOCK_T: tl.constexpr):
    # [BLOCK_T, BLOCK] tile: each lane keeps 3 * BLOCK_T vectors of loads in flight
    rows = (tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)[:, None]
    cols = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))[None, :]
    mask = (rows < T) & (cols < {col_bound})
{self._tile_body(", mask=mask")}""", f"(triton.cdiv(I, {p['BLOCK']}), triton.cdiv(T, {p['BLOCK_T']}))"

    def _persistent(self, p, task, bug):
        tiles = "num_tiles - 1" if bug == "off_by_one" else "num_tiles"
        return f"""@triton.jit
def swiglu_bwd_kernel(dy_ptr, x_ptr, dx_ptr, T, I, BLOCK: tl.constexpr, NUM_PROGS: tl.constexpr):
    # NUM_PROGS resident programs (#SMs x k) stride over the (row, column-block) tiles
    col_blocks = tl.cdiv(I, BLOCK)
    num_tiles = T * col_blocks
    for tile in tl.range(tl.program_id(0), {tiles}, NUM_PROGS):
        rows = (tile // col_blocks).to(tl.int64)
        cols = (tile % col_blocks) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < I
{self._tile_body(", mask=mask", "        ")}""", f"({persistent_programs(p, task)},)"
