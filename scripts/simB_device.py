"""Device plan of helper simB (issue 30): the modules the pooled held-out gpu-checks (scripts/simB_pool.py over
seeds 61717-98282) misorder consistently, their rungs x the parameters the misorders turn on, at 2 shapes each
(one a held-out episode's menu shape, one never timed), built, checked against the PyTorch reference and timed by
kernelstrain.gpucheck's build and run passes (scripts/sim2_device_check.py's harness) beside this tree's simulator.

    python3 scripts/simB_device.py                       # on a CUDA machine; writes $OUT/summary.txt, sim2_device.json
    SIMB_PLAN=b1 SIM2_REHEARSE=3 python3 scripts/simB_device.py    # no GPU: the first 3 cases through every path

b1 (tenth session), what each group asks:
- causal_conv1d_cuda register_strip: strip x threads. Its loop holds one LDG.E.128 a trip whose value feeds the
  halo shuffles before the next trip's load (nvcc 13.0 sm_90a SASS), so a short grid of long strips keeps one
  16-byte load a thread in flight (held out: strip 2048 at B=1 D=2048 L=2048 ran 14.1 us beside 10.3-10.6 of
  the other rungs; the model had it level).
- rmsnorm_cuda warp_shuffle / smem_block_reduce at T=16384 D=8192 (held out: modelled 1.25-1.57x slow), and
  vectorized_uint4 at 1024 threads (modelled 0.76x).
- moe_combine_cuda column_split_ilp (modelled 0.85x at T=512 topk 8), gather_per_element vec 4 (1.1x).
- embedding_gather_cuda row_per_block / embedding_fwd_cuda block_per_token with #pragma unroll 2 (held out: 1.08-1.2x
  slower than unroll 0 on the H100, the model level).
- rope_cuda token_block_smem threads x main_unroll (modelled 0.6-1.3x, main_unroll 8 faster in the model only).
- cross_entropy_fwd_triton chunked_two_pass num_stages 2 (held out 1.28x slower than 1 stage, the model level),
  online_softmax BLOCK / warps; swiglu_fwd_triton row_program stages / warps beside multi_row_tile.
c1 (eleventh session): softmax_triton's spilled whole rows by dtype and warps; BLOCK_M x warps of the Triton flash
tiles at D=128 (see C1). c2: gemv_cuda's launch bound, softmax_triton persistent, top_p_cuda, layernorm_cuda (see C2). c3: c1 again with held-out controls.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (module, dtype, shapes, [(rung, {param: values, the product}), ...]): scripts/sim2_device_check.py's entries
B1 = [
    ("causal_conv1d_cuda", "fp16", [{"B": 1, "D": 2048, "L": 2048}, {"B": 2, "D": 8192, "L": 4096}], [
        ("register_strip", {"threads": (64, 256), "strip": (512, 1024, 2048)}),
        ("warp_shuffle_halo", {"threads": (128,)})]),
    ("rmsnorm_cuda", "bf16", [{"T": 16384, "D": 8192}, {"T": 4096, "D": 4096}], [
        ("warp_shuffle", {"threads": (256, 512), "vec": (1, 4)}),
        ("smem_block_reduce", {"threads": (256, 512)}),
        ("vectorized_uint4", {"threads": (256, 1024)}),
        ("register_cached", {"threads": (256,), "rows_per_block": (2,)})]),
    ("moe_combine_cuda", "bf16", [{"T": 512, "topk": 8, "K": 7168}, {"T": 4096, "topk": 2, "K": 4096}], [
        ("column_split_ilp", {"threads": (32, 256), "col_splits": (2, 4)}),
        ("gather_per_element", {"vec": (1, 4)}),
        ("vectorized_uint4", {"threads": (256,)}),
        ("multi_token_ilp", {"tokens_per_block": (1, 2)})]),
    ("embedding_gather_cuda", "fp16", [{"T": 4096, "V": 128256, "D": 4096}], [
        ("row_per_block", {"pragma_unroll": (0, 2), "vec": (1, 4)})]),
    ("embedding_fwd_cuda", "bf16", [{"T": 8192, "D": 8192, "V": 128256}], [
        ("block_per_token", {"threads": (128, 256), "pragma_unroll": (0, 2)})]),
    ("rope_cuda", "bf16", [{"T": 4096, "H": 32, "D": 128}, {"T": 512, "H": 64, "D": 128}], [
        ("token_block_smem", {"threads": (64, 256), "main_unroll": (0, 8)}),
        ("cos_sin_registers", {"head_threads": (16,)})]),
    ("cross_entropy_fwd_triton", "bf16", [{"T": 256, "V": 32000}, {"T": 2048, "V": 128256}], [
        ("chunked_two_pass", {"BLOCK": (8192,), "num_warps": (8, 16), "num_stages": (1, 2)}),
        ("online_softmax", {"BLOCK": (2048, 8192), "num_warps": (16,)})]),
    ("swiglu_fwd_triton", "fp16", [{"T": 512, "I": 13824}], [
        ("row_program", {"BLOCK": (1024,), "num_warps": (4, 8), "num_stages": (1, 2)}),
        ("multi_row_tile", {"BLOCK_T": (1, 2), "BLOCK": (512, 1024), "num_warps": (8,)})]),
]
# b2 (follow-up): the register_strip chain (causal_conv1d_cuda.strip_chain_s) out of sample, predicted before any
# row: one wave of warps walking 16-32 trips (B=1 D=1024 L=8192: strip 4096 / 8192 modelled 24.7 / 47.1 us on the
# H100 beside 17-18 us for strips <= 2048 and warp_shuffle_halo), and a two-wave grid (B=2 D=2048 L=2048)
B2 = [
    ("causal_conv1d_cuda", "fp16", [{"B": 1, "D": 1024, "L": 8192}], [
        ("register_strip", {"threads": (64, 256), "strip": (1024, 4096, 8192)}),
        ("warp_shuffle_halo", {"threads": (128,)})]),
    ("causal_conv1d_cuda", "bf16", [{"B": 2, "D": 2048, "L": 2048}, {"B": 1, "D": 2048, "L": 2048}], [
        ("register_strip", {"threads": (128,), "strip": (512, 2048)}),
        ("vectorized_uint4", {"threads": (128,)})]),
]
# j2 (the follow-up job, this session's second): b2, plus rows for the causes found and left open (docs/simB_issue30.md
# section 3): rmsnorm_cuda's block rungs across thread counts at a few-wave shape (T=2048 D=2048, where the scalar
# rungs ran 1.0-1.4x slower than modelled) and a many-wave one (T=8192 D=5120, 1.14-1.44x faster), with 1024 threads
# (two blocks an SM, 0.71-0.76x in b1); cross_attention_triton BLOCK_M 64 / 128 on 4 / 8 warps at Skv=77 (BLOCK_M 128
# on 4 warps ran 1.2-1.4x BLOCK_M 64 in three held-out seeds, the model 0.85-0.9x) and at Skv=1500; rope_cuda
# token_block_smem's threads at the held-out T=2048 H=16 D=256 shape (56 us measured, 34 modelled)
B3 = B2 + [
    ("rmsnorm_cuda", "bf16", [{"T": 2048, "D": 2048}, {"T": 8192, "D": 5120}], [
        ("vectorized_uint4", {"threads": (256, 512, 1024)}),
        ("warp_shuffle", {"threads": (256, 512, 1024), "vec": (1,)}),
        ("register_cached", {"threads": (256, 1024), "rows_per_block": (1,)})]),
    ("cross_attention_triton", "bf16", [{"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 64},
                                        {"B": 4, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}], [
        ("blocked_online_softmax", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8)}),
        ("pipelined_tiles", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4,), "num_stages": (2,)})]),
    ("rope_cuda", "fp16", [{"T": 2048, "H": 16, "D": 256}], [
        ("token_block_smem", {"threads": (64, 128, 256, 512)}),
        ("cos_sin_registers", {"head_threads": (16,)})]),
]
# c1 (eleventh session, 2026-12-07): what the stored rows cannot settle, predictions committed before the rows.
# - softmax_triton's spilled whole rows at C=151936 (held out s84317 / s95151: whole_row_registers 16 warps 650 us,
#   persistent 16 warps 1.7 ms where the model has 331 / 765; the fp32 rows on the H200 fit): the spill by dtype and
#   warps, on one card, beside the unspilled online_softmax.
# - the tensor-core tile's rows a warp (_flash_tiles.mma_eff): cross_attention_triton BLOCK_M 128 on 4 warps ran
#   1.2-1.6x BLOCK_M 64's time at D=64 (held out and stored); at D=128 (sliding_window_attn_triton, stored) 0.9-1.3x.
#   BLOCK_M x warps at D=128 in both modules tell whether the penalty is the head dim's (softmax against MMA work):
#   cross_attention's two D=64 menu shapes at D=128 (the menu's D=128 prefill shape is past gpu-check's size limit).
C1 = [
    ("softmax_triton", dtype, [{"R": 256, "C": 151936}], [
        ("whole_row_registers", {"num_warps": (8, 16)}),
        ("persistent", {"num_warps": (16,), "programs_per_sm": (1,)}),
        ("online_softmax", {"BLOCK": (4096,), "num_warps": (8,), "loop_unroll": (0,), "num_stages": (1,)})])
    for dtype in ("bf16", "fp16", "fp32")] + [
    ("softmax_triton", "bf16", [{"R": 4096, "C": 32000}], [
        ("whole_row_registers", {"num_warps": (4, 8, 16)})]),
    ("cross_attention_triton", "bf16", [{"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 128},
                                        {"B": 4, "H": 20, "Sq": 448, "Skv": 1500, "D": 128}], [
        ("blocked_online_softmax", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8)}),
        ("pipelined_tiles", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8), "num_stages": (3,)})]),
    ("cross_attention_triton", "bf16", [{"B": 16, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}], [
        ("pipelined_tiles", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8), "num_stages": (3,)})]),
    ("sliding_window_attn_triton", "fp16", [{"B": 2, "H": 16, "S": 3000, "D": 128, "W": 1024}], [
        ("pipelined_tiles", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8), "num_stages": (3,)})]),
]
# c2 (eleventh session, the follow-up): rows for what c1 did not cover and the stored rows cannot settle.
# - gemv_cuda warp_per_row / vectorized_uint4 with knobs' min_blocks 0 / 1 (__launch_bounds__(T) against (T, 1)):
#   nvcc 13.0 sm_90a gives warp_per_row 56 registers against 40 at M=8 and hoists the unrolled trips' 18 loads ahead
#   of their FMAs (vectorized_uint4: 66 against 48, 9 loads against 4); held out, warp_per_row ran 139-141 us with
#   the bound against 466-480 without (M=8 N=K=8192) and 39-40 against 83.5 (M=4). One machine, both settings, and
#   M=1 as the control; vectorized_uint4 at M=8 is modelled 147 us on the H100 where it ran 79-114 (the H200 106-110).
# - softmax_triton persistent against whole_row_registers at R=4096 C=32000 fp16 (held out: persistent 16 warps
#   270-275 us against 193, modelled level).
# - top_p_cuda vectorized_float4 at 512 / 1024 threads (held out: 1024 threads 66 us, modelled 97; 512 72 / 73).
# - layernorm_cuda's block rungs across threads at T=8192 D=1024 (held out: smem_block_reduce 256 threads 29.7 us,
#   modelled 19.0) and T=16384 D=8192.
C2 = [
    ("gemv_cuda", "bf16", [{"M": 8, "N": 8192, "K": 8192}, {"M": 4, "N": 6144, "K": 4096}, {"M": 1, "N": 14336, "K": 4096}], [
        ("warp_per_row", {"warps": (4,), "min_blocks": (0, 1)}),
        ("vectorized_uint4", {"warps": (4,), "min_blocks": (0, 1)}),
        ("split_k_combine", {"warps": (8,), "rows_per_warp": (4,), "splits": (2,)})]),
    ("softmax_triton", "fp16", [{"R": 4096, "C": 32000}], [
        ("whole_row_registers", {"num_warps": (8, 16)}),
        ("persistent", {"num_warps": (8, 16), "programs_per_sm": (1, 2)})]),
    ("top_p_cuda", "fp32", [{"B": 128, "V": 32000}, {"B": 64, "V": 128256}], [
        ("vectorized_float4", {"threads": (256, 512, 1024), "cap": (2048,)})]),
    ("layernorm_cuda", "bf16", [{"T": 8192, "D": 1024}, {"T": 16384, "D": 8192}], [
        ("smem_block_reduce", {"threads": (128, 256, 1024)}),
        ("welford_shuffle", {"threads": (128, 256, 1024)}),
        ("vectorized_uint4", {"threads": (64, 128, 256)})]),
]
# c3 (the last follow-up): c1 / c2 timed many configs 2.1-2.5x slower than the same configs in held-out gpu-checks
# (softmax_triton fp16 R=4096 C=32000 whole_row 16 warps 440 us against 193 in s84317 / s94664; top_p_cuda 512
# threads 163 against 72; layernorm_cuda T=8192 D=1024 2.4x), while the long bandwidth-bound rows matched (gemv M=8
# warp_per_row 479 / 141 against 466-480 / 139-141): the GPU was shared. Again, with controls whose held-out times are
# known: softmax_triton's spilled rows by dtype and warps, cross_attention_triton BLOCK_M x warps at D=128 beside
# its D=64 twins (j2: 20.4 / 29.0 us).
C3 = [
    ("softmax_triton", "fp16", [{"R": 4096, "C": 32000}], [("whole_row_registers", {"num_warps": (16,)})]),
    ("cross_attention_triton", "bf16", [{"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 64}], [
        ("blocked_online_softmax", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4,)})]),
    ("cross_attention_triton", "bf16", [{"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 128}], [
        ("blocked_online_softmax", {"BLOCK_M": (64, 128), "BLOCK_N": (64,), "num_warps": (4, 8)})]),
] + [("softmax_triton", dtype, [{"R": 256, "C": 151936}], [("whole_row_registers", {"num_warps": (8, 16)})])
     for dtype in ("bf16", "fp16", "fp32")]
# d1 (twelfth session, 2026-12-07): dense near-tie grids at one shape, where the pooled held-out rows misorder the
# module (docs/simB_issue30.md section 8), and layernorm_cuda rows for a module refit the stored rows cannot carry
# alone (160 rows; the refit rule asks more than 200).
# - moe_combine_cuda column_split_ilp threads x col_splits at T=2048 topk 6 K=2048 (held out: threads 256 / 4 splits,
#   a quarter of its lanes idle, ran 27.2-27.5 us level with 64 threads at 25.9-26.7; modelled 36.5 against 23.5),
#   beside multi_token_ilp and vectorized_uint4 across threads.
# - embedding_gather_cuda row_per_block vec x #pragma unroll x threads at T=8192 D=3584 (held out: unroll 2 at 2-byte
#   words 1.08-1.16x unroll 0, modelled level).
# - moe_scatter_cuda warp_aggregated_fused threads x tokens_per_block at T=8192 E=128 topk 8 K=2048 (held out: at 8
#   tokens a block 128 / 256 / 512 threads ran 166 / 184 / 207 us, modelled 203 / 169 / 157).
# - layernorm_cuda's rungs x threads at four menu shapes, both dtypes (rows for the vectorized_uint4 re-read refit).
D1 = [
    ("moe_combine_cuda", "bf16", [{"T": 2048, "topk": 6, "K": 2048}], [
        ("column_split_ilp", {"threads": (32, 64, 128, 256), "col_splits": (2, 4, 8)}),
        ("multi_token_ilp", {"threads": (64, 256, 512), "tokens_per_block": (1,)}),
        ("vectorized_uint4", {"threads": (128, 512)})]),
    ("embedding_gather_cuda", "fp16", [{"T": 8192, "V": 152064, "D": 3584}], [
        ("row_per_block", {"threads": (128, 256), "pragma_unroll": (0, 2, 4), "vec": (1, 4)})]),
    ("moe_scatter_cuda", "bf16", [{"T": 8192, "E": 128, "topk": 8, "K": 2048}], [
        ("warp_aggregated_fused", {"threads": (128, 256, 512), "tokens_per_block": (8, 16, 32)})]),
] + [
    ("layernorm_cuda", dtype, [shape], [
        ("vectorized_uint4", {"threads": (64, 128, 256, 512, 1024)}),
        ("smem_block_reduce", {"threads": (128, 256, 512)}),
        ("welford_shuffle", {"threads": (128, 256, 512)}),
        ("register_cached", {"threads": (256, 1024), "rows_per_block": (1,)})])
    for dtype, shape in (("bf16", {"T": 4096, "D": 4096}), ("fp16", {"T": 8192, "D": 5120}),
                         ("bf16", {"T": 8192, "D": 1024}), ("fp16", {"T": 16384, "D": 8192}))]
# d2 (twelfth session, the follow-up): paged_decode_triton's loop rungs at B=8 H=28 (224 programs, two an SM; the chain
# now counts there: held out page_tile 2 warps 785 us, modelled 798; multi_page_tile BLOCK_N 128 on 8 warps at one
# stage 361 us, modelled 525 with the register estimate's one program an SM, where ptxas's 106 registers hold two);
# moe_scatter_cuda redundant_rank_one_launch x threads at E=64 (held out: 64 -> 512 threads 48 -> 71 us, modelled
# flat) and E=8 (41-48 us, modelled 52-55, against warp_aggregated_fused 52-64, modelled 42-52).
D2 = [
    ("paged_decode_triton", "fp16", [{"B": 8, "H": 28, "KVH": 4, "S": 8192, "D": 128, "P": 16}], [
        ("page_tile", {"num_warps": (2, 4, 8), "num_stages": (1, 2)}),
        ("multi_page_tile", {"BLOCK_N": (64, 128), "num_warps": (2, 8), "num_stages": (1, 2)})]),
    ("moe_scatter_cuda", "bf16", [{"T": 2048, "E": 64, "topk": 6, "K": 2048}, {"T": 4096, "E": 8, "topk": 2, "K": 4096}], [
        ("redundant_rank_one_launch", {"threads": (64, 128, 256, 512)}),
        ("warp_aggregated_fused", {"threads": (256, 512), "tokens_per_block": (16,)})]),
]
# d3 (thirteenth session, 2026-12-07): dense grids at one shape each of three modules the fresh pair s88339 / s88440
# ranked negative and whose pooled held-out misorders turn on launch physics (docs/simB_issue30.md section 9):
# - grad_clip_cuda bf16 N=16,777,216: vectorized_persistent threads x blocks_per_sm (held out: 512 resident threads an
#   SM -- 256 x 2, 512 x 1 -- ran 1.13-1.25x slower than 1,024 or 2,048, modelled 1.02-1.05x) and
#   two_stage_deterministic threads x blocks x #pragma unroll (held out: 128 x 256 blocks 131.6 us, modelled 71.6;
#   pragma 4 55.4 against pragma 2 72.3); the same at N=268M fp32 and N=124M bf16 (20 more rows: with them the module
#   has the 200 fit rows a module refit needs, scripts/refit_calibration.py --modules).
# - top_p_cuda fp32 B=256 V=128256: the one-block-a-row rungs x threads (held out: vectorized_float4 1,024 threads
#   537.8 us, modelled 907.6; every H100 and H200 row has 1,024 threads faster than 512, the fit's threads term the
#   other way at B >= 128).
# - dropout_cuda bf16 T=8192 D=8192: every rung x threads (held out: persistent 105.6-106.8 us, modelled 95.7-97.8
#   against philox4_vec4 96.8-99.8, modelled 97.6-99.2).
D3 = [
    ("grad_clip_cuda", "bf16", [{"N": 16777216}], [
        ("vectorized_persistent", {"threads": (256, 512, 1024), "blocks_per_sm": (1, 2, 4)}),
        ("two_stage_deterministic", {"threads": (128, 256), "blocks": (256, 1024), "pragma_unroll": (0, 2, 4)})]),
    ("grad_clip_cuda", "fp32", [{"N": 268435456}], [
        ("vectorized_persistent", {"threads": (256, 512, 1024), "blocks_per_sm": (1, 2)}),
        ("two_stage_deterministic", {"threads": (128, 256), "blocks": (256, 1024), "pragma_unroll": (0, 4)})]),
    ("grad_clip_cuda", "bf16", [{"N": 124439808}], [
        ("vectorized_persistent", {"threads": (256, 512), "blocks_per_sm": (1, 2)}),
        ("two_stage_deterministic", {"threads": (128,), "blocks": (256, 1024), "pragma_unroll": (0,)})]),
    ("top_p_cuda", "fp32", [{"B": 256, "V": 128256}], [
        ("vectorized_float4", {"threads": (256, 512, 1024)}),
        ("warp_ballot_scan", {"threads": (256, 512, 1024)}),
        ("cdf_pick", {"threads": (512, 1024)}),
        ("histogram_refine", {"threads": (512, 1024)})]),
    ("dropout_cuda", "bf16", [{"T": 8192, "D": 8192}], [
        ("philox8_uint4", {"threads": (128, 256, 512, 1024)}),
        ("philox4_vec4", {"threads": (128, 256, 512, 1024)}),
        ("unrolled_ilp", {"threads": (128, 256), "unroll": (1, 2, 4)}),
        ("persistent", {"threads": (256, 512), "unroll": (2, 4)})]),
]
# e1 (fourteenth session, 2026-12-07): the three modules the last fresh pair called negative (docs/simB_issue30_s14.md):
# - kv_append_cuda: block_per_token threads x VEC beside the uint4 rungs at two shapes the H200 files also time (its
#   H100 rows run 1.13x their H200 twins where the uint4 rungs run 1.35x: the scalar copy loop does not follow the
#   DRAM; the model has 1.21x and times it 1.1-1.35x slow on every H100 row). Run it on an H200 too (the same plan):
#   the twins give the card ratio per VEC.
# - softmax_cuda at R=16384 C=1024 (each row 2 KB: the card-independent block chain) and R=2048 C=4096: threads x
#   rows of vectorized_online (modelled 1.2-1.9x slow on the H100 where the 8 KB rows' re-read is L1's) beside the
#   block rungs.
# - mla_decode_triton at B=32 H=128 S=4000: BLOCK_H x BLOCK_N x num_warps of the two one-pass tile rungs. ptxas
#   (Triton 3.9, sm_90a, scripts/simB_triton_res.py) spills exp2_tail_peel on 4 warps at every tile (280-2,456 bytes a
#   thread) and head_block_tl_dot on 4 warps from BLOCK_N 64 or BLOCK_H 32 (32-1,840), neither on 8 warps below
#   BLOCK_H 64 (153-212 registers); the model: 150-156 registers on 4 warps, no spill below BLOCK_H 64.
E1 = [
    ("kv_append_cuda", "fp16", [{"T": 16384, "H": 8, "D": 128, "P": 16}, {"T": 4096, "H": 16, "D": 256, "P": 32}], [
        ("block_per_token", {"threads": (128, 256, 512), "vec": (1, 2, 4)}),
        ("vectorized_uint4", {"threads": (64, 128, 256)}),
        ("warp_per_token_ilp", {"warps": (4, 8), "unroll": (2, 4)})]),
    ("softmax_cuda", "fp16", [{"R": 16384, "C": 1024}, {"R": 2048, "C": 4096}], [
        ("vectorized_online", {"threads": (32, 128, 256, 512), "rows_per_block": (1, 4)}),
        ("warp_shuffle", {"threads": (128, 256, 512)}),
        ("online_softmax", {"threads": (128, 256, 512)}),
        ("smem_block_reduce", {"threads": (128, 256)})]),
    ("mla_decode_triton", "fp16", [{"B": 32, "H": 128, "S": 4000}], [
        ("head_block_tl_dot", {"BLOCK_H": (16, 32), "BLOCK_N": (16, 32, 64), "num_warps": (4, 8)}),
        ("exp2_tail_peel", {"BLOCK_H": (16, 32), "BLOCK_N": (16, 32, 64), "num_warps": (4, 8)})]),
]
PLANS = {"b1": B1, "b2": B2, "j2": B3, "c1": C1, "c2": C2, "c3": C3, "d1": D1, "d2": D2, "d3": D3, "e1": E1}

if __name__ == "__main__":
    import sim2_device_check  # noqa: E402
    plan = os.environ.get("SIMB_PLAN", "b1")
    sim2_device_check.PLANS[plan] = PLANS[plan]
    os.environ["SIM2_PLAN"] = plan
    sys.exit(sim2_device_check.main())
