"""Cross-entropy backward in Triton: dlogits = (softmax(logits) - onehot(label)) * dloss.

The forward saved lse = logsumexp(logits) per row, so softmax is exp(x - lse): an elementwise
op over [T, V] plus a one-hot at the label. Ladder: three kernels through an fp32 probability
buffer (exp, subtract at the label, scale) -> one fused kernel over the flat array (a division
per element to find the row) -> 2-D grid of (V chunk, row) programs with row scalars loaded
once -> persistent programs looping over (row, chunk) tiles with evict-first loads.
"""
from ..base import (Cost, KernelSpec, Launch, OpModule, Param, Rung, Task, DTYPE_BYTES, TRITON_PRELUDE, cdiv, triton_ptr, TorchRef)
from ..contract import Arg, Entry, Scalar
from .. import stream_stages

# the forward's ranges (cross_entropy_fwd_triton): an 8192-wide chunk wants 16 warps to stay in
# registers (24 + 3 x 8192 / 512 = 72 a thread; on 4 warps, 216)
BLOCK = Param("BLOCK", (1024, 2048, 4096, 8192), 2048)
NUM_WARPS = Param("num_warps", (4, 8, 16), 4)
IGNORE = -100
# The persistent tile loop's loads in flight a thread, in units of one tile's, by num_stages: unlike a row loop's
# reduction (ops/stream_stages.TRIPS_IN_FLIGHT: 2 stages lose there), each trip ends in a store, not a loop-carried
# sum, so even one tile staged ahead overlaps it. H100 (room_device_check_triton KNOBT_SET=tuning, 2026-12-06), bf16
# T=512 V=128256, BLOCK 2048 on 4 warps x 4 programs an SM: 118.4 / 110.2 / 93.1 us at 1 / 2 / 3 stages (0.93x,
# 0.79x); at T=16 (two tiles a program, none to stage ahead) 5.3 / 5.9 / 5.9 us.
TILE_IN_FLIGHT = {1: 1.0, 2: 1.3, 3: 2.4}
ELT_DLOSS = "tl.load(dloss_ptr + row, mask=mask, other=0.0)"    # the dloss scale missing_scale drops
ROW_DLOSS = "tl.load(dloss_ptr + row)"
NO_SCALE = {"scale": "1.0"}
NO_ROW_SCALE = {"dloss": "1.0"}

ENTRY = Entry("cross_entropy_bwd", (
    Arg("logits", "in", ("T", "V")), Arg("labels", "in", ("T",), "int64"), Arg("lse", "in", ("T",), "fp32"),
    Arg("dloss", "in", ("T",), "fp32"), Arg("dx", "out", ("T", "V")),
    Scalar("T"), Scalar("V"), Scalar("ignore_index", "int", str(IGNORE))))


def wrapper(task, body: str) -> str:
    return f"""

{ENTRY.py_def(task)}:
    T, V = logits.shape
    assert logits.is_contiguous()
    dx = torch.empty_like(logits)
{body}
    return dx
"""


def row_scalars(dloss: str, pad="    ") -> str:
    return (f"{pad}label = tl.load(labels_ptr + row)\n{pad}lse = tl.load(lse_ptr + row)\n"
            f"{pad}scale = tl.where(label == ignore_index, 0.0, {dloss})   # ignored rows get no gradient")


# Registers a thread, by the values of a BLOCK tile it holds (BLOCK / threads), as ptxas reports them for sm_90a
# (Triton 3.x, scripts/simS_regs.py, bf16 T=16384 V=32000; fp32 alike): the flat rung's per-element row division keeps
# 64-bit offsets live (4: 40, 8: 62, 16: 122, 32: 170, 64: 248), the tiled and persistent rungs' row scalars load once
# and their exp(x - lse) * scale streams through (tiled 20-32 up to 32 values, 81 at 64; persistent 31-40, 69 at 64
# (bf16), 72 (fp32)). The estimate they replace (24 + 3 values, +8 flat, +6 persistent) gave 222 at BLOCK 8192 on 4
# warps, two programs an SM where ptxas's 69 fits all 4 of programs_per_sm 4: H100 bf16 T=16384 V=32000 (gpu-check
# s61717, held out) measured that 729.5 us, the fastest of its episode, where the estimate simulated it 1.50x the
# 2048-wide one (747.9 us measured); H100 bf16 T=256 V=32000 (s96969) BLOCK 8192 4 warps 1.08x the best, simulated
# 1.41x; H100 fp32 T=16 V=128256 (s93131) 1.24x, simulated 1.38x.
FLAT_REGS = {4: 40, 8: 62, 16: 122, 32: 170, 64: 248}


