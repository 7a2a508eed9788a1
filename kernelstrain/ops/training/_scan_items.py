"""The block-per-row warp-shuffle scan of prefix_scan_cuda with ITEMS 16-byte vectors a thread (not
an op module itself): a thread loads its ITEMS contiguous vectors first, scans them in registers,
and the block scans the thread totals once a tile, so a tile ITEMS times as long pays its two
barriers and shuffle rounds once for ITEMS times the elements."""


def warp_shuffle_items_src(items: int, helpers: str, sig: str, host: str, init: str) -> str:
    """The rung's code for items > 1; `helpers` carries the scan's off_by_one slot, `init` its wrong_init."""
    return f"""#define ITEMS {items}                  // 16-byte vectors per thread, contiguous
{helpers}
// One block per row, THREADS * VEC * ITEMS elements per tile: each thread loads ITEMS 16-byte
// vectors, scans them in registers, the thread totals are scanned with shuffles, warp totals via smem.
{sig} {{
    __shared__ float warp_sums[WARPS];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    float carry = {init};
    for (int base = 0; base < C; base += THREADS * VEC * ITEMS) {{
        const int j0 = base + threadIdx.x * VEC * ITEMS;
        Pack in[ITEMS];
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {{
            in[it].u = make_uint4(0u, 0u, 0u, 0u);
            if (j0 + it * VEC < C) in[it].u = *reinterpret_cast<const uint4*>(xr + j0 + it * VEC);
        }}
        float v[ITEMS][VEC], s = 0.f;
#pragma unroll
        for (int it = 0; it < ITEMS; ++it)
#pragma unroll
            for (int k = 0; k < VEC; ++k) {{ s += to_float(in[it].h[k]); v[it][k] = s; }}
        float total;
        const float before = carry + block_exclusive_scan(s, warp_sums, &total);
#pragma unroll
        for (int it = 0; it < ITEMS; ++it) {{
            if (j0 + it * VEC >= C) break;
            Pack out;
#pragma unroll
            for (int k = 0; k < VEC; ++k) out.h[k] = from_float(before + v[it][k]);
            *reinterpret_cast<uint4*>(yr + j0 + it * VEC) = out.u;
        }}
        carry += total;
    }}
}}
{host}"""
