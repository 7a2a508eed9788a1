"""Min-p sampling in Triton: keep the tokens with p >= min_p * p_max (x >= M + log(min_p)), and
draw one by inverse CDF over the kept mass in vocabulary order.

Ladder: three kernels (row max; kept weights into a scratch row; a per-row cumulative pick) ->
one program per row with three fused BLOCK loops (max, kept mass, pick by tl.cumsum) -> chunk
masses: the mass loop stores one mass per BLOCK chunk, a cumsum over the chunk masses finds the
crossing chunk and only it is re-read -> split rows: SPLIT programs per row (max and mass
partials) and a combine kernel that picks the slice and walks it (fills the GPU at small B; with
last_combine the mass kernel's last program of a row picks instead, so a decode step's sampling
pays two launches, not three).
Triton has no early loop exit, so the pick loops run to the end of their range.
"""
from dataclasses import replace

from .. import stream_stages
from ..base import KernelSpec, Launch, Param, Rung, TRITON_PRELUDE, cdiv
from ._sampling import row_l2_miss
from ._min_p_triton_split import THRESH, chunk_select, split_last_combine_src, split_row_combine_src
from .min_p_spec import ENTRY, NO_MIN_P_ROWS, MinPSpec, triton_check_adapter

BLOCK = Param("BLOCK", (512, 1024, 2048, 4096, 8192), 2048)
WARPS = Param("num_warps", (2, 4, 8, 16), 8)
# the split rungs: BLOCK 4096 (seventh session; scripts/roomM_interpret.py, room_compile_triton) makes a 32-way slice
# of a 128k-vocabulary row one trip (the model: 4-6% at B=1-64 over 2048); 64 splits and 16 warps were level on an
# H100 (docs/roomM_device_h100_m1/), so not offered
# last_combine 1 (seventh session): the combine folded into the mass kernel, whose last program of a row to count
# itself in (an acq_rel atomic on a per-row count the max kernel zeroes: the threadFenceReduction pattern) picks the
# slice and walks it: two launches, not three, the same kernels and bytes otherwise (scripts/roomM_interpret.py)
SPLIT_PARAMS = (Param("BLOCK", (512, 1024, 2048, 4096), 1024), Param("num_warps", (2, 4, 8), 4),
                Param("split", (2, 4, 8, 16, 32), 8), Param("last_combine", (0, 1), 0))
NO_MIN_P = {"thresh": "M"}

PICK = """
@triton.jit
def pick_in(x_row, lo, hi, thr, M, carry0, target, BLOCK: tl.constexpr):
    # inverse-CDF walk of [lo, hi): the last kept token whose exclusive prefix is below target
    carry = tl.zeros([], tl.float32) + carry0
    pick = tl.full([], -1, tl.int32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < hi, other=-float("inf"))
        w = tl.where(x >= thr, tl.exp(x - M), 0.0)
        excl = carry + tl.cumsum(w, 0) - w
        pick = tl.maximum(pick, tl.max(tl.where((w > 0) & (excl < target), offs, -1), 0))
        carry += tl.sum(w, 0)
    return pick
"""
ROW_MAX = """
@triton.jit
def max_in(x_row, lo, hi, BLOCK: tl.constexpr):
    mx = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mx = tl.maximum(mx, tl.load(x_row + offs, mask=offs < hi, other=-float("inf")))
    return tl.max(mx, 0)


@triton.jit
def mass_in(x_row, lo, hi, thr, M, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < hi, other=-float("inf"))
        acc += tl.where(x >= thr, tl.exp(x - M), 0.0)
    return tl.sum(acc, 0)
"""


