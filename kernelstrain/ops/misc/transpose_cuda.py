"""2-D transpose in CUDA: out[c, r] = in[r, c] for a row-major [R, C] matrix.

Ladder: one element per thread (reads coalesced, writes strided by R) -> 32x32 shared-memory
tile (both sides coalesced, 16-way bank conflicts on the column read) -> the same tile padded
by one element per row (conflict-free) -> 64x64 tiles moved as 4-byte pairs, each thread
covering several rows -> TMA: cp.async.bulk.tensor loads/stores of 128B-swizzled 64x64 tiles,
several tiles in flight per CTA (sm_90).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from .transpose_spec import TransposeSpec

BLOCK_ROWS = Param("block_rows", (8, 16, 32), 8)
BARRIER = "\n    __syncthreads();"
NO_BARRIER = {"barrier": ""}
TMA_INCLUDE = ("#include <cuda.h>  // CUtensorMap and its enums (the encoder is fetched at run time)",)


def host(grid: str, block: str, prologue: str = "") -> str:
    return f"""
void transpose(const scalar_t* x, scalar_t* out, int R, int C, cudaStream_t stream) {{
{prologue}    transpose_kernel<<<{grid}, {block}, 0, stream>>>(x, out, R, C);
}}
"""


# -- naive_uncoalesced ---------------------------------------------------------------------
def naive_uncoalesced_launch(p, task):
    r, c, rows = task["R"], task["C"], p["block_rows"]
    # each warp store touches 32 sectors for 64 useful bytes; L2 merges most partial
    # sectors before write-back, but not all of them
    return Launch(grid=cdiv(c, 32) * cdiv(r, rows), threads=32 * rows, regs=12,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.5)


def naive_uncoalesced_src(p, task, rows="R"):
    return f"""
#define BLOCK_ROWS {p['block_rows']}

// threadIdx.x walks a row: the load is coalesced, but the store of a warp lands in 32
// different output rows, R elements apart.
extern "C" __global__ void transpose_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                            int R, int C) {{
    const int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * BLOCK_ROWS + threadIdx.y;
    if (r < {rows} && c < C) out[(size_t)c * R + r] = in[(size_t)r * C + c];
}}
{host("dim3((C + 31) / 32, (R + BLOCK_ROWS - 1) / BLOCK_ROWS)", "dim3(32, BLOCK_ROWS)")}"""


# -- smem_tile, padded_tile -----------------------------------------------------------------
# The tile rungs' load loop (TILE / BLOCK_ROWS trips a thread, its trip count unknown to the compiler: the loop
# starts at threadIdx.y) as nvcc 13 -O3 compiles it for sm_90a: unrolled 4x, four loads issued before the first
# shared store (SASS: 4 LDG in the body, 1 in the remainder, at tile 32 and 64 and every BLOCK_ROWS). A block waits
# cdiv(trips, 4) DRAM round trips in turn before its barrier (Launch.rounds: the latency chain of a grid of one
# or few waves). H100 (measurements/h100_sim2_fit.json), R = C = 1024 bf16, 256 tiles of 64 (one wave):
# BLOCK_ROWS 8 (2 round trips) 5.0 us, 4 (4) 6.2; tiles of 32: 8 (1) 4.7, 4 (2) 5.0; at 4096 x 4096 (many
# waves: the chains overlap) 27.2-27.8 us whatever BLOCK_ROWS. The model had them level at 1024.
UNROLLED_LOADS = 4


def load_rounds(tile: int, block_rows: int) -> int:
    return cdiv(cdiv(tile, block_rows), UNROLLED_LOADS)


def tile32_launch(pad: int):
    """Launch model of the 32x32 shared tile, `pad` extra columns per tile row."""
    def launch(p, task):
        r, c, elt = task["R"], task["C"], DTYPE_BYTES[task.dtype]
        return Launch(grid=cdiv(c, 32) * cdiv(r, 32), threads=32 * p["block_rows"],
                      smem_bytes=32 * (32 + pad) * elt, regs=32, bytes_per_access=elt,
                      rounds=load_rounds(32, p["block_rows"]))
    return launch


def tile32_src(pad: int):
    """Render of the 32x32 shared tile, `pad` extra columns per tile row."""
    return lambda p, task, barrier=BARRIER: _tile32(p, barrier, pad)


def _tile32(p, barrier: str, pad: int) -> str:
    why = ("// The row stride is 33 elements (16.5 words): a column read by 32 lanes spreads over all\n"
           "// 32 banks instead of piling onto two." if pad else
           "// A column read strides 64 bytes: the 32 lanes fall on 2 banks, a 16-way conflict.")
    return f"""
