"""The split-row rungs of min_p_triton (not an op module): SPLIT programs per row compute max and kept-mass
partials; a combine picks the slice where the CDF of the slice masses crosses uniform x mass and walks only it,
in a third kernel, or (last_combine 1) in the mass kernel's last program of the row to arrive (an atomic arrival
count, the threadFenceReduction pattern). Also the threshold and the part selection the chunk
rung shares.
"""
THRESH = "M + tl.log(tl.load(mp_ptr + row))"         # p >= min_p * p_max  <=>  x >= M + log(min_p)
ROW_MAX_OF = """
@triton.jit
def row_max_of(pm_ptr, row, SPLIT: tl.constexpr):
    ids = tl.arange(0, SPLIT)
    return tl.max(tl.load(pm_ptr + row * SPLIT + ids, mask=ids < SPLIT, other=-float("inf")), 0)
"""


def chunk_select(masses: str, n: str, width: str, before: str) -> str:
    """Statements choosing the chunk where the CDF of `masses` crosses target (sel, carry)."""
    return f"""    ids = tl.arange(0, {width})
    cm = tl.load({masses} + ids, mask=ids < {n}, other=0.0)
    total = tl.sum(cm, 0)
    target = tl.load(u_ptr + row) * total
    excl = tl.cumsum(cm, 0) - cm
    sel = tl.max(tl.where((cm > 0) & (excl < target), ids, -1), 0)
    sel = tl.maximum(sel, 0)
    carry = tl.sum(tl.where(ids {before} sel, cm, 0.0), 0)"""


# -- split_row_combine ---------------------------------------------------------------------------
def split_row_combine_src(p, task, thresh=THRESH, before="<"):
    return f"""
{ROW_MAX_OF}

@triton.jit
def min_p_max_kernel(x_ptr, pm_ptr, V, PER, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # program (row, slice): the max of one slice of PER logits
    row, s = tl.program_id(0), tl.program_id(1)
    lo = s * PER
    tl.store(pm_ptr + row * SPLIT + s, max_in(x_ptr + row.to(tl.int64) * V, lo, tl.minimum(lo + PER, V), BLOCK))


@triton.jit
def min_p_mass_kernel(x_ptr, mp_ptr, pm_ptr, ps_ptr, V, PER, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # program (row, slice): the row max from the partials, then the slice's kept mass
    row, s = tl.program_id(0), tl.program_id(1)
    M = row_max_of(pm_ptr, row, SPLIT)
    lo = s * PER
    tl.store(ps_ptr + row * SPLIT + s, mass_in(x_ptr + row.to(tl.int64) * V, lo, tl.minimum(lo + PER, V), {thresh}, M, BLOCK))


@triton.jit
def min_p_kernel(x_ptr, mp_ptr, u_ptr, tok_ptr, pm_ptr, ps_ptr, V, PER, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # the combine: the slice where the CDF of the slice masses crosses the target, then a walk of it
    row = tl.program_id(0)
    M = row_max_of(pm_ptr, row, SPLIT)
{chunk_select("ps_ptr + row * SPLIT", "SPLIT", "SPLIT", before)}
    lo = sel * PER
    tl.store(tok_ptr + row, pick_in(x_ptr + row.to(tl.int64) * V, lo, tl.minimum(lo + PER, V), {thresh}, M, carry,
                                    target, BLOCK))
"""


# -- split_last_combine ---------------------------------------------------------------------------
def split_last_combine_src(p, task, thresh=THRESH, before="<"):
    return f"""
{ROW_MAX_OF}

@triton.jit
def min_p_max_kernel(x_ptr, pm_ptr, cnt_ptr, V, PER, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # program (row, slice): the max of one slice of PER logits; slice 0 also zeroes the row's arrival
    # count, which the mass kernel (next in the stream) counts up
    row, s = tl.program_id(0), tl.program_id(1)
    lo = s * PER
    tl.store(pm_ptr + row * SPLIT + s, max_in(x_ptr + row.to(tl.int64) * V, lo, tl.minimum(lo + PER, V), BLOCK))
    if s == 0:
        tl.store(cnt_ptr + row, 0)


@triton.jit
def min_p_kernel(x_ptr, mp_ptr, u_ptr, tok_ptr, pm_ptr, ps_ptr, cnt_ptr, V, PER, SPLIT: tl.constexpr,
                 BLOCK: tl.constexpr):
    # program (row, slice): the slice's kept mass; the last slice of the row to arrive (the count's
    # acq_rel atomic orders every slice's mass store before it) picks the slice where the CDF crosses
    # the target and walks it: no third launch
    row, s = tl.program_id(0), tl.program_id(1)
    M = row_max_of(pm_ptr, row, SPLIT)
    thr = {thresh}
    x_row = x_ptr + row.to(tl.int64) * V
    lo = s * PER
    tl.store(ps_ptr + row * SPLIT + s, mass_in(x_row, lo, tl.minimum(lo + PER, V), thr, M, BLOCK))
    arrived = tl.atomic_add(cnt_ptr + row, 1, sem="acq_rel")
    if arrived == SPLIT - 1:
    {chunk_select("ps_ptr + row * SPLIT", "SPLIT", "SPLIT", before).replace(chr(10), chr(10) + "    ")}
        lo = sel * PER
        tl.store(tok_ptr + row, pick_in(x_row, lo, tl.minimum(lo + PER, V), thr, M, carry, target, BLOCK))
"""
