"""The launch model of gemv_cuda's warp rungs (one warp per row of W and its variants), and the
minimum bytes they are measured against."""
from ..base import Launch, DTYPE_BYTES, cdiv


def gemv_bytes(task) -> int:
    """W, x and y once each."""
    m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
    return (n * k + m * k + m * n) * e


L1_LOAD_COST = 0.16     # DRAM-byte equivalents of one L1-hit byte of x in a 16-byte load (H200 fit)
X_ISSUE = 0.41          # the 16-byte rungs' x loads and FMAs of one token, in W-stream times (H100: M=4 1.65x M=1)
def warp_launch(kind: str):
    """Launch model of the warp rungs: kind 'scalar' (warp_per_row), 'vec' (vectorized_uint4),
    'rows' (multi_row_warp) or 'split' (split_k_combine)."""
    def launch(p, task):
        m, n, k, e, warp = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype], task.gpu.warp
        base = gemv_bytes(task)
        threads, rows = p["warps"] * warp, p.get("rows_per_warp", 1)
        grid = cdiv(n, p["warps"] * rows)
        x_rereads = 1 + (m * k * e * grid / rows) / base * 0.02   # x from L2, mostly L1 hits
        # ... but each W load brings M / rows x loads of its width through the LSU: at M=8 the load pipe
        # binds (H200: warp_per_row ran 11x its DRAM time, uint4 2.3x = 1 + 0.16 x 8; a 2-byte load costs a
        # uint4's slot). The scalar rung's pipe carries its own 2-byte W loads too, and the pipe and DRAM work side by
        # side: the slower of the two binds, not their sum (warp_per_row at M=1, N and K 4096-14336, ran 38-40 us on
        # the H200 and 47-53 on the H100 where the sum modelled 63 / 90: 1.6-1.9x over in all 9 rows of the
        # s1717-s96969 gpu-checks; 1.15-1.3x its uint4 twin, as max(1.0, 1.28) over 1.16; M=4-8 within 0.96-1.04x
        # either way). The 16-byte rungs keep the sum, which their M=8 rows hold.
        lsu = lambda width: L1_LOAD_COST * m / rows * (16 / width)  # noqa: E731
        if kind == "scalar":
            return Launch(grid=grid, threads=threads, regs=28 + 2 * m, bytes_per_access=e,
                          traffic=max(x_rereads, lsu(e)), lane_util=min(1.0, k / warp))
        vec_lanes = min(1.0, k / (8 * warp))
        # The 16-byte rungs too: each W load's M / rows x loads (L1 hits) and their FMAs issue beside the DRAM
        # stream, and the slower side binds, smoothly (a 4-norm): at M=1 the W stream alone (H100, N x K = 4096 x
        # 14336 and 14336 x 4096: vectorized_uint4 and one-row multi_row_warp 40.6-42.7 us, 1.16-1.22x the bytes at
        # 3.35 TB/s, the fastest rungs of every seed; the old sum 1 + 0.16 M put them 1.11-1.16x slow behind
        # split_k_combine's 44.5-47.4), at M=4 1.65x that (uint4 29.1-29.5 us at N=6144 K=4096), at M=8 1.8-3.0x
        # (35.5 us at 4096^2, 82-85.5 at 8192^2): X_ISSUE x M / rows of the W stream's time.
        traffic = (x_rereads ** 4 + (X_ISSUE * m / rows) ** 4) ** 0.25
        if kind == "vec":
            return Launch(grid=grid, threads=threads, regs=24 + 3 * m, bytes_per_access=16,
                          traffic=traffic, lane_util=vec_lanes)
        regs = 24 + 4 * rows + 2 * m * rows          # R packed W chunks + R x M accumulators
        # W loads a lane has in flight per wait: nvcc 13 -O3 sm_90a SASS of the K loop (M=1 and M=4): one row a warp
        # (and vectorized_uint4) unrolls by 2-4 and issues 2 LDG.128 of W before the first use, as the model's
        # LOADS_IN_FLIGHT = 2 vectors of 16 bytes; 2 rows issue 2 (the second row's guarded load waits behind the
        # first trip's FMAs: no unroll helps), 4 rows issue 4. So R rows keep max(2, R) loads in flight, not 2 x R:
        # at M=1 the R-row warp halves or quarters the warps of the grid for the same loads a lane, and its bytes in
        # flight fall short of the DRAM's latency-bandwidth product (H100, M=1 N=4096 K=14336: rows_per_warp 2 ran
        # 51-53 us and 4 ran 47 where one row and uint4 ran 41-43, gpu-check s96969-s99199; H200 s1717: 2 rows
        # 45.4 against uint4's 31.1), which the old 16 x R bytes a load hid (model: rows 2 the fastest)
        per_wait = 16 * max(1, rows // 2)
        if kind == "rows":
            return Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=per_wait,
                          traffic=traffic, lane_util=vec_lanes)
        splits = p["splits"]
        partial_bytes = 2 * splits * m * n * 4                 # fp32 partials written, then read by the combine
        return Launch(grid=grid * splits, threads=threads, regs=regs, bytes_per_access=per_wait,
                      traffic=traffic + partial_bytes / base, lane_util=min(1.0, k / (8 * warp * splits)), launches=2)
    return launch
