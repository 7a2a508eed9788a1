"""roomT (issue 26 Build 2, 2026-12-07, tenth session): gemm_fp4_triton's split_k_dot_scaled rung, room where the
hardware has it. At decode-sized M the packed rungs' 128 x 128 tiles leave N / 128 programs each walking all of K (the
H100 ran M=16 N=7168 K=2048 in 40-400 us against a ~2.5 us DRAM floor); the rung splits K over program_id(1) on skinny
tiles and sums the fp32 slices with gemm_splitk_triton's reduce kernel. Correct under Triton's interpreter with its
bugs failing (scripts/roomT_interpret.py), built for every target (scripts/room_compile_triton.py)."""
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task
from test_roomT import interpret

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

FP4 = REGISTRY["gemm_fp4_triton"]
SPLIT = FP4.variant("split_k_dot_scaled")
DECODE = {"M": 16, "N": 7168, "K": 2048, "G": 32}


def test_the_rung_is_offered_and_every_list_built():
    import room_compile_triton
    assert SPLIT in FP4.variants
    built = {e[2]: e[3] for e in room_compile_triton.ADDED if e[:2] == ("gemm_fp4_triton", "split_k_dot_scaled")}
    assert {p.name: p.values for p in SPLIT.params} == built


@pytest.mark.parametrize("gpu", ["H100", "RTX5090"])
def test_splits_multiply_the_grid_and_their_slices_cost_packed_bytes(gpu):
    """SPLIT_K times the programs of the same tiles; each split's fp32 [M, N] slice is stored (in the GEMM's traffic,
    priced against the packed operands' bytes, not a 16-bit GEMM's ~3.5x more) and summed by a reduce kernel timed
    after the GEMM (later_s, outside the calibration's factor: the H100 ran 2-16 splits within 1.1x, roomT/j1)."""
    from kernelstrain.ops.matmul._fp4_split import split_launch
    from kernelstrain.ops.matmul.gemm_fp4_triton import fp4_launch
    task = make_task(FP4, gpu, "bf16", DECODE)
    at = {s: FP4.launch(SPLIT, {**SPLIT.defaults(), "SPLIT_K": s}, task) for s in (2, 8)}
    assert at[8].grid == 4 * at[2].grid == 8 * (16 // 16) * (7168 // 64)
    assert at[8].launches == 2 and 0 < at[2].later_s < at[8].later_s
    base, p = fp4_launch("pipelined", upcast=0.6), {**SPLIT.defaults(), "SPLIT_K": 8}
    folded16 = split_launch(base, "partials", reduce_later=True)(p, task).traffic - base(p, task).traffic
    packed = (16 * 2048 + 7168 * 2048 + 16 * 7168) * 2 / FP4.cost(task).bytes
    assert at[8].traffic - base(p, task).traffic == pytest.approx(folded16 * packed, rel=1e-9) and packed > 3


def test_skinny_tiles_take_mma_sync_shared_memory_on_hopper():
    """Below 64 rows Triton builds mma.sync on sm_90 too: the packed tiles and scales a stage (metadata.shared 10,496
    B at 16 x 64 x 128, 3 stages), not wgmma's 16-bit B ring (32,768 B modelled before)."""
    task = make_task(FP4, "H100", "bf16", DECODE)
    assert FP4.launch(SPLIT, SPLIT.defaults(), task).smem_bytes == (16 + 64) * (64 + 4) * 2


# Triton 3.9 metadata.shared for sm_90a (roomT, eleventh session): the packed tiles num_stages - 1 buffers deep and one
# 16-bit B tile the upcast writes for wgmma (the model said a 16-bit B tile a stage: 65,536 / 98,304 / 49,152 / 24,576)
WGMMA_SHARED = [("split_k_dot_scaled", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "SPLIT_K": 2, "num_stages": 3}, 57344),
                ("split_k_dot_scaled", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "SPLIT_K": 2, "num_stages": 4}, 69632),
                ("split_k_dot_scaled", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 2, "num_stages": 4}, 34816),
                ("pipelined_dot_scaled", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4, "num_warps": 4}, 20480),
                ("pipelined_dequant", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "num_stages": 4, "num_warps": 4}, 20480),
                ("pipelined_dot_scaled", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3}, 65536),
                ("dot_scaled", {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8}, 32768)]


@pytest.mark.parametrize("tag,params,shared", WGMMA_SHARED)
def test_wgmma_tiles_stage_the_packed_tiles_and_one_16bit_b_tile(tag, params, shared):
    """64+-row tiles on sm_90 (wgmma): the H100 ran the split's 64 x 128 x 128 at 3 and 4 stages level (121.0 / 120.8
    us), both 3 programs an SM by these figures (the model had 3 and 2)."""
    v = FP4.variant(tag)
    task = make_task(FP4, "H100", "bf16", {"M": 128, "N": 14336, "K": 4096, "G": 32})
    assert FP4.launch(v, {**v.defaults(), **params}, task).smem_bytes == shared


