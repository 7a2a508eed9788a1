"""The chunk_mass_pick rung of min_p_cuda with VECS float4s a thread a chunk (not an op module): a
chunk of 4 x VECS x THREADS logits costs one block sum in the kept-mass pass, so wider chunks pay
fewer barriers a row and keep VECS loads in flight a thread; the crossing chunk the pick re-reads
grows with them."""


def chunk_vecs_kernel(vecs: int, args: str, max4: str, thresh: str, w4: str) -> str:
    """The kernel for vecs > 1: `thresh` is the slot of missing_scale, `w4` the kept weight of xs[j]."""
    return f"""#define VECS {vecs}                   // float4s a thread in each chunk
// Block per row. Pass 1: max. Pass 2: kept mass of every 4 x VECS x THREADS chunk into shared memory
// (a thread's VECS float4s THREADS apart: coalesced). Thread 0 scans the chunk masses to the chunk where
// the CDF crosses uniform x mass; pass 3 re-reads that chunk, VECS consecutive float4s a thread.
extern "C" __global__ void __launch_bounds__(THREADS) min_p_kernel({args}) {{
    __shared__ float cmass[1024];                            // V / (4 * VECS * THREADS) chunks
    __shared__ float fbuf[WARPS];
    __shared__ float slots[WARPS];
    __shared__ int pick, s_chunk;
    __shared__ float s_carry, s_target;
    const int row_id = blockIdx.x;
    const float* row = logits + (size_t)row_id * V;
    if (threadIdx.x == 0) pick = -1;
    float mx = -INFINITY;
    {max4}
    const float M = block_max(mx, slots);
    const uint32_t thresh = key_of({thresh});
    const int nchunks = (V / 4 + THREADS * VECS - 1) / (THREADS * VECS);
    for (int ch = 0; ch < nchunks; ++ch) {{
        float local = 0.f;
#pragma unroll
        for (int q = 0; q < VECS; ++q) {{
            const int c = (ch * VECS + q) * THREADS + threadIdx.x;
            if (c < V / 4) {{
                const float4 v = row4[c];
                const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
                for (int j = 0; j < 4; ++j) local += {w4};
            }}
        }}
        const float s = block_sum(local, slots);
        if (threadIdx.x == 0) cmass[ch] = s;
    }}
    if (threadIdx.x == 0) select_part(cmass, nchunks, uniform[row_id], &s_chunk, &s_carry, &s_target);
    __syncthreads();
    const int c0 = (s_chunk * THREADS + threadIdx.x) * VECS, hi = V / 4;
    const float target = s_target, carry = s_carry;
    float w[4 * VECS], local = 0.f;
#pragma unroll
    for (int q = 0; q < VECS; ++q) {{
        const float4 v = c0 + q < hi ? row4[c0 + q] : make_float4(0.f, 0.f, 0.f, 0.f);
        const float xs[4] = {{v.x, v.y, v.z, v.w}};
#pragma unroll
        for (int j = 0; j < 4; ++j) {{ w[4 * q + j] = c0 + q < hi ? ({w4}) : 0.f; local += w[4 * q + j]; }}
    }}
    float total;
    float excl = carry + block_incl_scan(local, fbuf, &total) - local;
#pragma unroll
    for (int j = 0; j < 4 * VECS; ++j) {{ if (w[j] > 0.f && excl < target) atomicMax(&pick, 4 * c0 + j); excl += w[j]; }}
    __syncthreads();
    if (threadIdx.x == 0) tokens[row_id] = pick;
}}"""