#define TILE 32
#define BLOCK_ROWS {p['block_rows']}

// Stage a 32x32 tile in shared memory so the global reads and the global writes both walk
// rows; each thread moves TILE / BLOCK_ROWS elements each way.
{why}
extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int R, int C) {{
    __shared__ scalar_t tile[TILE][TILE{" + 1" if pad else ""}];
    const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {{
        const int r = r0 + j, c = c0 + threadIdx.x;
        if (r < R && c < C) tile[j][threadIdx.x] = in[(size_t)r * C + c];
    }}{barrier}
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {{
        const int c = c0 + j, r = r0 + threadIdx.x;      // output row c, column r
        if (c < C && r < R) out[(size_t)c * R + r] = tile[threadIdx.x][j];
    }}
}}
{host("dim3((C + TILE - 1) / TILE, (R + TILE - 1) / TILE)", "dim3(TILE, BLOCK_ROWS)")}"""


# -- vectorized_multi_row ------------------------------------------------------------------
def vectorized_multi_row_launch(p, task):
    tile = p["tile"]
    return Launch(grid=cdiv(task["C"], tile) * cdiv(task["R"], tile), threads=tile // 2 * p["block_rows"],
                  smem_bytes=tile * (tile + 1) * DTYPE_BYTES[task.dtype], regs=32, bytes_per_access=4,
                  rounds=load_rounds(tile, p["block_rows"]))


def vectorized_multi_row_src(p, task, barrier=BARRIER, first="threadIdx.y"):
    return f"""
#define TILE {p['tile']}
#define BLOCK_ROWS {p['block_rows']}
union Pair {{ uint32_t u; scalar_t h[2]; }};  // two 16-bit elements, one 4-byte access

// Thread (x, y) moves element pairs: it loads in[r][c0 + 2x .. 2x+1] for rows y, y + BLOCK_ROWS, ...
// and stores out[c][r0 + 2x .. 2x+1], gathering the pair from tile rows 2x and 2x+1.
// R and C are even. The +1 pad makes the row stride odd in words when two rows are read
// per lane: lanes 2x land on distinct banks.
extern "C" __global__ void __launch_bounds__(TILE / 2 * BLOCK_ROWS)
transpose_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int R, int C) {{
    __shared__ scalar_t tile[TILE][TILE + 1];
    const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE, x2 = 2 * threadIdx.x;
#pragma unroll
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {{
        const int r = r0 + j, c = c0 + x2;
        if (r < R && c < C) {{
            Pair v;
            v.u = *reinterpret_cast<const uint32_t*>(in + (size_t)r * C + c);
            tile[j][x2] = v.h[0];
            tile[j][x2 + 1] = v.h[1];
        }}
    }}{barrier}
#pragma unroll
    for (int j = {first}; j < TILE; j += BLOCK_ROWS) {{
        const int c = c0 + j, r = r0 + x2;
        if (c < C && r < R) {{
            Pair v;
            v.h[0] = tile[x2][j];
            v.h[1] = tile[x2 + 1][j];
            *reinterpret_cast<uint32_t*>(out + (size_t)c * R + r) = v.u;
        }}
    }}
}}
{host("dim3((C + TILE - 1) / TILE, (R + TILE - 1) / TILE)", "dim3(TILE / 2, BLOCK_ROWS)")}"""


# -- tma_swizzled --------------------------------------------------------------------------
def tma_swizzled_launch(p, task):
    tiles, per_cta, threads = cdiv(task["R"], 64) * cdiv(task["C"], 64), p["tiles_per_cta"], p["threads"]
    # async copies: a CTA keeps per_cta 8 KB tile loads in flight, not one access per thread
    return Launch(grid=cdiv(tiles, per_cta), threads=threads, smem_bytes=(per_cta + 2) * 8192 + 8 * per_cta,
                  regs=48, bytes_per_access=per_cta * 8192 // threads)


def tma_swizzled_src(p, task, wait="\n        mbarrier_wait(&bars[k], 0);"):
    return f"""