def row_launch(passes: float, launches: int = 1, split: bool = False, base: float = 1.0):
    def launch(p, task):
        threads = p["num_warps"] * task.gpu.warp
        per = max(1, p["BLOCK"] // threads)
        grid = task["B"] * (p["split"] if split else 1)
        return Launch(grid=grid, threads=threads, smem_bytes=8 * p["num_warps"], regs=min(255, 32 + 3 * per),
                      bytes_per_access=min(16, 4 * per), traffic=base + passes * row_l2_miss(task, threads),
                      compute_scale=0.6, launches=launches)
    return launch


def split_launch(p, task):
    """The split rung: max, mass and combine kernels, or (last_combine) the combine in the mass kernel's tail."""
    return replace(row_launch(1.0, launches=3, split=True)(p, task), launches=3 - p.get("last_combine", 0))


def split_src(p, task, **slots):
    return (split_last_combine_src if p.get("last_combine") else split_row_combine_src)(p, task, **slots)


# -- multi_kernel ---------------------------------------------------------------------------
def multi_kernel_src(p, task, thresh=THRESH, carry0="0.0"):
    return f"""
@triton.jit
def min_p_max_kernel(x_ptr, M_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tl.store(M_ptr + row, max_in(x_ptr + row.to(tl.int64) * V, 0, V, BLOCK))


@triton.jit
def min_p_filter_kernel(x_ptr, mp_ptr, M_ptr, w_ptr, V, BLOCK: tl.constexpr):
    # program (row, block): kept weight exp(x - M), or 0, into the scratch row
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    M = tl.load(M_ptr + row)
    x = tl.load(x_ptr + row.to(tl.int64) * V + offs, mask=offs < V, other=-float("inf"))
    tl.store(w_ptr + row.to(tl.int64) * V + offs, tl.where(x >= {thresh}, tl.exp(x - M), 0.0), mask=offs < V)


@triton.jit
def min_p_kernel(w_ptr, u_ptr, tok_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    w_row = w_ptr + row.to(tl.int64) * V
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        acc += tl.load(w_row + start + tl.arange(0, BLOCK), mask=start + tl.arange(0, BLOCK) < V, other=0.0)
    target = tl.load(u_ptr + row) * tl.sum(acc, 0)
    carry = tl.zeros([], tl.float32) + {carry0}
    pick = tl.full([], -1, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        w = tl.load(w_row + offs, mask=offs < V, other=0.0)
        excl = carry + tl.cumsum(w, 0) - w
        pick = tl.maximum(pick, tl.max(tl.where((w > 0) & (excl < target), offs, -1), 0))
        carry += tl.sum(w, 0)
    tl.store(tok_ptr + row, pick)
"""


# -- fused_row --------------------------------------------------------------------------------
def fused_row_src(p, task, thresh=THRESH, carry0="0.0"):
    return f"""
@triton.jit
def min_p_kernel(x_ptr, mp_ptr, u_ptr, tok_ptr, V, BLOCK: tl.constexpr):
    # one program per row, three BLOCK loops: max, kept mass, inverse-CDF pick
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * V
    M = max_in(x_row, 0, V, BLOCK)
    thr = {thresh}
    target = tl.load(u_ptr + row) * mass_in(x_row, 0, V, thr, M, BLOCK)
    tl.store(tok_ptr + row, pick_in(x_row, 0, V, thr, M, {carry0}, target, BLOCK))
"""


# -- chunk_mass_pick -------------------------------------------------------------------------
def chunk_mass_pick_src(p, task, thresh=THRESH, before="<"):
    return f"""
@triton.jit
def min_p_kernel(x_ptr, mp_ptr, u_ptr, tok_ptr, cm_ptr, V, NCH, BLOCK: tl.constexpr, NCH_P2: tl.constexpr):
    # per-chunk kept masses go to a small scratch row; a cumsum over them finds the chunk the
    # sample falls in, and only that chunk is read a third time
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * V
    M = max_in(x_row, 0, V, BLOCK)
    thr = {thresh}
    for ch in range(0, NCH):
        offs = ch * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < V, other=-float("inf"))
        tl.store(cm_ptr + row * NCH + ch, tl.sum(tl.where(x >= thr, tl.exp(x - M), 0.0), 0))
    tl.debug_barrier()                               # the chunk masses are visible to the whole program
{chunk_select("cm_ptr + row * NCH", "NCH", "NCH_P2", before)}
    lo = sel * BLOCK
    tl.store(tok_ptr + row, pick_in(x_row, lo, tl.minimum(lo + BLOCK, V), thr, M, carry, target, BLOCK))
"""


LAUNCH = {
    "multi_kernel": """M = torch.empty(B, dtype=torch.float32, device=logits.device)
    w = torch.empty_like(logits)
    min_p_max_kernel[(B,)](logits, M, V, BLOCK={BLOCK}, num_warps={num_warps})
    min_p_filter_kernel[(B, triton.cdiv(V, {BLOCK}))](logits, min_p, M, w, V, BLOCK={BLOCK}, num_warps={num_warps})
    min_p_kernel[(B,)](w, uniform, tokens, V, BLOCK={BLOCK}, num_warps={num_warps})""",
    "fused_row": "min_p_kernel[(B,)](logits, min_p, uniform, tokens, V, BLOCK={BLOCK}, num_warps={num_warps})",
    "chunk_mass_pick": """NCH = triton.cdiv(V, {BLOCK})
    cm = torch.empty((B, NCH), dtype=torch.float32, device=logits.device)
    min_p_kernel[(B,)](logits, min_p, uniform, tokens, cm, V, NCH, BLOCK={BLOCK}, NCH_P2=triton.next_power_of_2(NCH),
                       num_warps={num_warps})""",
    "split_row_combine": """PER = triton.cdiv(triton.cdiv(V, {split}), {BLOCK}) * {BLOCK}   # logits per slice, whole blocks
    part = torch.empty((2, B, {split}), dtype=torch.float32, device=logits.device)
    min_p_max_kernel[(B, {split})](logits, part[0], V, PER, SPLIT={split}, BLOCK={BLOCK}, num_warps={num_warps})
    min_p_mass_kernel[(B, {split})](logits, min_p, part[0], part[1], V, PER, SPLIT={split}, BLOCK={BLOCK}, num_warps={num_warps})
    min_p_kernel[(B,)](logits, min_p, uniform, tokens, part[0], part[1], V, PER, SPLIT={split}, BLOCK={BLOCK},
                       num_warps={num_warps})""",
    "split_last_combine": """PER = triton.cdiv(triton.cdiv(V, {split}), {BLOCK}) * {BLOCK}   # logits per slice, whole blocks
    part = torch.empty((2, B, {split}), dtype=torch.float32, device=logits.device)
    count = torch.empty(B, dtype=torch.int32, device=logits.device)      # zeroed by the max kernel
    min_p_max_kernel[(B, {split})](logits, part[0], count, V, PER, SPLIT={split}, BLOCK={BLOCK}, num_warps={num_warps})
    min_p_kernel[(B, {split})](logits, min_p, uniform, tokens, part[0], part[1], count, V, PER, SPLIT={split},
                               BLOCK={BLOCK}, num_warps={num_warps})""",
}


class MinPTriton(MinPSpec):
    impl = "triton"
    check_adapter = staticmethod(triton_check_adapter)
    variants = (
        Rung("multi_kernel", "three kernels: row max, kept weights into a scratch row, per-row cumulative pick",
             (BLOCK, WARPS), compute_eff=0.3, memory_eff=0.62, launch=row_launch(1.5, launches=3, base=3.0),   # + the scratch row written and read
             render=multi_kernel_src, consts=lambda p, t: {"BLOCK": p["BLOCK"]},
             bugs={"missing_scale": NO_MIN_P, "wrong_init": {"carry0": "1.0"}}, bug_tasks=NO_MIN_P_ROWS),
        Rung("fused_row", "one program per row: max, kept-mass and tl.cumsum pick loops fused",
             # num_stages: the three helper loops of the row, each from 0 (aligned), pipelined (assemble)
             (BLOCK, WARPS, stream_stages.STREAM_STAGES), compute_eff=0.12, memory_eff=0.85,   # tl.cumsum over the whole row
             launch=stream_stages.launch_of(row_launch(2.0), lambda p, t: t["V"] / p["BLOCK"], loads=1, apart=True, row="V"),
             render=fused_row_src,
             consts=lambda p, t: {"BLOCK": p["BLOCK"]}, bugs={"missing_scale": NO_MIN_P, "wrong_init": {"carry0": "1.0"}},
             bug_tasks=NO_MIN_P_ROWS),
        Rung("chunk_mass_pick", "per-chunk kept masses, cumsum over chunks, only the crossing chunk re-read",
             # BLOCK 16384: an H100 (docs/roomM_device_h100_m1/, 16 warps) ran it 1.42x / 1.33x faster than 8192 at
             # B=1 / B=64, V=128256 (22.6 / 32.3 us against 32.0 / 43.0; modelled 30.6 / 31.2 against 35.1 / 35.8)
             (Param("BLOCK", BLOCK.values + (16384,), BLOCK.default), WARPS), compute_eff=0.45, memory_eff=0.88,
             launch=row_launch(1.0), render=chunk_mass_pick_src, consts=lambda p, t: {"BLOCK": p["BLOCK"]},
             bugs={"missing_scale": NO_MIN_P, "bad_combine_index": {"before": "<="}}, bug_tasks=NO_MIN_P_ROWS),
        Rung("split_row_combine", "SPLIT programs per row (max, mass partials) and a combine walking one slice",
             SPLIT_PARAMS, compute_eff=0.45, memory_eff=0.88, launch=split_launch, render=split_src,
             consts=lambda p, t: {"BLOCK": p["BLOCK"]},
             bugs={"bad_combine_index": {"before": "<="}, "missing_scale": NO_MIN_P}, bug_tasks=NO_MIN_P_ROWS),
    )

    def triton_kernels(self, variant, params, task) -> list:
        b, v, bl, nw = task["B"], task["V"], params["BLOCK"], params["num_warps"]
        x = {"x_ptr": "*fp32"}
        mk = lambda name, sig, consts, ints=None: KernelSpec(  # noqa: E731
            name, {**sig, **{k: "constexpr" for k in consts}}, consts, num_warps=nw, num_stages=1, ints=ints or {})
        c = {"BLOCK": bl}
        if variant.tag == "multi_kernel":
            return [mk("min_p_max_kernel", {**x, "M_ptr": "*fp32", "V": "i32"}, c),
                    mk("min_p_filter_kernel", {**x, "mp_ptr": "*fp32", "M_ptr": "*fp32", "w_ptr": "*fp32", "V": "i32"}, c),
                    mk("min_p_kernel", {"w_ptr": "*fp32", "u_ptr": "*fp32", "tok_ptr": "*i32", "V": "i32"}, c)]
        head = {**x, "mp_ptr": "*fp32", "u_ptr": "*fp32", "tok_ptr": "*i32"}
        if variant.tag == "fused_row":
            return [mk("min_p_kernel", {**head, "V": "i32"}, c)]
        if variant.tag == "chunk_mass_pick":
            nch = cdiv(v, bl)
            return [mk("min_p_kernel", {**head, "cm_ptr": "*fp32", "V": "i32", "NCH": "i32"},
                       {**c, "NCH_P2": 1 << (nch - 1).bit_length()}, {"NCH": nch})]
        sp = params["split"]
        per = cdiv(cdiv(v, sp), bl) * bl
        c = {"SPLIT": sp, "BLOCK": bl}
        if params.get("last_combine"):
            cnt = {"cnt_ptr": "*i32"}
            return [mk("min_p_max_kernel", {**x, "pm_ptr": "*fp32", **cnt, "V": "i32", "PER": "i32"}, c, {"PER": per}),
                    mk("min_p_kernel", {**head, "pm_ptr": "*fp32", "ps_ptr": "*fp32", **cnt, "V": "i32", "PER": "i32"},
                       c, {"PER": per})]
        return [mk("min_p_max_kernel", {**x, "pm_ptr": "*fp32", "V": "i32", "PER": "i32"}, c, {"PER": per}),
                mk("min_p_mass_kernel", {**x, "mp_ptr": "*fp32", "pm_ptr": "*fp32", "ps_ptr": "*fp32", "V": "i32",
                                         "PER": "i32"}, c, {"PER": per}),
                mk("min_p_kernel", {**head, "pm_ptr": "*fp32", "ps_ptr": "*fp32", "V": "i32", "PER": "i32"}, c, {"PER": per})]

    def assemble(self, kernel, variant, params, task) -> str:
        helpers = stream_stages.on_loops(ROW_MAX + ("" if variant.tag == "multi_kernel" else PICK), params)
        return f"""{TRITON_PRELUDE}{helpers}
{kernel.strip(chr(10))}


{ENTRY.py_def(task)}:
    B, V = logits.shape
    logits = logits.contiguous()
    tokens = torch.empty(B, dtype=torch.int32, device=logits.device)
    {LAUNCH["split_last_combine" if params.get("last_combine") else variant.tag].format(**params)}
    return tokens
"""
