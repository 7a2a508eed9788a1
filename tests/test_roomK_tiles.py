"""roomK (issue 26 room): the wider tiles of the register-blocked FMA rungs (gemm_fp16_cuda register_blocked
BM / BN 256; grouped_gemm_cuda expert_lookup_single BM 128 / BN 256) and grouped_gemm_cuda cp_async_pipeline's
deterministic off_by_one. What nvcc 13.0 said of them here (sm_90a builds; sm_80 refuses the static tiles past 48 KB:
"uses too much shared data (0xc08c bytes, 0xc000 max)" for expert_lookup_single 128 x 256) is what the model says."""
import difflib
import json
from pathlib import Path

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
FP16, GROUPED = REGISTRY["gemm_fp16_cuda"], REGISTRY["grouped_gemm_cuda"]
GEMM = {"M": 4096, "N": 4096, "K": 4096}
MOE = {"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2}


def _sim(module, tag, gpu, shape, dtype, **params):
    v = module.variant(tag)
    return simulate(module, v, {**v.defaults(), **params}, make_task(module, gpu, dtype, shape))


def test_register_blocked_wide_tiles_render_512_threads_and_launch_only_under_1024():
    v = FP16.variant("register_blocked")
    assert 256 in v.param("BM").values and 256 in v.param("BN").values
    code = FP16.render(v, {**v.defaults(), "BM": 256, "BN": 128, "TM": 8}, make_task(FP16, "H100", "fp16", GEMM))
    assert "#define BM 256" in code and "#define THREADS ((BM / TM) * (BN / TN))" in code
    assert _sim(FP16, "register_blocked", "H100", GEMM, "fp16", BM=256, BN=128, TM=8).ok
    # TM 4 at 256 x 128: 2,048 threads a block, which no launch accepts
    bad = _sim(FP16, "register_blocked", "H100", GEMM, "fp16", BM=256, BN=128, TM=4)
    assert not bad.ok and "CUDA error: invalid argument" in bad.error      # (reader/j2: the H100 says so)


def test_static_tiles_past_48_kb_fail_where_ptxas_refuses_them():
    # expert_lookup_single 128 x 256: 49,292 bytes of static smem (ptxas, sm_80: 0xc08c); sm_90a takes it
    a100 = _sim(GROUPED, "expert_lookup_single", "A100", MOE, "bf16", BM=128, BN=256)
    assert not a100.ok and "uses too much shared data (0xc08c bytes, 0xc000 max)" in a100.error
    assert _sim(GROUPED, "expert_lookup_single", "H100", MOE, "bf16", BM=128, BN=256).ok
    assert _sim(FP16, "register_blocked", "A100", GEMM, "fp16", BM=256, BN=128, BK=16, TM=8).ok


def test_the_ring_off_by_one_drops_the_last_k_tile_and_nothing_else():
    v = GROUPED.variant("cp_async_pipeline")
    task = make_task(GROUPED, "H100", "bf16", GROUPED.check_shape)
    good, bad = (GROUPED.render(v, v.defaults(), task, bug) for bug in (None, "off_by_one"))
    changed = [line for line in difflib.unified_diff(good.splitlines(), bad.splitlines(), n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-    for (int kt = 0; kt < k_tiles; ++kt) {", "+    for (int kt = 0; kt < k_tiles - 1; ++kt) {"]
    # the wgmma ring shares the loop and keeps its full trip count
    wg = GROUPED.variant("wgmma_pipeline")
    assert "kt < k_tiles; ++kt" in GROUPED.render(wg, wg.defaults(), task)


def _device(name):
    rows = json.loads((ROOT / "measurements" / name).read_text())["rows"]
    return [r for r in rows if r["module"] in ("gemm_fp16_cuda", "grouped_gemm_cuda")]


def test_register_blocked_tiles_rank_as_the_h100_ran_them_and_bk32_is_not_offered():
    """H100, fp16 2048^3, TM 8 (plans k3 / k4): five tiles in the device's order but for one pair 0.6% apart; BK 32
    ran 1.2-1.9x slower than BK 16 and is off the menu."""
    rows = [r for r in _device("h100_roomK_k3.json") + _device("h100_roomK_k4.json")
            if r["variant"] == "register_blocked" and r["bug"] is None and r["ok"] and r["params"]["TM"] == 8]
    times = {}
    for r in rows:
        key = (r["params"]["BM"], r["params"]["BN"], r["params"]["BK"])
        times.setdefault(key, []).append(r["time_ms"])
    dev = {k: min(t) for k, t in times.items()}
    for bm, bn in ((128, 128), (128, 256)):
        assert dev[(bm, bn, 32)] > 1.15 * dev[(bm, bn, 16)], dev
    assert 32 not in FP16.variant("register_blocked").param("BK").values
    keys = [k for k in dev if k[2] in (8, 16) and max(k[:2]) <= 256 and k[:2] != (256, 256)]
    assert len(keys) >= 5
    sim = {k: _sim(FP16, "register_blocked", "H100", {"M": 2048, "N": 2048, "K": 2048}, "fp16",
                   BM=k[0], BN=k[1], BK=k[2], TM=8).time_ms for k in keys}
    discordant = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]
                  if (dev[a] - dev[b]) * (sim[a] - sim[b]) < 0 and abs(dev[a] / dev[b] - 1) > 0.01]
    assert not discordant, (discordant, dev, sim)


def test_the_grouped_missing_barrier_fails_every_run_on_the_h100():
    """The dropped __syncthreads of grouped_gemm_cuda's rings (cp_async_pipeline at four tiles / rings, mma_sync) at
    three menu-like shapes, five runs each with fresh inputs (plan k3): every run that built was wrong (70 of 70), so
    the bug stays (unlike the ring's old off_by_one on the wait, which an H100 once ran correct)."""
    rows = [r for r in _device("h100_roomK_k3.json") if r["module"] == "grouped_gemm_cuda" and r["bug"] == "missing_barrier"
            and r["build_ok"]]
    assert len(rows) >= 13 and all(not r["ok"] and r["nbad"] for r in rows), [(r["id"], r["ok"]) for r in rows]
    assert "missing_barrier" in GROUPED.variant("cp_async_pipeline").bugs
    assert "missing_barrier" in GROUPED.variant("mma_sync").bugs