#define TILES_PER_CTA {p['tiles_per_cta']}
#define THREADS {p['threads']}
constexpr int TILE = 64;                       // 64 x 16-bit = one 128-byte swizzle row
constexpr int TILE_BYTES = TILE * TILE * 2;

// --- PTX wrappers: mbarrier + bulk tensor copies (sm_90) ---------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {{ return (uint32_t)__cvta_generic_to_shared(p); }}
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count));
}}
__device__ __forceinline__ void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t phase) {{
    asm volatile("{{\\n .reg .pred done;\\n wait_%=:\\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\\n"
                 " @!done bra wait_%=;\\n}}" :: "r"(smem_addr(bar)), "r"(phase) : "memory");
}}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {{%2, %3}}], [%4];"
                 :: "r"(smem_addr(dst)), "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar)) : "memory");
}}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, int x, int y, const void* src) {{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {{%1, %2}}], [%3];"
                 :: "l"(map), "r"(x), "r"(y), "r"(smem_addr(src)) : "memory");
}}

// 128B swizzle: 16-byte chunk q of row r sits at chunk q ^ (r % 8) (tiles are 1024-aligned).
__device__ __forceinline__ int swz(int row, int byte) {{ return row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15); }}

// Each CTA owns TILES_PER_CTA consecutive 64x64 tiles. Thread 0 issues all their TMA loads
// up front; per tile the threads transpose smem -> smem (8 two-byte reads down a column,
// one 16-byte swizzled write: conflict-free both ways), then thread 0 TMA-stores the
// result while the next tile is transposed into the other output buffer.
extern "C" __global__ void __launch_bounds__(THREADS)
transpose_kernel(const __grid_constant__ CUtensorMap in_map, const __grid_constant__ CUtensorMap out_map,
                 int R, int C) {{
    __shared__ __align__(1024) uint8_t in_tiles[TILES_PER_CTA][TILE_BYTES];
    __shared__ __align__(1024) uint8_t out_tiles[2][TILE_BYTES];
    __shared__ uint64_t bars[TILES_PER_CTA];
    const int tiles_c = (C + TILE - 1) / TILE, tiles = tiles_c * ((R + TILE - 1) / TILE);
    const int first = blockIdx.x * TILES_PER_CTA;
    const int count = min(TILES_PER_CTA, tiles - first);
    if (threadIdx.x == 0) {{
        for (int k = 0; k < count; ++k) mbarrier_init(&bars[k], 1);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // inits visible to the TMA unit
        for (int k = 0; k < count; ++k) {{
            const int t = first + k;
            mbarrier_expect_tx(&bars[k], TILE_BYTES);
            tma_load(in_tiles[k], &in_map, (t % tiles_c) * TILE, (t / tiles_c) * TILE, &bars[k]);
        }}
    }}
    __syncthreads();
    for (int k = 0; k < count; ++k) {{
        const int t = first + k;
        const uint8_t* src = in_tiles[k];
        uint8_t* dst = out_tiles[k & 1];{wait}
        for (int w = threadIdx.x; w < TILE * TILE / 8; w += THREADS) {{
            const int c = w % TILE, g = w / TILE;               // output row c, elements 8g .. 8g+7
            union {{ uint4 u; uint16_t h[8]; }} v;
#pragma unroll
            for (int j = 0; j < 8; ++j) v.h[j] = *reinterpret_cast<const uint16_t*>(src + swz(8 * g + j, 2 * c));
            *reinterpret_cast<uint4*>(dst + swz(c, 16 * g)) = v.u;
        }}
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");    // generic writes -> async proxy
        __syncthreads();
        if (threadIdx.x == 0) {{
            tma_store(&out_map, (t / tiles_c) * TILE, (t % tiles_c) * TILE, dst);
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");  // buffer k+1 is free again
        }}
        __syncthreads();
    }}
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}}

typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A [rows, cols] row-major 16-bit matrix seen in 64x64 boxes with the 128-byte swizzle.
static CUtensorMap tile_map(EncodeTiled encode, const void* base, int rows, int cols) {{
    CUtensorMap map;
    const cuuint64_t dims[2] = {{(cuuint64_t)cols, (cuuint64_t)rows}}, strides[1] = {{(cuuint64_t)cols * 2}};
    const cuuint32_t box[2] = {{TILE, TILE}}, step[2] = {{1, 1}};
    encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides, box, step,
           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
}}

void transpose(const scalar_t* x, scalar_t* out, int R, int C, cudaStream_t stream) {{
    static EncodeTiled encode = nullptr;
    if (encode == nullptr) {{
        cudaDriverEntryPointQueryResult found;
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                         cudaEnableDefault, &found);
    }}
    const CUtensorMap in_map = tile_map(encode, x, R, C), out_map = tile_map(encode, out, C, R);
    const int tiles = ((R + TILE - 1) / TILE) * ((C + TILE - 1) / TILE);
    transpose_kernel<<<(tiles + TILES_PER_CTA - 1) / TILES_PER_CTA, THREADS, 0, stream>>>(in_map, out_map, R, C);
}}
"""


class TransposeCuda(TransposeSpec):
    impl = "cuda"
    variants = (
        Rung("naive_uncoalesced", "thread per element: coalesced reads, every write R elements apart",
             (Param("block_rows", (4, 8, 16, 32), 8),), memory_eff=0.18,
             launch=naive_uncoalesced_launch, render=naive_uncoalesced_src, bugs={"off_by_one": {"rows": "R - 1"}}),
        Rung("smem_tile", "32x32 shared tile: coalesced both ways, column reads hit 16-way bank conflicts",
             (BLOCK_ROWS,), memory_eff=0.62, smem="static",
             launch=tile32_launch(0), render=tile32_src(0), bugs={"missing_barrier": NO_BARRIER}),
        Rung("padded_tile", "the 32x32 tile padded to 33 columns: column reads conflict-free",
             (BLOCK_ROWS,), memory_eff=0.86, smem="static",
             launch=tile32_launch(1), render=tile32_src(1), bugs={"missing_barrier": NO_BARRIER}),
        Rung("vectorized_multi_row", "TILE x TILE padded tile moved as 4-byte element pairs, TILE/block_rows rows per thread",
             (Param("tile", (32, 64, 128), 64), Param("block_rows", (2, 4, 8, 16), 8)), memory_eff=0.76, smem="static",
             launch=vectorized_multi_row_launch, render=vectorized_multi_row_src,
             bugs={"missing_barrier": NO_BARRIER, "off_by_one": {"first": "threadIdx.y + BLOCK_ROWS"}}),
        Rung("tma_swizzled", "TMA loads/stores of 128B-swizzled 64x64 tiles, tiles_per_cta loads in flight",
             (Param("tiles_per_cta", (1, 2, 4), 2), Param("threads", (128, 256), 128)),
             needs=frozenset({"tma", "inline_ptx"}), memory_eff=0.77, smem="static",
             launch=tma_swizzled_launch, render=tma_swizzled_src, bugs={"missing_barrier": {"wait": ""}},
             # not waiting for the tile's TMA load races the copy: 64 CTAs of 4 tiles (R = C = 1024) passed 2 of 3
             # runs on an H100; 256 CTAs and more failed every run (labels j1/j2, measurements/h100_label_device.json)
             bug_tasks=(("missing_barrier", lambda t, p: t["R"] * t["C"] // (64 * 64 * p["tiles_per_cta"]) >= 256),)),
    )

    def assemble(self, body, variant, params, task):
        extra = TMA_INCLUDE if "tma" in variant.needs else ()
        return f"{prelude(task, extra)}\n{body}"
