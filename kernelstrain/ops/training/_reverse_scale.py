"""The scale pass of grad_clip_cuda's two-pass rungs walked from g's end (not an op module): the norm
pass streams g front to back, so where g is larger than L2 its tail is what the cache may still hold
when the scale pass starts; a scale pass from the end can re-read some of it from L2, a forward one
finds g's head evicted by its tail.

What an H100 measured (80GB HBM3, 2026-12-06 06:44 UTC, scripts/room_device_check.py ROOM_PLAN=reverse, roomC
a7ab44f, 30 cases, 0 problems: every value correct, every bug render caught), reverse over forward:
vectorized_persistent fp32 N=16.8M (67 MB, 1.3x the L2) 71.3 / 77.4 us (0.92) on 512 threads, 73.6 / 75.4
(0.98) on 1024; bf16 N=33.6M (67 MB) 76.2 / 80.3 (0.95); bf16 N=67.1M (134 MB) 147.4 / 149.3 (0.99);
two_stage_deterministic fp32 67 MB 76.5 / 80.8 (0.95), bf16 67 MB 115.4 / 118.3 (0.98), 134 MB 250.2 / 251.4
(1.00). Inside the L2 the orders tie, and the forward re-read already costs what a miss does: bf16 N=16.8M
(34 MB) 37.4 / 37.7 us, about half the 67 MB rows (so the re-read of a g that fits is not modelled as a hit
either; fp32 N=4.2M, 17 MB: 20.1 / 18.4). So the reverse pass finds about a fifth of the L2 (~10 MB of 50)
still holding g, where the model had 80% of it (0.82 of forward modelled at 67 MB).
"""
from ..base import DTYPE_BYTES, Param

# 1: the scale pass walks g from its end, so it first re-reads what the norm pass read last
REVERSE = Param("reverse", (0, 1), 0)
L2_REVERSE_HIT = 0.2    # share of the L2 a reverse re-read finds holding g, past the L2 (H100 fit, above)
# reverse over forward where g fits half the L2: fp32 N=4.2M (17 MB) 20.1 / 18.4 us and, in a second call (07:00
# UTC, ROOM_PLAN=widen), 20.8 / 18.6; the cause was not found (34 MB ties), so it is taken as measured
REVERSE_INSIDE = 1.1


def reread_miss(task, reverse: int) -> float:
    """Share of the scale pass's re-read of g that misses L2: all of it forward (and inside the L2,
    as the H100 measured), all but L2_REVERSE_HIT of the cache's bytes from the end of a g larger
    than the L2."""
    g, l2 = task["N"] * DTYPE_BYTES[task.dtype], task.gpu.l2_mb * 1e6
    if not reverse or g <= l2:
        return 1.0
    return 1.0 - L2_REVERSE_HIT * l2 / g


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


def reverse_traffic(task, reverse: int) -> float:
    """DRAM bytes / the floor's of a rung that reads g twice and writes it once (3 passes / 2 where
    the re-read misses), with the order of its scale pass."""
    traffic = 1 + 0.5 * reread_miss(task, reverse)
    inside = reverse and task["N"] * DTYPE_BYTES[task.dtype] <= task.gpu.l2_mb * 1e6 / 2
    return traffic * REVERSE_INSIDE if inside else traffic

