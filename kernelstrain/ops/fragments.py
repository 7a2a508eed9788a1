"""CUDA template fragments shared by op modules of different families (not an op module).

Plain text, inserted into the modules' f-string templates by name.
"""

# The inner product of a register-tiled SIMT GEMM: staged sx [BK][BM] and sw [BK][BN] tiles,
# each thread a TM x TN block of fp32 accumulators at a stride of 16 rows / columns.
REGISTER_TILE_FMA = """
#pragma unroll 4
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = sx[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = sw[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }"""
