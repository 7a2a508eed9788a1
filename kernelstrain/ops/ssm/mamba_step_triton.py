"""Mamba single decode step in Triton: update the fp32 state h[b, d, :] in place and emit the
gated y[b, d] (see mamba_step_spec for the math).

Ladder: program per channel (b, d) over its N-vector, ungated y into an fp32 buffer and a
gating kernel -> [BLOCK_D, N] tiles of one batch row, still two kernels -> gating fused into
the tile kernel (one launch, y written once) -> persistent programs (#SMs x k) looping over the
tiles with contiguity hints, so the state streams as 16-byte vectors.
"""
from ..base import KernelSpec, Launch, Param, Rung, TRITON_PRELUDE, cdiv, triton_ptr
from .mamba_step_spec import ENTRY, MambaStepSpec

WARPS = Param("num_warps", (1, 2, 4, 8), 4)
BD = Param("BLOCK_D", (4, 8, 16, 32, 64), 16)
BTERM = "(dtv * xv)[:, None] * bv[None, :]"
NO_DT = {"bterm": "xv[:, None] * bv[None, :]"}          # missing_scale: the input term loses dt
SOFTPLUS = """
@triton.jit
def softplus(v):
    return tl.where(v <= 20.0, tl.log(1.0 + tl.exp(v)), v)
"""


