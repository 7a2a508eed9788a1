"""The last step of a global refit: each module keeps the terms of the fit it replaces where the refit's terms break
the device rows (or the SPEC rules) its tests pin.

    python3 scripts/refit_gate.py --base OLD_FIT.json [--modules M1,M2] [--check]

A global refit (scripts/refit_calibration.py --all-rows) moves every module at once, and a held-out gain summed over
all of them can hide a module whose measured orders and levels it breaks (docs/sim_issue30_s13.md section 7: 13 tests
of stored H100/H200 rows the s13 all-rows refit got wrong that the shipped fit got right). PINNED names, per module,
the tests that hold its stored device rows; this runs them (pytest, on the fit file as it is), and for every module
with a failing test puts back the base fit's terms of that module (calibration.fit.keep_modules: its ceilings,
parameter and size terms, ranges, and launch-term departures that give its base times under the refit's impl
exponents), records it in the fit file's `kept_modules` with the tests that failed, and runs the tests again until
none fails (a module whose tests still fail on its base terms is an error: the base fit broke them too). --modules
keeps those modules without running anything (a gate decided earlier, written again); --check runs the tests and
exits 1 where one fails, writing nothing. The base must share the refit's launch floor and caps (refit_calibration
--hold-launch).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIT_PATH = ROOT / "kernelstrain" / "calibration" / "h200_fit.json"

# module -> the tests that pin its stored device rows (or a SPEC rule of its times): docs/sim_issue30_s13.md section 7,
# each with the rows it holds
PINNED = {
    # paged_decode_cuda B=32 S=2048: 96-161 us H100, 97-157 H200; split_kv at one sequence 19.0 us (sim2 decode3)
    "paged_decode_cuda": ["tests/test_calibration_terms.py::test_decode_attention_on_the_h100_is_not_its_bytes_over_the_h100s_bandwidth",
                          "tests/test_sim2_decode.py::test_paged_split_rungs_at_one_sequence"],
    # H200 vectorized_float4 65.2 us at 1024 threads, 60.9 at 512
    "topk_cuda": ["tests/test_calibration_terms.py::test_topk_vectorized_float4s_gain_past_512_threads_shrinks_toward_the_measured_loss"],
    # H100 fp16 2048^3 register_blocked (128,128,8) 522.1 us < (256,128,16) 544.5 (roomK k3 / k4)
    "gemm_fp16_cuda": ["tests/test_roomK_tiles.py::test_register_blocked_tiles_rank_as_the_h100_ran_them_and_bk32_is_not_offered"],
    # the H100 BK 16 and BK 32 rows of grouped_gemm_cuda at one level of the model
    "grouped_gemm_cuda": ["tests/test_roomK_grouped_bk.py::test_bk16_and_bk32_rows_sit_at_the_same_level_of_their_model"],
    # plan k5: 10 int4 and 19 fp4 H100 rows of dequant_then_wgmma
    "gemm_int4_cuda": ["tests/test_roomK_dequant_wgmma.py::test_the_h100_rows_of_the_rung_sit_near_their_model"],
    "gemm_fp4_cuda": ["tests/test_roomK_dequant_wgmma.py::test_the_h100_rows_of_the_rung_sit_near_their_model"],
    # 62 stored causal_conv1d register_strip rows
    "causal_conv1d_cuda": ["tests/test_simB_models.py::test_register_strip_stored_rows"],
    # simB j2 H100: BLOCK_M 128 on 4 warps 1.39x / 1.68x slower than on 8 warps / than 64-row tiles
    "cross_attention_triton": ["tests/test_simB_models.py::test_cross_attention_block_m_128_on_4_warps"],
    # s62828 / s95252: 256-thread one-token blocks at most 1.06x of 64-thread ones
    "moe_combine_cuda": ["tests/test_simB12_models.py::test_moe_combine_one_token_blocks_of_256_threads"],
    # sim2 j2 H100 fp32 R=8192 C=4096 four-tile row 154.7 us
    "prefix_scan_cuda": ["tests/test_sim8_models.py::test_prefix_scan_one_tile_rows_do_not_look_back"],
    # decode6: H=128 is 4.71x of H=16 at B=8
    "mla_decode_triton": ["tests/test_sim2_decode.py::test_mla_split_kv_heads_cost_time_at_equal_bytes"],
    # s40404 bf16 4096x4096: 64 threads a row 1.21x slower than 512
    "fp8_quant_cuda": ["tests/test_simS_launch_fixes.py::test_fp8_quant_cuda_shuffle_reread_misses_l1_at_few_threads_a_row"],
    # a compiler fact: one trip a program builds the same code at every num_stages
    "layernorm_triton": ["tests/test_sim8_models.py::test_ca_staged_only_where_the_loop_stages_a_trip_ahead"],
    # sim f1 H100: mma_sync at B=4 S=4096 and B=2 S=8192 D=128, 2.73-6.07 ms (its largest rows)
    "flash_prefill_cuda": ["tests/test_calibration_terms.py::test_flash_prefill_mma_sync_keeps_the_size_factor_of_its_largest_rows"],
    # sim w2 H100: split_k_reduce 64 x 64 x 64 at M=16 N=4096 K=14336, 2 warps 0.95x of 4; roomK k12: split_k_fused_reduce
    # BLOCK_N 32 within 2% of 64
    "gemm_splitk_triton": ["tests/test_sim10_models.py::test_padded_rows_of_a_two_warp_tile_hide_under_the_weights_stream",
                           "tests/test_roomK.py::test_added_values_order_as_the_h100_ran_them"],
    # six mma_sync tiles at 2048^3 on the H100 in their measured order
    "gemm_int8_cuda": ["tests/test_roomK_int8.py::test_the_h100_2048_cube_register_staged_tiles_rank_as_measured"],
    # the depth a staged streaming loop pays on a short grid only (the H100, room_device_check_triton KNOBT_SET=stages)
    "layernorm_triton": ["tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[layernorm_triton-chunked_three_pass-short1-full1]",
                         "tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[layernorm_triton-welford_chunked-short2-full2]",
                         # s98989 H100: few rows stay latency-bound
                         "tests/test_l2_reuse.py::test_layernorm_few_rows_stay_latency_bound"],
    "softmax_triton": ["tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[softmax_triton-chunked_three_pass-short4-full4]",
                       "tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[softmax_triton-online_softmax-short5-full5]"],
    "swiglu_fwd_triton": ["tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[swiglu_fwd_triton-row_program-short6-full6]"],
    "min_p_triton": ["tests/test_room_stream_stages.py::test_depth_pays_on_a_short_grid_only[min_p_triton-fused_row-short8-full8]"],
    "flash_decode_triton": ["tests/test_room_triton_kv_pipeline.py::test_depth_pays_on_a_short_grid_only[flash_decode_triton-blocked_two_pass]"],
    # H100: dequant_then_dot 4 warps 211.0 us, 8 warps 200.2
    "gemm_fp4_triton": ["tests/test_room_triton_issue30.py::test_four_warp_copies_gemm_is_not_a_wave_slower_than_eight"],
    # H100 programs-an-SM order and the partial rows' reduce steps
    "layernorm_bwd_triton": ["tests/test_room_triton_issue30.py::test_layernorm_bwd_programs_per_sm_order_and_times_follow_the_h100",
                             "tests/test_room_triton_issue30.py::test_layernorm_bwd_many_partial_rows_cost_the_reduce_steps"],
    # H100: the online loop at 4 stages loses to 3
    "cross_entropy_fwd_triton": ["tests/test_room_triton_tuning.py::test_cross_entropy_online_loop_at_four_stages_loses_to_three"],
    # H100 word widths (room_words): wider words faster where the scalar grid is short of bytes in flight, never slower
    "add_rmsnorm_cuda": ["tests/test_room_words.py::test_wider_words_are_faster_where_the_scalar_grid_is_short_of_bytes_in_flight[add_rmsnorm_cuda-warp_shuffle-shape5]",
                         "tests/test_room_words.py::test_wider_words_are_never_slower_where_every_thread_keeps_a_word[add_rmsnorm_cuda-warp_shuffle]",
                         "tests/test_room_words.py::test_wider_words_are_never_slower_where_every_thread_keeps_a_word[add_rmsnorm_cuda-fused_block_reduce]"],
    "layernorm_cuda": ["tests/test_room_words.py::test_wider_words_are_faster_where_the_scalar_grid_is_short_of_bytes_in_flight[layernorm_cuda-welford_shuffle-shape8]",
                       "tests/test_room_words.py::test_wider_words_are_never_slower_where_every_thread_keeps_a_word[layernorm_cuda-welford_shuffle]"],
    "rmsnorm_cuda": ["tests/test_room_words.py::test_wider_words_are_never_slower_where_every_thread_keeps_a_word[rmsnorm_cuda-warp_shuffle]",
                     "tests/test_room_words.py::test_wider_words_are_never_slower_where_every_thread_keeps_a_word[rmsnorm_cuda-smem_block_reduce]"],
    # roomA a1 H100: the descriptor rung 1.01-1.15x its pointer twin; the pipelined rung's stages and key tiles in order
    "flash_prefill_triton": ["tests/test_roomA_rungs.py::test_descriptor_rung_runs_behind_pointer_loads_as_the_h100_measured",
                             "tests/test_roomA_rungs.py::test_pipelined_flash_triton_orders_stages_and_key_tiles_as_the_h100_measured"],
    # roomM m3 H100: the histogram split 2.0x / 3.4x faster where few rows leave SMs idle
    "top_p_cuda": ["tests/test_roomM.py::test_top_p_split_histogram_wins_where_few_rows_leave_sms_idle"],
    # SPEC section 6: a ladder gains >= 1.5x at its largest shape on the H100 (no measured span says less)
    "add_rmsnorm_triton": ["tests/test_sim.py::test_every_module_ladder_improves_and_best_respects_the_roofline[add_rmsnorm_triton]"],
}


def failing(nodes: list) -> set:
    """The node ids among `nodes` (a function's id covers its parametrizations) that fail on the fit file as it is."""
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *sorted(set(nodes))],
                         cwd=ROOT, capture_output=True, text=True, env=None)
    if out.returncode not in (0, 1):
        raise SystemExit(f"pytest could not run the pinned tests (exit {out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-2000:]}")
    failed = set(re.findall(r"^FAILED (\S+?)(?: - .*)?$", out.stdout, re.M))
    return {n for n in nodes if any(f == n or f.startswith(n + "[") for f in failed)}


