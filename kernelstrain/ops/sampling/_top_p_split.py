"""top_p_cuda's split_mass_hist rung (not an op module itself): the mass histogram split over CTAs.

Every one-block-a-row rung spends most of its time in pass 1, one block bumping 2 x V shared-memory
atomics into the few 11-bit key bins that random logits fill (an H100 ran vectorized_float4 at 512
threads in 58.7 us on one 32000-logit row, 134 us at 128 threads: the bumps of a bin are applied one at
a time, and a row's are all on one SM). Here stage 1 (grid chunks x B) builds each SLICE's count and
edge-relative mass histogram in its own shared memory with 16-byte loads and adds its non-empty bins
to the row's global histogram (a few dozen global atomics a CTA) and its max to the row's max key;
stage 2 (one block a row) reads the merged histogram and finishes as vectorized_float4 does: CDF over
bins, the boundary bin's keys compacted to shared memory and refined, the inverse-CDF pick. The
histogram privatised per CTA and merged with global atomics is CUB's DeviceHistogram and the
multi-CTA radix select's first pass (TensorRT-LLM and FlashInfer split a row over CTAs for small
batches likewise).
"""
from ..base import Launch, Param, cdiv
from ._sampling import row_l2_miss
from ._select import mass_pass

# An H100 (scripts/roomM_device.py m3, docs/roomM_device_h100_m3/, 512 threads, 22 configs): stage 1's CTAs of one SM
# one after another, each STAGE1_CTA_S plus 2 x SLICE contended shared-memory bumps at SMEM_ATOMIC_S; stage 2
# STAGE2_ELEM_S a logit of its row (the boundary bin's compaction and the pick, one block a row) at 512 threads, twice
# that at 256 (half the threads walk the same row), no faster at 1024; STAGE_OVERHEAD_S for the scratch's
# allocation and zeroing beside the launches. Fitted in log space: slices 2048 / 4096 / 8192 / 16384 ran 28.7 / 30.4 /
# 40.4 / 50.6 us at B=1 V=32000 (model 31.1 / 33.5 / 38.4 / 48.3), 229.0 / 229.6 / 215.7 / 146.0 at B=64 V=128256
# (187.7 / 175.2 / 167.2 / 163.2), 494.3 / 461.0 / 457.4 / 456.3 at B=256 (576 / 524 / 498 / 482); vectorized_float4
# 57.5 / 299.4 / 465.5 us there (B=8 V=128256: 73.6 us at slice 4096 against 254.7)
SMEM_ATOMIC_S = 0.6e-9
STAGE1_CTA_S = 1.0e-6
STAGE2_ELEM_S = 0.55e-9
STAGE_OVERHEAD_S = 4.5e-6

# 128 threads left out: 256 already ran 1.2-1.9x slower than 512 at B=1, 8 and 64 (stage 2 walks its row with half the
# threads); 1024 ran 0.95x at B=64, 1.03x at B=1 and 1.58x at B=8
SPLIT_THREADS = Param("threads", (256, 512, 1024), 512)

ARGS2 = ("int V, const float* __restrict__ g_mass, const unsigned* __restrict__ g_cnt,\n"
         "             const unsigned* __restrict__ g_max")

MERGE_ADD = "atomicAdd(&gm[b], mass[b]); atomicAdd(&gc[b], cnt[b]);"


def stage1(p, task, merge: str = MERGE_ADD) -> str:
    return f"""#define SLICE {p['slice']}                // logits per CTA of stage 1 (a multiple of 4)

// Stage 1: this CTA's SLICE logits of row blockIdx.y into a private histogram (count and mass
// relative to each bin's lower edge), its non-empty bins then added to the row's global one.
extern "C" __global__ void __launch_bounds__(THREADS)
top_p_hist_kernel(const float* __restrict__ logits, int Vrow, float* __restrict__ g_mass,
                  unsigned* __restrict__ g_cnt, unsigned* __restrict__ g_max) {{
    __shared__ float mass[2048];
    __shared__ unsigned cnt[2048];
    __shared__ float slots[WARPS];
    const int r = blockIdx.y, first = blockIdx.x * SLICE;
    const float* row = logits + (size_t)r * Vrow + first;
    const int V = min(SLICE, Vrow - first);                  // this CTA's logits
    for (int i = threadIdx.x; i < 2048; i += THREADS) {{ mass[i] = 0.f; cnt[i] = 0u; }}
    __syncthreads();
    float mx = -INFINITY;
    {mass_pass("float4", False)}
    __syncthreads();
    const float m = block_max(mx, slots);
    float* gm = g_mass + (size_t)r * 2048;
    unsigned* gc = g_cnt + (size_t)r * 2048;
    for (int b = threadIdx.x; b < 2048; b += THREADS)
        if (cnt[b]) {{ {merge} }}
    if (threadIdx.x == 0) atomicMax(&g_max[r], key_of(m));     // keys order as the floats do
}}
"""


