"""The split-row rung of min_p_cuda (not an op module): SPLIT blocks per row compute max and
kept-mass partials in two kernels, and a combine kernel picks the slice where the CDF crosses
uniform x mass and walks only that slice. Also the pieces the other min_p_cuda rungs share:
the threshold slot, the float4 kept weight and the float4 pick of one chunk.
"""
from textwrap import indent

from ..base import Launch, cdiv
from ._sampling import row_l2_miss
from ._select import block_incl_scan
from .min_p_spec import ENTRY

THRESH = "M + logf(min_p[row_id])"            # p >= min_p * p_max  <=>  x >= M + log(min_p)
W4 = "key_of(xs[j]) >= thresh ? expf(xs[j] - M) : 0.f"
PICK4 = """        float w[4], local = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) { w[j] = c < hi ? (key_of(xs[j]) >= thresh ? expf(xs[j] - M) : 0.f) : 0.f; local += w[j]; }
        float total;
        float excl = carry + block_incl_scan(local, fbuf, &total) - local;
#pragma unroll
        for (int j = 0; j < 4; ++j) { if (w[j] > 0.f && excl < target) atomicMax(&pick, 4 * c + j); excl += w[j]; }"""



def select_part(prefix: str = "acc") -> str:
    """Device function select_part: thread 0 finds the part (chunk or slice) where the CDF of the
    part masses crosses uniform x total, and the mass before it (`prefix`: the carry expression)."""
    return f"""
__device__ __forceinline__ void select_part(const float* mass, int n, float u, int* s_sel, float* s_carry,
                                            float* s_target) {{
    float total = 0.f;
    for (int i = 0; i < n; ++i) total += mass[i];
    const float target = u * total;
    float acc = 0.f;
    int sel = 0;
    for (int i = 0; i < n; ++i) {{                             // the first part whose end reaches target
        if (mass[i] > 0.f) {{ sel = i; *s_carry = {prefix}; }}
        acc += mass[i];
        if (mass[i] > 0.f && acc >= target) break;
    }}
    *s_sel = sel;
    *s_target = target;
}}
"""


# -- split_row_combine -------------------------------------------------------------------------
def split_launch(p, task):
    """Three launches (max, mass, combine), or two where the mass kernel's last block of a row combines."""
    th, sp = p["threads"], p["split"]
    return Launch(grid=task["B"] * sp, threads=th, smem_bytes=4 * cdiv(th, task.gpu.warp) + 16, regs=40,
                  bytes_per_access=16, traffic=1 + 1.0 * row_l2_miss(task, th) + 1.0 / sp, compute_scale=0.8,
                  launches=3 - p.get("last_combine", 0))


def split_helpers(p, task, prefix: str) -> str:
    """SPLIT, the block scan and part selection, the float4 range of a slice and the row max from its partials."""
    return f"""#define SPLIT {p['split']}                 // blocks per row
{block_incl_scan(task, True)}{select_part(prefix)}
__device__ __forceinline__ void slice_of(int V, int s, int* lo, int* hi) {{   // float4 range of slice s
    const int per = (V / 4 + SPLIT - 1) / SPLIT;
    *lo = min(V / 4, s * per);
    *hi = min(V / 4, *lo + per);
}}
__device__ __forceinline__ float row_max_of(const float* part_max, int row_id) {{
    float M = -INFINITY;
    for (int j = 0; j < SPLIT; ++j) M = fmaxf(M, part_max[row_id * SPLIT + j]);
    return M;
}}
"""


def max_kernel(count: bool = False) -> str:
    """Kernel 1, grid (SPLIT, B): the max of each slice (`count`: slice 0 also zeroes the row's arrival count)."""
    arg, zero = ("int* __restrict__ count, ", "\n    if (blockIdx.x == 0 && threadIdx.x == 0) count[blockIdx.y] = 0;   "
                 "// the mass kernel counts up") if count else ("", "")
    return f"""// kernel 1, grid (SPLIT, B): the max of each slice
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_max_kernel(const float* __restrict__ logits, float* __restrict__ part_max, {arg}int V) {{
    __shared__ float slots[WARPS];
    int lo, hi;
    slice_of(V, blockIdx.x, &lo, &hi);
    const float4* row4 = reinterpret_cast<const float4*>(logits + (size_t)blockIdx.y * V);
    float mx = -INFINITY;
    for (int c = lo + threadIdx.x; c < hi; c += THREADS) {{ const float4 v = row4[c]; mx = fmaxf(mx, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w))); }}
    mx = block_max(mx, slots);
    if (threadIdx.x == 0) part_max[blockIdx.y * SPLIT + blockIdx.x] = mx;{zero}
}}
"""


def mass_body(thresh: str) -> str:
    """Kernel 2's statements up to `kept`, block (slice, row_id)'s kept mass: the row max from the partials, then
    the slice's kept weights summed over the block."""
    return f"""    __shared__ float slots[WARPS];
    const int row_id = blockIdx.y;
    int lo, hi;
    slice_of(V, blockIdx.x, &lo, &hi);
    const float4* row4 = reinterpret_cast<const float4*>(logits + (size_t)row_id * V);
    const float M = row_max_of(part_max, row_id);
    const uint32_t thresh = key_of({thresh});
    float kept = 0.f;
    for (int c = lo + threadIdx.x; c < hi; c += THREADS) {{
        const float4 v = row4[c];
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
        for (int j = 0; j < 4; ++j) kept += {W4};
    }}
    kept = block_sum(kept, slots);
"""