def tile_launch(launches: int, persistent: bool = False, hinted: bool = False):
    """[BLOCK_D, N] state tiles (BLOCK_D = 1: a program per channel)."""
    def launch(p, task):
        b, d, n, threads = task["B"], task["D"], task["N"], p["num_warps"] * task.gpu.warp
        bd = p.get("BLOCK_D", 1)
        tiles = b * cdiv(d, bd)
        per = max(1, bd * n // threads)
        grid = min(tiles, task.gpu.sms * p["programs_per_sm"]) if persistent else tiles
        return Launch(grid=grid, threads=threads, regs=min(255, 32 + 3 * per),
                      bytes_per_access=16 if hinted else min(16, 4 * per), lane_util=min(1.0, bd * n / threads),
                      launches=launches, traffic=1.0 + 0.12 * (launches - 1))
    return launch


def tile_body(bterm: str, dmask: str = "d < D", nmask: str = "n < N") -> str:
    """Statements of one [BLOCK_D, N] tile of batch row b, channels d (indented 4)."""
    return f"""    dm = {dmask}
    m2 = dm[:, None] & ({nmask})[None, :]
    bd = b * D + d
    xv = tl.load(x_ptr + bd, mask=dm, other=0.0).to(tl.float32)
    dtv = softplus(tl.load(dt_ptr + bd, mask=dm, other=0.0).to(tl.float32) + tl.load(db_ptr + d, mask=dm, other=0.0))
    a = tl.load(A_ptr + d[:, None] * N + n[None, :], mask=m2, other=0.0)
    bv = tl.load(B_ptr + b * N + n).to(tl.float32)
    cv = tl.load(C_ptr + b * N + n).to(tl.float32)
    sp = st_ptr + bd.to(tl.int64)[:, None] * N + n[None, :]
    h = tl.exp(dtv[:, None] * a) * tl.load(sp, mask=m2, other=0.0) + {bterm}
    tl.store(sp, h, mask=m2)
    acc = tl.sum(h * cv[None, :], axis=1) + tl.load(Ds_ptr + d, mask=dm, other=0.0) * xv"""


ARGS = "st_ptr, x_ptr, dt_ptr, db_ptr, A_ptr, B_ptr, C_ptr, Ds_ptr"
UNFUSED_TAIL = "    tl.store(acc_ptr + bd, acc, mask=dm)   # ungated; the gating kernel finishes y\n"
FUSED_TAIL = ("    zv = tl.load(z_ptr + bd, mask=dm, other=0.0).to(tl.float32)\n"
              "    tl.store(y_ptr + bd, (acc * zv / (1.0 + tl.exp(-zv))).to(y_ptr.dtype.element_ty), mask=dm)\n")
GATE_KERNEL = """

@triton.jit
def mamba_gate_kernel(acc_ptr, z_ptr, y_ptr, total, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = i < total
    zv = tl.load(z_ptr + i, mask=live, other=0.0).to(tl.float32)
    acc = tl.load(acc_ptr + i, mask=live, other=0.0)
    tl.store(y_ptr + i, (acc * zv / (1.0 + tl.exp(-zv))).to(y_ptr.dtype.element_ty), mask=live)
"""


# -- channel_program -------------------------------------------------------------------------
def channel_program_src(p, task, nmask="n < N", bterm=BTERM):
    return f"""
@triton.jit
def mamba_step_kernel({ARGS}, acc_ptr, D, N: tl.constexpr):
    # one program per channel (b, d): an N-vector of state; y goes through an fp32 buffer
    b = tl.program_id(0) // D
    d = tl.program_id(0) % D + tl.arange(0, 1)
    n = tl.arange(0, N)
{tile_body(bterm, nmask=nmask)}
{UNFUSED_TAIL}{GATE_KERNEL}"""


# -- channel_block_tile -----------------------------------------------------------------------
def channel_block_tile_src(p, task, dmask="d < D", bterm=BTERM):
    return f"""
@triton.jit
def mamba_step_kernel({ARGS}, acc_ptr, D, N: tl.constexpr, BLOCK_D: tl.constexpr):
    # program (b, block of BLOCK_D channels): a [BLOCK_D, N] tile, B_t / C_t loaded once per tile
    b = tl.program_id(0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.arange(0, N)
{tile_body(bterm, dmask=dmask)}
{UNFUSED_TAIL}{GATE_KERNEL}"""


# -- fused_gating ----------------------------------------------------------------------------
def fused_gating_src(p, task, dmask="d < D", bterm=BTERM):
    return f"""
@triton.jit
def mamba_step_kernel({ARGS}, z_ptr, y_ptr, D, N: tl.constexpr, BLOCK_D: tl.constexpr):
    # the silu(z) gate is applied in the tile kernel: one launch, no fp32 round trip of y
    b = tl.program_id(0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    n = tl.arange(0, N)
{tile_body(bterm, dmask=dmask)}
{FUSED_TAIL}"""


# -- persistent_vectorized ---------------------------------------------------------------------
def persistent_vectorized_src(p, task, stop="n_tiles", bterm=BTERM):
    body = tile_body(bterm).replace("\n    ", "\n        ").replace("    dm", "        dm", 1)
    tail = FUSED_TAIL.replace("    ", "        ")
    return f"""
@triton.jit
def mamba_step_kernel({ARGS}, z_ptr, y_ptr, B, D, N: tl.constexpr, BLOCK_D: tl.constexpr):
    # persistent: #SMs x PROGRAMS_PER_SM programs loop over the (b, channel block) tiles; each
    # tile is BLOCK_D * N contiguous floats of state, hinted so loads and stores are 16 bytes
    per = tl.cdiv(D, BLOCK_D)
    n_tiles = B * per
    n = tl.max_contiguous(tl.arange(0, N), N)
    for t in range(tl.program_id(0), {stop}, tl.num_programs(0)):
        b = t // per
        d = (t % per) * BLOCK_D + tl.arange(0, BLOCK_D)
{body}
{tail}"""


UNFUSED_LAUNCH = """acc = torch.empty((B, D), dtype=torch.float32, device=x.device)
    mamba_step_kernel[{grid}](state, x, dt, dt_bias, A, Bs, Cs, Dskip, acc, D, N=N{kw}, num_warps={nw})
    mamba_gate_kernel[(triton.cdiv(B * D, 1024),)](acc, z, y, B * D, BLOCK=1024, num_warps=4)"""
LAUNCH = {
    "channel_program": ("(B * D,)", UNFUSED_LAUNCH),
    "channel_block_tile": ("(B, triton.cdiv(D, {BLOCK_D}))", UNFUSED_LAUNCH),
    "fused_gating": ("(B, triton.cdiv(D, {BLOCK_D}))",
                     "mamba_step_kernel[{grid}](state, x, dt, dt_bias, A, Bs, Cs, Dskip, z, y, D, N=N{kw}, num_warps={nw})"),
    "persistent_vectorized": (
        "(min(B * triton.cdiv(D, {BLOCK_D}), torch.cuda.get_device_properties(x.device).multi_processor_count * {programs_per_sm}),)",
        "mamba_step_kernel[{grid}](state, x, dt, dt_bias, A, Bs, Cs, Dskip, z, y, B, D, N=N{kw}, num_warps={nw})"),
}


class MambaStepTriton(MambaStepSpec):
    impl = "triton"
    variants = (
        Rung("channel_program", "program per channel (b, d) over its N-vector; fp32 y buffer and a gating kernel",
             (Param("num_warps", (1, 2, 4), 1),), memory_eff=0.5,
             launch=tile_launch(2), render=channel_program_src,
             bugs={"off_by_one": {"nmask": "n < N - 1"}, "missing_scale": NO_DT}),
        Rung("channel_block_tile", "[BLOCK_D, N] tiles of one batch row, still an fp32 y buffer and a gating kernel",
             (BD, WARPS), memory_eff=0.8, launch=tile_launch(2), render=channel_block_tile_src,
             bugs={"off_by_one": {"dmask": "d < D - 1"}, "missing_scale": NO_DT}),
        Rung("fused_gating", "[BLOCK_D, N] tiles with the silu(z) gate fused: one launch",
             (BD, WARPS), memory_eff=0.86, launch=tile_launch(1), render=fused_gating_src,
             bugs={"off_by_one": {"dmask": "d < D - 1"}, "missing_scale": NO_DT}),
        Rung("persistent_vectorized", "#SMs x k persistent programs over the tiles, 16-byte hinted state streams",
             (BD, WARPS, Param("programs_per_sm", (2, 4, 8, 16, 32), 8)), memory_eff=0.91,
             launch=tile_launch(1, persistent=True, hinted=True), render=persistent_vectorized_src,
             bugs={"off_by_one": {"stop": "n_tiles - 1"}, "missing_scale": NO_DT}),
    )

    def triton_kernels(self, variant, params, task) -> list:
        elt = triton_ptr(task.dtype, task)
        sig = {"st_ptr": "*fp32", "x_ptr": elt, "dt_ptr": elt, "db_ptr": "*fp32", "A_ptr": "*fp32", "B_ptr": elt,
               "C_ptr": elt, "Ds_ptr": "*fp32"}
        consts = {"N": task["N"], **({"BLOCK_D": params["BLOCK_D"]} if "BLOCK_D" in params else {})}
        unfused = LAUNCH[variant.tag][1] is UNFUSED_LAUNCH
        tail = {"acc_ptr": "*fp32"} if unfused else {"z_ptr": elt, "y_ptr": elt}
        if variant.tag == "persistent_vectorized":
            tail["B"] = "i32"
        main = KernelSpec("mamba_step_kernel", {**sig, **tail, "D": "i32", **{k: "constexpr" for k in consts}}, consts,
                          num_warps=params["num_warps"], num_stages=1)
        if not unfused:
            return [main]
        gate = KernelSpec("mamba_gate_kernel", {"acc_ptr": "*fp32", "z_ptr": elt, "y_ptr": elt, "total": "i32",
                                                "BLOCK": "constexpr"}, {"BLOCK": 1024}, num_warps=4, num_stages=1,
                          ints={"total": task["B"] * task["D"]})
        return [main, gate]

    def assemble(self, kernel, variant, params, task) -> str:
        grid, launch = LAUNCH[variant.tag]
        kw = f", BLOCK_D={params['BLOCK_D']}" if "BLOCK_D" in params else ""
        launch = launch.format(grid=grid.format(**params), kw=kw, nw=params["num_warps"])
        return f"""{TRITON_PRELUDE}{SOFTPLUS}
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    B, D, N = state.shape
    x, dt, Bs, Cs, z = (t.contiguous() for t in (x, dt, Bs, Cs, z))
    y = torch.empty_like(x)
    {launch}
    return y, state
"""
