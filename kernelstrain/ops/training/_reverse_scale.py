"""The scale pass of grad_clip_cuda's two-pass rungs walked from g's end (not an op module): the norm
pass streams g front to back, so where g is larger than L2 its tail is what the cache still holds
when the scale pass starts; a scale pass from the end re-reads those bytes from L2, a forward one
finds g's head evicted by its tail (a cyclic stream longer than an LRU cache never hits). Where
g fits the cache both orders re-read it from L2.
"""
from ..base import DTYPE_BYTES, Param

# 1: the scale pass walks g from its end, so it first re-reads what the norm pass read last (still in L2)
REVERSE = Param("reverse", (0, 1), 0)
L2_KEEP = 0.8           # share of the catalog's L2 a streamed g stays resident in (prior: the device plan times it)


def reread_miss(task, reverse: int) -> float:
    """Share of the scale pass's re-read of g that misses L2: none where g fits the L2_KEEP share of
    the cache; past it a forward pass finds g's head evicted by its tail (a cyclic stream longer than
    an LRU cache never hits), a reverse pass finds the tail the norm pass read last."""
    g, keep = task["N"] * DTYPE_BYTES[task.dtype], L2_KEEP * task.gpu.l2_mb * 1e6
    if g <= keep:
        return 0.0
    return (g - keep) / g if reverse else 1.0


def two_stage_scale_loop(p, scale: str) -> str:
    """The scale kernel's grid-stride loop: forward, or (reverse) from g's end."""
    if not p.get("reverse"):
        return f"""    for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (int64_t)BLOCKS * THREADS)
        g[i] = from_float(to_float(g[i]){scale});"""
    return f"""    // from g's end: the first sweep re-reads the elements stage 1 read last, still in L2
    for (int64_t r = (int64_t)blockIdx.x * THREADS + threadIdx.x; r < n; r += (int64_t)BLOCKS * THREADS) {{
        const int64_t i = n - 1 - r;
        g[i] = from_float(to_float(g[i]){scale});
    }}"""


def persistent_scale_loop(p, scale: str) -> str:
    """The cooperative kernel's scale pass over uint4 chunks: forward, or (reverse) from g's end."""
    head, index = ("for (int64_t c = first; c < chunks; c += stride) {", "") if not p.get("reverse") else (
        "// from g's end: the grid's first sweep re-reads the chunks the norm pass read last, still in L2\n"
        "    for (int64_t r = first; r < chunks; r += stride) {", "\n        const int64_t c = chunks - 1 - r;")
    return f"""    {head}{index}
        Pack a; a.u = gv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) a.h[k] = from_float(to_float(a.h[k]){scale});
        gv[c] = a.u;
    }}"""
