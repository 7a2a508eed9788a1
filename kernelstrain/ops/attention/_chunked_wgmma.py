"""chunked_prefill_cuda's sm_90a rung: flash_prefill_cuda's warpgroup kernel (_flash_wgmma) rewritten for the chunk's
prefix offset and the KV-head base, its launch model, and the kernel arguments and host code the module's rungs share."""
from ..base import Launch, DTYPE_BYTES, cdiv
from ._flash_wgmma import BLOCK_M as WGMMA_M, TWO_WARPGROUPS, warpgroups, wgmma_kernel
from ._flash_ws import MAPS, kind_of, warp_specialize, ws_host
from .chunked_prefill_spec import ENTRY, cost_of, keys_visited, pairs

ARGS = ("const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,\n"
        "        scalar_t* __restrict__ o, int B, int C, int P")
KV_BASE = "    const scalar_t* kb = k + (size_t)(bh / GROUP) * (P + C) * HEAD_DIM;\n" \
          "    const scalar_t* vb = v + (size_t)(bh / GROUP) * (P + C) * HEAD_DIM;\n"


def host(task, grid, block, smem="0", pre=""):
    return ENTRY.host(task, "chunked_prefill_kernel", grid, block, smem, pre)


def wgmma_launch(p, task):
    """One 128-thread warpgroup per 64 chunk rows, or two per 128 (FA3's core without warp specialization): Q and
    STAGES K/V stages in dynamic smem, S and O on wgmma at the tensor cores' full Hopper rate (no mma.sync scale); each
    tile waits for its S wgmma, the softmax and its PV wgmma in turn. Grid, balance and K/V re-reads as mma_launch's."""
    b, h, c, pf, d, e, bn, stages = (task["B"], task["H"], task["C"], task["P"], task["D"], DTYPE_BYTES[task.dtype],
                                     p["BLOCK_N"], p["stages"])
    wg = warpgroups(p)
    bm = WGMMA_M * wg
    tiles = b * h * c // bm
    resident = 2 // wg                          # CTAs an SM keeps busy (as mma_launch's 64 -> 2, 128 -> 1)
    waves = cdiv(tiles, task.gpu.sms * resident)
    balance = tiles / (waves * task.gpu.sms * resident) if waves < 4 else 1.0
    shape = min(1.0, bn / (bn + 16) * 1.25) * (0.92 if stages == 2 else 1.0) * (TWO_WARPGROUPS if wg == 2 else 1.0)
    reread = b * h * keys_visited(c, pf, bm, bn, True) // bm * 2 * d * e / cost_of(task).bytes
    return Launch(grid=tiles, threads=128 * wg, smem_bytes=1024 + (bm + 2 * stages * bn) * d * e,
                  regs=min(255, 48 + bn // 2 + d // 2 + bn // 4), bytes_per_access=16 * (stages - 1),
                  traffic=1 + 0.06 * reread, tile_quant=pairs(c, pf) / keys_visited(c, pf, bm, bn, True),
                  compute_scale=max(0.6, balance) * shape)


# flash_prefill_kernel's [B*H, S, D] indexing -> the chunk's: Q / O rows of [B*H, C, D], K / V of the KV head
# bh / GROUP over P + C positions, chunk row r at position P + r (so the tiles run through P + m0 + BLOCK_M)
WGMMA_CHUNKED = (
    ("flash_prefill_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,\n"
     "                     scalar_t* __restrict__ o, int S, float scale_log2) {",
     "chunked_prefill_kernel(" + ARGS + ") {\n    const float scale_log2 = SCALE_LOG2;"),
    ("const size_t base = (size_t)blockIdx.x * S * HEAD_DIM;",
     "const size_t base = (size_t)blockIdx.x * C * HEAD_DIM;     // Q and O: this head's chunk rows\n"
     "    const int bh = blockIdx.x;\n" + KV_BASE.rstrip("\n")),
    ("const int ntiles = (m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N;", "const int ntiles = (P + m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N;"),
    ("k + base + (size_t)j * BLOCK_N * HEAD_DIM", "kb + (size_t)j * BLOCK_N * HEAD_DIM"),
    ("v + base + (size_t)j * BLOCK_N * HEAD_DIM", "vb + (size_t)j * BLOCK_N * HEAD_DIM"),
    ("const bool diagonal = n0 + BLOCK_N - 1 > row0;", "const bool diagonal = n0 + BLOCK_N - 1 > P + row0;"),
    ("e % 2 @MASK@ row0 + g + e / 2 * 8)", "e % 2 @MASK@ P + row0 + g + e / 2 * 8)"),
)


def wgmma_src(p, task, mask=">", m0="-INFINITY", l0="0.f"):
    kernel = wgmma_kernel(p, task, "@MASK@", m0, l0)
    for old, new in WGMMA_CHUNKED:
        assert old in kernel, old
        kernel = kernel.replace(old, new)
    return kernel.replace("@MASK@", mask) + host(
        task, "dim3(B * NUM_HEADS, C / BLOCK_M)", "THREADS", "smem", """
    const int smem = 1024 + (BLOCK_M + 2 * STAGES * BLOCK_N) * HEAD_DIM * (int)sizeof(scalar_t);   // + alignment slack
    cudaFuncSetAttribute(chunked_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);""")


# the warp-specialized kernel: Q rows of [B*H*C, D], K/V rows of [B*KVH*(P+C), D] by TMA (the pointers stay on the host)
WS_SIG = ("chunked_prefill_kernel(" + ARGS + ") {", "chunked_prefill_kernel(" + MAPS + ",\n        scalar_t* __restrict__ o, int B, int C, int P) {")


def ws_src(p, task, mask=">", m0="-INFINITY", l0="0.f"):
    kernel = wgmma_kernel(p, task, "@MASK@", m0, l0)
    for old, new in WGMMA_CHUNKED + ((KV_BASE.rstrip("\n"), "    // K/V: KV head bh / GROUP, its rows from (bh / GROUP) * (P + C) of the K/V tensor maps"),):
        assert old in kernel, old
        kernel = kernel.replace(old, new)
    kernel = warp_specialize(kernel, WS_SIG, "blockIdx.x * C + m0", "bh / GROUP * (P + C)")
    return kernel.replace("@MASK@", mask) + ws_host(
        kind_of(task), ENTRY.host_head(task), "chunked_prefill_kernel", "dim3(B * NUM_HEADS, C / BLOCK_M)",
        ("B * NUM_HEADS * C", "B * (NUM_HEADS / GROUP) * (P + C)"), "o, B, C, P")