# stage 2's start: the merged histogram and the row max instead of its own pass 1
FILL = """    const float* gm = g_mass + (size_t)blockIdx.x * 2048;
    const unsigned* gc = g_cnt + (size_t)blockIdx.x * 2048;
    for (int i = threadIdx.x; i < 2048; i += THREADS) { mass[i] = gm[i]; cnt[i] = gc[i]; }
    if (threadIdx.x == 0) { pick = -1; n_c = 0u; }
    __syncthreads();
    const float M = float_of_key(g_max[blockIdx.x]);"""

HOST = """
void top_p_sampling(const float* logits, const float* top_p, const float* uniform, int* tokens, int B, int V,
                    cudaStream_t stream) {
    const size_t bins = (size_t)B * 2048, bytes = bins * (sizeof(float) + sizeof(unsigned)) + B * sizeof(unsigned);
    char* scratch = nullptr;                                  // per row: mass[2048], cnt[2048], max key
    cudaMallocAsync((void**)&scratch, bytes, stream);
    cudaMemsetAsync(scratch, 0, bytes, stream);
    float* g_mass = reinterpret_cast<float*>(scratch);
    unsigned* g_cnt = reinterpret_cast<unsigned*>(g_mass + bins);
    unsigned* g_max = g_cnt + bins;
    top_p_hist_kernel<<<dim3((V + SLICE - 1) / SLICE, B), THREADS, 0, stream>>>(logits, V, g_mass, g_cnt, g_max);
    top_p_kernel<<<B, THREADS, 0, stream>>>(logits, top_p, uniform, tokens, V, g_mass, g_cnt, g_max);
    cudaFreeAsync(scratch, stream);
}
"""


def split_src(program, select_kernel, need0: str):
    """The rung's render: stage 1 and stage 2 (top_p_cuda's select kernel in float4 mode on the merged
    histogram); program and select_kernel are top_p_cuda's."""
    def render(p, task, need=need0, carry0="0.f"):
        stage2 = select_kernel(p, task, "float4", need, False, FILL, ARGS2)
        return program(task, True, True, stage1(p, task) + stage2, HOST, carry0)
    return render


def split_launch(p, task):
    """Stage 1 is the main kernel (one DRAM read of the row at 16 bytes a load); its time is set by the contended
    shared-memory bumps, not the roofline: the CTAs of the busiest SM in turn (issue_s). Stage 2, one block a row
    walking its row from L2, follows (later_s), a wave of rows at a time."""
    threads, chunk, b, v, gpu = p["threads"], p["slice"], task["B"], task["V"], task.gpu
    grid = b * cdiv(v, chunk)
    warps = cdiv(threads, gpu.warp)
    # the larger kernel's static smem: stage 2 (the float4 select: mass and count bins, CAP boundary keys, two slot
    # arrays, Sel and the pick) over stage 1's bins (ptxas sm_90a, 512 threads, CAP 2048: 24,732 B vs 16,448)
    smem = max(2 * 2048 * 4 + 4 * warps, 2 * 2048 * 4 + 4 * p["cap"] + 8 * warps + 28)
    stage1 = cdiv(grid, gpu.sms) * (STAGE1_CTA_S + 2 * min(chunk, v) * SMEM_ATOMIC_S)
    stage2 = cdiv(b, gpu.sms) * v * STAGE2_ELEM_S * max(1.0, 512 / threads) + STAGE_OVERHEAD_S
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=40, bytes_per_access=16,
                  traffic=1 + row_l2_miss(task, threads) + 2 * 8 * 2048 / (4 * v), launches=3,
                  issue_s=stage1, later_s=stage2)
