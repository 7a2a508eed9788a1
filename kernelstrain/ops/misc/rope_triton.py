"""Rotary position embedding (GPT-NeoX style) in Triton, applied in place to q and k.

Ladder: flat blocks of rotation pairs with div/mod, q and k launched apart -> one program per
token looping over head blocks (cos/sin loaded once, broadcast over heads) -> 2-D grid
(token, head block) -> [BLOCK_T, BLOCK_H, D/2] tiles -> persistent programs over the tiles.
"""
from ..base import KernelSpec, Launch, Param, Task, TRITON_PRELUDE, Variant, DTYPE_BYTES, cdiv, triton_ptr
from .rope_spec import RopeSpec

BLOCK_H = Param("BLOCK_H", (4, 8, 16, 32), 8)
WARPS = Param("num_warps", (2, 4, 8), 4)


class RopeTriton(RopeSpec):
    impl = "triton"
    variants = (
        Variant("flat_pairs", "1-D blocks of rotation pairs, // and % per pair, q and k in two launches",
                (Param("BLOCK", (64, 128, 256), 128), Param("num_warps", (2, 4), 4)), memory_eff=0.75,
                bugs=("off_by_one",)),
        Variant("token_program", "one program per token: cos/sin loaded once, loop over head blocks of q and k",
                (BLOCK_H, WARPS), memory_eff=0.76, bugs=("off_by_one",)),
        Variant("token_head_grid", "2-D grid (token, head block): q and k tiles of one head block per program",
                (BLOCK_H, WARPS), memory_eff=0.75, bugs=("off_by_one",)),
        Variant("multi_token_tile", "[BLOCK_T, BLOCK_H, D/2] tiles: more independent loads per lane",
                (Param("BLOCK_T", (1, 2, 4), 2), BLOCK_H, WARPS), memory_eff=0.72, bugs=("off_by_one",)),
        Variant("persistent", "#SMs x k programs stride over the (token block, head block) tiles with tl.range",
                (Param("BLOCK_T", (1, 2, 4), 2), BLOCK_H, Param("programs_per_sm", (8, 16, 32), 16)), memory_eff=0.66,
                bugs=("off_by_one",)),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, h, d, elt = task["T"], task["H"], task["D"], DTYPE_BYTES[task.dtype]
        threads = params.get("num_warps", 4) * task.gpu.warp
        if variant.tag == "flat_pairs":
            return Launch(grid=cdiv(t * h * d // 2, params["BLOCK"]), threads=threads, regs=24,
                          bytes_per_access=elt, traffic=1.1, launches=2)
        bh, bt = params["BLOCK_H"], params.get("BLOCK_T", 1)
        tile = bt * bh * d // 2                          # pairs per tensor per program
        vec = min(16, max(1, tile // threads) * elt)     # Triton vectorizes along the contiguous D/2 axis
        util = h / (cdiv(h, bh) * bh) * min(1.0, tile / threads)
        regs = min(255, 24 + 4 * max(1, tile // threads))
        if variant.tag == "token_program":
            return Launch(grid=t, threads=threads, regs=regs, bytes_per_access=vec, lane_util=util)
        tiles = cdiv(t, bt) * cdiv(h, bh)
        util *= t / (cdiv(t, bt) * bt)
        if variant.tag == "persistent":
            return Launch(grid=self._programs(params, task), threads=threads, regs=regs + 8, bytes_per_access=vec,
                          lane_util=util)
        return Launch(grid=tiles, threads=threads, regs=regs, bytes_per_access=vec, lane_util=util)

    def _programs(self, params: dict, task: Task) -> int:
        tiles = cdiv(task["T"], params["BLOCK_T"]) * cdiv(task["H"], params["BLOCK_H"])
        return min(tiles, task.gpu.sms * params["programs_per_sm"])

    def signature(self, task: Task) -> str:
        return ("def rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor)"
                " -> tuple  # rotates q, k [T, H, D] in place and returns them")

    def triton_kernels(self, variant: Variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        if variant.tag == "flat_pairs":
            sig = {"pos_ptr": "*i64", "x_ptr": ptr, "cs_ptr": ptr, "T": "i32", "H": "i32",
                   "HALF": "constexpr", "BLOCK": "constexpr"}
            consts = {"HALF": task["D"] // 2, "BLOCK": params["BLOCK"]}
        else:
            sig = {"pos_ptr": "*i64", "q_ptr": ptr, "k_ptr": ptr, "cs_ptr": ptr, "T": "i32", "H": "i32",
                   "HALF": "constexpr", "BLOCK_H": "constexpr"}
            consts = {"HALF": task["D"] // 2, "BLOCK_H": params["BLOCK_H"]}
            for name, value in (("BLOCK_T", params.get("BLOCK_T")),
                                ("NUM_PROGS", self._programs(params, task) if variant.tag == "persistent" else None)):
                if value is not None:
                    sig[name], consts[name] = "constexpr", value
        return [KernelSpec("rope_kernel", sig, consts, num_warps=params.get("num_warps", 4), num_stages=1)]

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        kernel, grid = getattr(self, "_" + variant.tag)(params, task, bug)
        spec = self.triton_kernels(variant, params, task)[0]
        consts = ", ".join(f"{k}={v}" for k, v in spec.constexprs.items() if k != "HALF")
        if variant.tag == "flat_pairs":
            launch = "".join(f"    rope_kernel[grid](positions, {x}, cos_sin_cache, T, H, HALF=D // 2, {consts}, "
                             f"num_warps={spec.num_warps})\n" for x in ("q", "k"))
        else:
            launch = (f"    rope_kernel[grid](positions, q, k, cos_sin_cache, T, H, HALF=D // 2, {consts}, "
                      f"num_warps={spec.num_warps})\n")
        return f"""{TRITON_PRELUDE}

@triton.jit
def rotate(x_ptrs, mask, cos, sin, HALF: tl.constexpr):
    # x_ptrs point at x1 = x[..., :HALF]; x2 sits HALF elements further. fp32 math, in place.
    x1 = tl.load(x_ptrs, mask=mask).to(tl.float32)
    x2 = tl.load(x_ptrs + HALF, mask=mask).to(tl.float32)
    tl.store(x_ptrs, (x1 * cos - x2 * sin).to(x_ptrs.dtype.element_ty), mask=mask)
    tl.store(x_ptrs + HALF, (x2 * cos + x1 * sin).to(x_ptrs.dtype.element_ty), mask=mask)

{kernel}

def rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    T, H, D = q.shape
    grid = {grid}
{launch}    return q, k
"""

    def _flat_pairs(self, p, task, bug):
        n = "T * H * HALF - 1" if bug == "off_by_one" else "T * H * HALF"
        return f"""@triton.jit
def rope_kernel(pos_ptr, x_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK: tl.constexpr):
    # one rotation pair per lane of one tensor; (token, head, i) from // and %, and every
    # lane gathers its own position and cos/sin
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row, i = offs // HALF, offs % HALF                 # row = token * H + head
    pos = tl.load(pos_ptr + row // H, mask=mask, other=0)
    cos = tl.load(cs_ptr + pos * 2 * HALF + i, mask=mask).to(tl.float32)
    sin = tl.load(cs_ptr + pos * 2 * HALF + HALF + i, mask=mask).to(tl.float32)
    rotate(x_ptr + row.to(tl.int64) * 2 * HALF + i, mask, cos, sin, HALF)
""", f"(triton.cdiv(T * H * (D // 2), {p['BLOCK']}),)"

    _HEAD_TILE = """    heads = {h0} + tl.arange(0, BLOCK_H)
    offs = ({row} * H + heads[:, None]).to(tl.int64) * 2 * HALF + i[None, :]
    mask = (heads[:, None] < {bound}) & (i[None, :] < HALF)
    rotate(q_ptr + offs, mask, cos, sin, HALF)
    rotate(k_ptr + offs, mask, cos, sin, HALF)
"""

    _COS_SIN = """    pos = tl.load(pos_ptr + t)
    cos = tl.load(cs_ptr + pos * 2 * HALF + i).to(tl.float32)[None, :]
    sin = tl.load(cs_ptr + pos * 2 * HALF + HALF + i).to(tl.float32)[None, :]
"""

    def _token_program(self, p, task, bug):
        bound = "H - 1" if bug == "off_by_one" else "H"
        tile = self._HEAD_TILE.format(h0="h0", row="t", bound=bound).replace("\n    ", "\n        ")
        return f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # one program per token: its cos/sin row is loaded once and broadcast over [BLOCK_H, HALF]
    # head tiles of q and k; only T programs, so decode batches leave most SMs idle
    t = tl.program_id(0)
    i = tl.arange(0, HALF)
{self._COS_SIN}    for h0 in tl.range(0, H, BLOCK_H):
    {tile}""", "(T,)"

    def _token_head_grid(self, p, task, bug):
        bound = "H - 1" if bug == "off_by_one" else "H"
        return f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # axis 0: token, axis 1: block of BLOCK_H heads; q and k of those heads share cos/sin
    t = tl.program_id(0)
    i = tl.arange(0, HALF)
{self._COS_SIN}{self._HEAD_TILE.format(h0="tl.program_id(1) * BLOCK_H", row="t", bound=bound)}""", \
            f"(T, triton.cdiv(H, {p['BLOCK_H']}))"

    def _tile3d(self, bound: str, indent: str) -> str:
        lines = ["tok = t0 + tl.arange(0, BLOCK_T)",
                 "heads = h0 + tl.arange(0, BLOCK_H)",
                 "pos = tl.load(pos_ptr + tok, mask=tok < T, other=0)[:, None, None]",
                 "cs = cs_ptr + pos * 2 * HALF",
                 "cos = tl.load(cs + i[None, None, :]).to(tl.float32)",
                 "sin = tl.load(cs + HALF + i[None, None, :]).to(tl.float32)",
                 "offs = (tok[:, None, None] * H + heads[None, :, None]).to(tl.int64) * 2 * HALF + i[None, None, :]",
                 f"mask = (tok[:, None, None] < T) & (heads[None, :, None] < {bound}) & (i[None, None, :] < HALF)",
                 "rotate(q_ptr + offs, mask, cos, sin, HALF)",
                 "rotate(k_ptr + offs, mask, cos, sin, HALF)"]
        return "".join(f"{indent}{ln}\n" for ln in lines)

    def _multi_token_tile(self, p, task, bug):
        bound = "H - 1" if bug == "off_by_one" else "H"
        return f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                BLOCK_T: tl.constexpr):
    # a [BLOCK_T, BLOCK_H, HALF] tile of q and of k per program; cos/sin [BLOCK_T, 1, HALF]
    t0, h0 = tl.program_id(0) * BLOCK_T, tl.program_id(1) * BLOCK_H
    i = tl.arange(0, HALF)
{self._tile3d(bound, "    ")}""", f"(triton.cdiv(T, {p['BLOCK_T']}), triton.cdiv(H, {p['BLOCK_H']}))"

    def _persistent(self, p, task, bug):
        bound = "H - 1" if bug == "off_by_one" else "H"
        return f"""@triton.jit
def rope_kernel(pos_ptr, q_ptr, k_ptr, cs_ptr, T, H, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
                BLOCK_T: tl.constexpr, NUM_PROGS: tl.constexpr):
    # NUM_PROGS resident programs (#SMs x k, capped by the tile count) stride over the
    # (token block, head block) tiles: no tail of short-lived programs
    i = tl.arange(0, HALF)
    head_blocks = tl.cdiv(H, BLOCK_H)
    for tile in tl.range(tl.program_id(0), tl.cdiv(T, BLOCK_T) * head_blocks, NUM_PROGS):
        t0, h0 = (tile // head_blocks) * BLOCK_T, (tile % head_blocks) * BLOCK_H
{self._tile3d(bound, "        ")}""", f"({self._programs(p, task)},)"