def rung_regs(kind: str, values: int) -> int:
    """ptxas's registers a thread of one rung holding `values` of the tile (the table above; the unfused rung's
    exp kernel as estimated before: ptxas 38 / 118 / 228 at 8 / 32 / 64 values)."""
    if kind == "unfused":
        return 24 + 3 * values
    if kind == "flat":
        return FLAT_REGS.get(values) or min(255, 24 + 4 * values)
    return max(40 if kind == "persistent" else 32, 8 + values)


def launch_of(kind: str):
    """unfused (three launches through fp32 p), flat (one kernel, a division per element),
    tiled (a program per (chunk, row)) or persistent (#SMs x k programs over the tiles)."""
    def launch(p, task):
        t, v, e, gpu = task["T"], task["V"], DTYPE_BYTES[task.dtype], task.gpu
        block, threads = p["BLOCK"], p["num_warps"] * gpu.warp
        vec = min(16 // e, 4)
        regs = rung_regs(kind, block // threads)
        if kind == "unfused":
            # x read, fp32 p written, p read, dx written: (2e + 8) bytes per element vs 2e
            return Launch(grid=cdiv(t * v, block), threads=threads, regs=regs, bytes_per_access=16,
                          traffic=(2 * e + 8) / (2 * e), launches=3)
        if kind == "flat":
            return Launch(grid=cdiv(t * v, block), threads=threads, regs=regs, bytes_per_access=vec * e)
        lane = v / (cdiv(v, block) * block)
        tiles = t * cdiv(v, block)
        if kind == "tiled":
            return Launch(grid=tiles, threads=threads, regs=regs, bytes_per_access=vec * e, lane_util=lane)
        grid = min(tiles, gpu.sms * p["programs_per_sm"])
        # the tile loop's num_stages stages the next tiles' logits in shared memory (ops/stream_stages.py)
        return stream_stages.staged(Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=vec * e,
                                           lane_util=lane, rounds=cdiv(tiles, grid)),
                                    p, task, trips=tiles / grid, loads=1, block=block, row="V", in_flight=TILE_IN_FLIGHT)
    return launch


def tile_loop(p, args: str) -> str:
    """The persistent tile loop over range(args), its loads staged num_stages deep past 1."""
    stages = p["num_stages"]
    return f"tl.range({args}, num_stages={stages})" if stages > 1 else f"range({args})"


def block_const(p, task) -> dict:
    return {"BLOCK": p["BLOCK"]}


def unfused_three_kernels_src(p, task, label="label", scale=ELT_DLOSS):
    return f'''
@triton.jit
def cross_entropy_exp_kernel(logits_ptr, lse_ptr, p_ptr, n, V, BLOCK: tl.constexpr):
    # p = softmax = exp(x - lse) into an fp32 scratch buffer
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(logits_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    lse = tl.load(lse_ptr + offs // V, mask=mask, other=0.0)
    tl.store(p_ptr + offs, tl.exp(x - lse), mask=mask)


@triton.jit
def cross_entropy_onehot_kernel(p_ptr, labels_ptr, V, ignore_index):
    # p[t, label] -= 1, one program per row
    row = tl.program_id(0)
    label = tl.load(labels_ptr + row)
    if label != ignore_index:
        ptr = p_ptr + row.to(tl.int64) * V + {label}
        tl.store(ptr, tl.load(ptr) - 1.0)


@triton.jit
def cross_entropy_bwd_kernel(p_ptr, labels_ptr, dloss_ptr, dx_ptr, n, V, ignore_index, BLOCK: tl.constexpr):
    # dx = p * dloss[row], cast back to the logits dtype
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // V
    label = tl.load(labels_ptr + row, mask=mask, other=0)
    scale = tl.where(label == ignore_index, 0.0, {scale})
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    tl.store(dx_ptr + offs, (p * scale).to(dx_ptr.dtype.element_ty), mask=mask)
''' + wrapper(task, f"""    n = T * V
    p = torch.empty(T, V, dtype=torch.float32, device=logits.device)
    grid = (triton.cdiv(n, {p['BLOCK']}),)
    cross_entropy_exp_kernel[grid](logits, lse, p, n, V, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})
    cross_entropy_onehot_kernel[(T,)](p, labels, V, ignore_index, num_warps=1)
    cross_entropy_bwd_kernel[grid](p, labels, dloss, dx, n, V, ignore_index, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})""")


def fused_flat_src(p, task, n="T * V", scale=ELT_DLOSS):
    return f'''
@triton.jit
def cross_entropy_bwd_kernel(logits_ptr, labels_ptr, lse_ptr, dloss_ptr, dx_ptr, T, V, ignore_index,
                             BLOCK: tl.constexpr):
    # One pass, no scratch: every element divides its offset by V to find its row and
    # gathers that row's lse / label / dloss (cache hits, but per-element work).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < {n}
    row = offs // V
    col = offs - row * V
    label = tl.load(labels_ptr + row, mask=mask, other=0)
    lse = tl.load(lse_ptr + row, mask=mask, other=0.0)
    scale = tl.where(label == ignore_index, 0.0, {scale})
    x = tl.load(logits_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.exp(x - lse) - tl.where(col == label, 1.0, 0.0)
    tl.store(dx_ptr + offs, (g * scale).to(dx_ptr.dtype.element_ty), mask=mask)
''' + wrapper(task, f"    cross_entropy_bwd_kernel[(triton.cdiv(T * V, {p['BLOCK']}),)](logits, labels, lse, dloss, dx, T, V, "
                    f"ignore_index, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})")


def row_tiled_2d_src(p, task, mask="cols < V", dloss=ROW_DLOSS):
    return f'''
@triton.jit
def cross_entropy_bwd_kernel(logits_ptr, labels_ptr, lse_ptr, dloss_ptr, dx_ptr, T, V, ignore_index,
                             BLOCK: tl.constexpr):
    # Program (chunk, row): three scalar loads per program, then a contiguous BLOCK of the
    # row that Triton turns into wide vector loads and stores.
    row = tl.program_id(1)
{row_scalars(dloss)}
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = {mask}
    base = row.to(tl.int64) * V
    x = tl.load(logits_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.exp(x - lse) - tl.where(cols == label, 1.0, 0.0)
    tl.store(dx_ptr + base + cols, (g * scale).to(dx_ptr.dtype.element_ty), mask=mask)
''' + wrapper(task, f"    cross_entropy_bwd_kernel[(triton.cdiv(V, {p['BLOCK']}), T)](logits, labels, lse, dloss, dx, T, V, "
                    f"ignore_index, BLOCK={p['BLOCK']}, num_warps={p['num_warps']})")


def persistent_evict_first_src(p, task, tiles="n_tiles", dloss=ROW_DLOSS):
    overlap = (", and\n    # the loads of the next tile overlap the stores of this one." if p["num_stages"] > 1 else ".")
    return f'''
@triton.jit
def cross_entropy_bwd_kernel(logits_ptr, labels_ptr, lse_ptr, dloss_ptr, dx_ptr, T, V, ignore_index, n_tiles,
                             BLOCK: tl.constexpr):
    # A fixed grid of #SMs x k programs walks the (row, chunk) tiles: no launch tail{overlap} Logits are read once and
    # dx never re-read here, so both stream with evict_first and leave L2 to others.
    chunks = tl.cdiv(V, BLOCK)
    for tile in {tile_loop(p, "tl.program_id(0), " + tiles + ", tl.num_programs(0)")}:
        row = tile // chunks
{row_scalars(dloss, pad=" " * 8)}
        cols = (tile - row * chunks) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < V
        base = row.to(tl.int64) * V
        x = tl.load(logits_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        g = tl.exp(x - lse) - tl.where(cols == label, 1.0, 0.0)
        tl.store(dx_ptr + base + cols, (g * scale).to(dx_ptr.dtype.element_ty), mask=mask,
                 eviction_policy="evict_first")
''' + wrapper(task, f"""    n_tiles = T * triton.cdiv(V, {p['BLOCK']})
    sms = torch.cuda.get_device_properties(logits.device).multi_processor_count
    grid = (min(n_tiles, sms * {p['programs_per_sm']}),)
    cross_entropy_bwd_kernel[grid](logits, labels, lse, dloss, dx, T, V, ignore_index, n_tiles,
                                   BLOCK={p['BLOCK']}, num_warps={p['num_warps']})""")


class CrossEntropyBwdTriton(OpModule):
    op, impl, family = "cross_entropy_bwd", "triton", "training"
    title = "Cross-entropy loss backward"
    desc = (f"dlogits[t, v] = (exp(logits[t, v] - lse[t]) - (v == labels[t])) * dloss[t], in the logits dtype, "
            f"with lse (fp32, saved by the forward) and dloss (fp32) per row; rows with labels[t] == {IGNORE} "
            "get zero gradient.")
    dims = {"T": "tokens (rows)", "V": "vocabulary size"}
    shapes = ({"T": 16, "V": 128256}, {"T": 256, "V": 32000}, {"T": 2048, "V": 128256},
              {"T": 4096, "V": 32000}, {"T": 8192, "V": 128256}, {"T": 16384, "V": 32000})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("logits", "labels", "lse", "dloss")
    check_shape = {"T": 512, "V": 128256}
    variants = (
        Rung("unfused_three_kernels", "fp32 probabilities buffer: exp kernel, one-hot subtract kernel, scale kernel",
             (BLOCK, NUM_WARPS), compute_eff=0.3, memory_eff=0.8, launch=launch_of("unfused"),
             render=unfused_three_kernels_src, consts=block_const,
             bugs={"off_by_one": {"label": "label + 1"}, "missing_scale": NO_SCALE}),
        Rung("fused_flat", "one kernel over the flat T*V array; row = offset // V per element",
             (BLOCK, NUM_WARPS), compute_eff=0.15, memory_eff=0.74, launch=launch_of("flat"),
             render=fused_flat_src, consts=block_const,
             bugs={"off_by_one": {"n": "T * V - 1"}, "missing_scale": NO_SCALE}),
        Rung("row_tiled_2d", "grid of (V chunk, row) programs: lse, label, dloss loaded once per program",
             (BLOCK, NUM_WARPS), compute_eff=0.3, memory_eff=0.88, launch=launch_of("tiled"),
             render=row_tiled_2d_src, consts=block_const,
             bugs={"off_by_one": {"mask": "cols < V - 1"}, "missing_scale": NO_ROW_SCALE}),
        Rung("persistent_evict_first", "#SMs x k programs loop over (row, chunk) tiles, evict-first streaming",
             (BLOCK, NUM_WARPS, Param("programs_per_sm", (2, 4, 8), 4),
              Param("num_stages", (1, 2, 3), 2)), compute_eff=0.3, memory_eff=0.92,
             launch=launch_of("persistent"), render=persistent_evict_first_src, consts=block_const,
             bugs={"off_by_one": {"tiles": "n_tiles - 1"}, "missing_scale": NO_ROW_SCALE}),
    )

    def cost(self, task: Task) -> Cost:
        t, v = task["T"], task["V"]
        return Cost(flops=4 * t * v, bytes=2 * t * v * DTYPE_BYTES[task.dtype] + 20 * t)

    torch_ref = TorchRef(
        body=(f"keep = labels != {IGNORE}\n"
              "        p = torch.exp(logits.float() - lse[:, None])\n"
              "        p[torch.arange(T, device=p.device)[keep], labels[keep]] -= 1.0\n"
              "        return (p * (dloss * keep)[:, None]).to(logits.dtype)"),
        inputs=(f"[x := torch.randn(T, V, dtype=DTYPE, device='cuda') * 2,\n"
                f"            torch.where(torch.arange(T, device='cuda') % 16 == 15, {IGNORE}, "
                "torch.randint(0, V, (T,), device='cuda')),\n"
                "            torch.logsumexp(x.float(), dim=-1), torch.rand(T, device='cuda')]"))

    def triton_kernels(self, variant, params: dict, task: Task) -> list:
        ptr = triton_ptr(task.dtype, task)
        rows = {"labels_ptr": "*i64", "lse_ptr": "*fp32", "dloss_ptr": "*fp32"}
        opts = {"num_warps": params["num_warps"], "num_stages": 1}
        blk = variant.consts(params, task)
        if variant.tag == "unfused_three_kernels":
            return [KernelSpec("cross_entropy_exp_kernel", {"logits_ptr": ptr, "lse_ptr": "*fp32", "p_ptr": "*fp32",
                                                            "n": "i32", "V": "i32", "BLOCK": "constexpr"}, blk, **opts),
                    KernelSpec("cross_entropy_onehot_kernel", {"p_ptr": "*fp32", "labels_ptr": "*i64", "V": "i32",
                                                               "ignore_index": "i32"}, num_warps=1, num_stages=1),
                    KernelSpec("cross_entropy_bwd_kernel", {"p_ptr": "*fp32", "labels_ptr": "*i64", "dloss_ptr": "*fp32",
                                                            "dx_ptr": ptr, "n": "i32", "V": "i32", "ignore_index": "i32",
                                                            "BLOCK": "constexpr"}, blk, **opts)]
        sig = {"logits_ptr": ptr, **rows, "dx_ptr": ptr, "T": "i32", "V": "i32", "ignore_index": "i32"}
        if variant.tag == "persistent_evict_first":
            sig["n_tiles"] = "i32"
        return [KernelSpec("cross_entropy_bwd_kernel", {**sig, "BLOCK": "constexpr"}, blk, **opts)]

    def assemble(self, body, variant, params, task) -> str:
        return TRITON_PRELUDE + body