def combine_body(thresh: str) -> str:
    """The combine's statements for the block of row `row_id` (its fbuf, pick, s_slice, s_carry and s_target in
    shared memory): thread 0 picks the slice where the CDF of the slice masses crosses uniform x mass, then the
    block walks that slice only."""
    return f"""    const float4* row4 = reinterpret_cast<const float4*>(logits + (size_t)row_id * V);
    const float* mass = part_mass + row_id * SPLIT;
    if (threadIdx.x == 0) {{
        select_part(mass, SPLIT, uniform[row_id], &s_slice, &s_carry, &s_target);
        pick = -1;
    }}
    __syncthreads();
    const float M = row_max_of(part_max, row_id);
    const uint32_t thresh = key_of({thresh});
    const float target = s_target;
    float carry = s_carry;
    int lo, hi;
    slice_of(V, s_slice, &lo, &hi);
    for (int start = lo; start < hi; start += THREADS) {{
        const int c = start + threadIdx.x;
        const float4 v = c < hi ? row4[c] : make_float4(0.f, 0.f, 0.f, 0.f);
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
{PICK4}
        carry += total;
        if (carry >= target) break;
    }}
    __syncthreads();
    if (threadIdx.x == 0) tokens[row_id] = pick;
"""


def split_row_combine_src(p, task, thresh=THRESH, prefix="acc"):
    return f"""{split_helpers(p, task, prefix)}
{max_kernel()}
// kernel 2, grid (SPLIT, B): the row max from the partials, then the kept mass of each slice
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_mass_kernel(const float* __restrict__ logits, const float* __restrict__ min_p, const float* __restrict__ part_max,
                  float* __restrict__ part_mass, int V) {{
{mass_body(thresh)}    if (threadIdx.x == 0) part_mass[row_id * SPLIT + blockIdx.x] = kept;
}}

// kernel 3 (the combine), block per row: the slice where the CDF crosses uniform x mass, then
// an inverse-CDF walk through that slice only
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_kernel(const float* __restrict__ logits, const float* __restrict__ min_p, const float* __restrict__ uniform,
             const float* __restrict__ part_max, const float* __restrict__ part_mass, int* __restrict__ tokens, int V) {{
    __shared__ float fbuf[WARPS];
    __shared__ int pick, s_slice;
    __shared__ float s_carry, s_target;
    const int row_id = blockIdx.x;
{combine_body(thresh)}}}

{ENTRY.host_head(task)} {{
    float* part = nullptr;                                    // B x SPLIT maxima, then B x SPLIT masses
    cudaMallocAsync((void**)&part, 2 * (size_t)B * SPLIT * sizeof(float), stream);
    min_p_max_kernel<<<dim3(SPLIT, B), THREADS, 0, stream>>>(logits, part, V);
    min_p_mass_kernel<<<dim3(SPLIT, B), THREADS, 0, stream>>>(logits, min_p, part, part + B * SPLIT, V);
    min_p_kernel<<<B, THREADS, 0, stream>>>(logits, min_p, uniform, part, part + B * SPLIT, tokens, V);
    cudaFreeAsync(part, stream);
}}
"""




# -- last_combine 1 -----------------------------------------------------------------------------
def split_last_combine_src(p, task, thresh=THRESH, prefix="acc"):
    return f"""{split_helpers(p, task, prefix)}
{max_kernel(count=True)}
// kernel 2, grid (SPLIT, B): the kept mass of each slice; the row's last block to count itself in is its combine
// (the threadFenceReduction pattern: each block's mass is made visible device-wide before its count, so the last
// one reads every mass), and the row needs no third launch
extern "C" __global__ void __launch_bounds__(THREADS)
min_p_kernel(const float* __restrict__ logits, const float* __restrict__ min_p, const float* __restrict__ uniform,
             const float* __restrict__ part_max, float* __restrict__ part_mass, int* __restrict__ count,
             int* __restrict__ tokens, int V) {{
{mass_body(thresh)}    __shared__ bool last;
    if (threadIdx.x == 0) {{
        part_mass[row_id * SPLIT + blockIdx.x] = kept;
        __threadfence();
        last = atomicAdd(&count[row_id], 1) == SPLIT - 1;
    }}
    __syncthreads();
    if (!last) return;
    __threadfence();
    __shared__ float fbuf[WARPS];
    __shared__ int pick, s_slice;
    __shared__ float s_carry, s_target;
    {{                                                        // the combine, in its own scope
{indent(combine_body(thresh), "    ")}    }}
}}

{ENTRY.host_head(task)} {{
    float* part = nullptr;                                    // B x SPLIT maxima, B x SPLIT masses, B counts
    cudaMallocAsync((void**)&part, (2 * (size_t)B * SPLIT + B) * sizeof(float), stream);
    int* count = reinterpret_cast<int*>(part + 2 * (size_t)B * SPLIT);
    min_p_max_kernel<<<dim3(SPLIT, B), THREADS, 0, stream>>>(logits, part, count, V);
    min_p_kernel<<<dim3(SPLIT, B), THREADS, 0, stream>>>(logits, min_p, uniform, part, part + B * SPLIT, count,
                                                         tokens, V);
    cudaFreeAsync(part, stream);
}}
"""