def test_the_skipped_slice_bug_is_offered_only_where_the_last_split_has_tiles():
    """3 K tiles over 4 splits leave the last empty: summing 3 of 4 slices is then still right (the interpreter passed
    it), so the bug is not offered there."""
    small = make_task(FP4, "H100", "fp16", {"M": 5, "N": 256, "K": 384, "G": 32})
    p = {**SPLIT.defaults(), "BLOCK_K": 128}
    assert not SPLIT.breaks_at("bad_combine_index", small, {**p, "SPLIT_K": 4})
    assert SPLIT.breaks_at("bad_combine_index", small, {**p, "SPLIT_K": 2})
    assert SPLIT.breaks_at("bad_combine_index", make_task(FP4, "H100", "bf16", DECODE), {**p, "SPLIT_K": 16})


def test_split_slices_match_the_reference_under_the_interpreter(monkeypatch):
    """TRITON_INTERPRET=1: 4 splits of 8 K tiles on 16-row, 32-wide tiles; every bug fails (the skipped slice too)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")      # the script sets it on import: not left for the tests after this
    import roomT_interpret
    cases = [c for c in roomT_interpret.CASES if c[1] == "split_k_dot_scaled" and c[3]["M"] == 16
             and c[3]["N"] == 128]
    out = interpret(cases)
    assert len(cases) == 1 and out.count("rel_l2") == 4 and "PROBLEM" not in out


def test_the_model_orders_the_rungs_as_the_h100_ran_them():
    """measurements/h100_roomT_fp4split.json (roomT/j1-j4): at M=16 the fastest split configuration ran 2.4x ahead of
    pipelined_copies (16.6 / 39.5 us), and the model keeps that order on the rows; at M=128 the best split ran within
    1.1x of the other rungs' best (120.8 us; dot_scaled 110.5, pipelined_copies 126.6): the model's best of the split
    and copies grids stays within 1.25x (119.4 / 105.4 us). Its split rows sit near the device on the whole
    (geomean), not row by row at M=128 (the report's known misses)."""
    import itertools
    import json
    import math
    rows = json.loads((Path(__file__).resolve().parents[1] / "measurements" / "h100_roomT_fp4split.json").read_text())
    best, ratios = {}, []
    for r in rows["rows"]:
        if r["bug"] or not r["ok"]:
            continue
        sim = simulate(FP4, FP4.variant(r["variant"]), r["params"], make_task(FP4, "H100", r["dtype"], r["shape"])).time_ms
        key = (r["shape"]["M"], r["variant"] == "split_k_dot_scaled")
        best[key] = min(best.get(key, (9e9, 9e9)), (r["time_ms"], sim))
        if r["variant"] == "split_k_dot_scaled":
            ratios.append(math.log(sim / r["time_ms"]))
    (dev_split, sim_split), (dev_rest, sim_rest) = best[(16, True)], best[(16, False)]
    assert dev_split * 2 < dev_rest and sim_split * 1.5 < sim_rest
    assert 0.9 < best[(128, True)][0] / best[(128, False)][0] < 1.1
    assert 0.9 < math.exp(sum(ratios) / len(ratios)) < 1.25 and len(ratios) >= 40


@pytest.mark.xfail(strict=True, reason="a known model defect (2026-12-07, roomT eleventh session): the split rung's "
                   "grid best at M=128 is modelled 1.57x the copies' (164 / 104 us) where the H100 ran them level "
                   "(120.8 / 126.6 us). Two parts, neither the split rung's launch model: sim.efficiencies quantizes a "
                   "grid at whole waves of ALL resident slots (448 programs at 3 an SM: 0.57) where the block "
                   "scheduler refills slots per SM (0.85), which times the split's 64 x 128 tiles 1.8-2.7x slow "
                   "(/work/dev/sim/FROM_ROOMT.md, sim's shared model); and the copies' 256-row tile is modelled 105 us "
                   "where it ran 164 (roomT/j3). A module refit on the split rows orders them (pairs 224 -> 293 of "
                   "326, this ratio 1.07) but test_calibration_refit's rules refuse it (130 rows < 200)")
def test_the_model_keeps_the_split_rung_level_at_m128_as_the_h100_ran_it():
    import itertools
    task = make_task(FP4, "H100", "bf16", {"M": 128, "N": 14336, "K": 4096, "G": 32})
    grid_best = {tag: min(r.time_ms for c in itertools.product(*[p.values for p in v.params])
                          if (r := simulate(FP4, v, dict(zip([p.name for p in v.params], c)), task)).ok)
                 for tag, v in ((t, FP4.variant(t)) for t in ("split_k_dot_scaled", "pipelined_copies"))}
    assert 0.8 < grid_best["split_k_dot_scaled"] / grid_best["pipelined_copies"] < 1.25


def test_two_to_eight_splits_stay_level_as_on_the_h100():
    """The H100 ran 2 / 4 / 8 splits of 16 x 64 x 128 tiles at M=16 in 19.5 / 19.7 / 19.7 us; folded into the GEMM's
    traffic (and so multiplied by its calibration) the slices' reduce made 8 splits 1.39x slower than 2."""
    task = make_task(FP4, "H100", "bf16", DECODE)
    t = [simulate(FP4, SPLIT, {**SPLIT.defaults(), "SPLIT_K": s}, task).time_ms for s in (2, 4, 8)]
    assert max(t) < 1.25 * min(t)