def keep(modules: dict, base: dict, tests: dict) -> None:
    """Write the fit file with `modules` ({module: impl}) on the base fit's terms, recorded in `kept_modules`."""
    from kernelstrain.calibration import fit_of
    from kernelstrain.calibration.fit import keep_modules
    from refit_calibration import dump  # noqa: E402  (this script's folder)
    data = json.loads(FIT_PATH.read_text())
    kept = {e["module"]: e for e in data.get("kept_modules", [])}
    got = keep_modules(fit_of(data), fit_of(base), {**{m: e["impl"] for m, e in kept.items()}, **modules}).to_json()
    for m, impl in modules.items():
        kept[m] = {"module": m, "impl": impl, "failed": sorted(tests.get(m, ())),
                   "method": "scripts/refit_gate.py: calibration.fit.keep_modules (the base fit's terms of the module, "
                             "its launch-term departures moved by the refit's change of its impl's exponents)"}
    out = {**data, **got, "kept_modules": [kept[m] for m in sorted(kept)]}
    out = {k: v for k, v in out.items() if k != "ceilings"} | {"ceilings": out["ceilings"]}
    FIT_PATH.write_text(dump(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the fit file the refit replaces (its terms are kept)")
    ap.add_argument("--modules", help="comma-separated: keep these modules without running their tests")
    ap.add_argument("--check", action="store_true", help="run the pinned tests, write nothing; exit 1 where one fails")
    a = ap.parse_args(argv)
    from kernelstrain.ops import REGISTRY
    base = json.loads(a.base.read_text())
    if a.modules:
        keep({m: REGISTRY[m].impl for m in a.modules.split(",")}, base, {})
        print(f"kept {a.modules}")
        return 0
    done: dict = {}
    while True:
        bad = failing([n for m, ns in PINNED.items() if m not in done for n in ns])
        broken = {m: [n for n in ns if n in bad] for m, ns in PINNED.items() if m not in done and set(ns) & bad}
        if not broken:
            print(f"pinned tests pass; kept on the base: {sorted(done) or 'none'}")
            return 0
        print("failing: " + "; ".join(f"{m}: {', '.join(n.split('::')[1] for n in ns)}" for m, ns in sorted(broken.items())))
        if a.check:
            return 1
        keep({m: REGISTRY[m].impl for m in broken}, base, broken)
        done.update(broken)
        still = failing([n for m in broken for n in PINNED[m]])     # on their base terms they must pass
        if still:
            raise SystemExit(f"{sorted(still)}: fail on the base fit's terms too")

if __name__ == "__main__":
    sys.exit(main())
