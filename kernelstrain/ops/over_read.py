"""The row loop of the 16-byte (uint4) rungs of rmsnorm / add_rmsnorm / layernorm / fp8_quant (CUDA), right and with
its bound dropped (their no_bounds_check), and how far past its row the unbounded one reaches.

The unbounded loop runs chunks / THREADS + 1 passes of THREADS chunks whatever D is: one pass past the row's last
chunk, or (THREADS > chunks) the rest of the first pass. Each chunk is VEC = 8 16-bit values (16 bytes).
"""

CHUNK_LOOP = "for (int c = threadIdx.x; c < chunks; c += THREADS) {"
UNBOUNDED_LOOP = "for (int j = 0; j <= chunks / THREADS; ++j) {\n        const int c = threadIdx.x + j * THREADS;"
VEC = 8


def past_row(d: int, threads: int) -> int:
    """Elements the unbounded loop reaches past a row of d: the next row's first ones (more than one row's
    worth where THREADS chunks outnumber a row's).

    >>> past_row(4096, 256), past_row(5120, 256), past_row(4096, 1024), past_row(2048, 1024)
    (2048, 1024, 4096, 6144)
    """
    chunks = d // VEC
    return VEC * (threads * (chunks // threads + 1) - chunks)


def extra_pass_later(d: int, threads: int) -> bool:
    """Whether the reach past the row is a pass of its own after the row's (chunks >= THREADS), rather than the
    idle threads of the first pass, which run beside the next row's own block."""
    return d // VEC >= threads
