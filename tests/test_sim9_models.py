"""Launch-model fixes of issue 30, ninth session (helper sim): each against the stored device rows it rests on (never
the held-out gpu-check seeds 61717 / 62828 / 91331 / 92442), so that a change back fails here."""
import json
import math
from pathlib import Path

import pytest

from test_sim31_models import sim_us
from test_simB_models import stored_rows

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"

# grouped_gemm_cuda wgmma_pipeline on the H100 past T = 512 (measurements/h100_roomK_j1.json, the lead's run of
# roomK's plan k11 on 2026-12-07): (shape, BM, measured us)
BIG = ((dict(T=2048, E=64, K=2048, N=2816, topk=6), 64, 1859.3), (dict(T=2048, E=64, K=2048, N=2816, topk=6), 128, 1418.8),
       (dict(T=512, E=8, K=4096, N=14336, topk=2), 64, 1729.3), (dict(T=512, E=8, K=4096, N=14336, topk=2), 128, 1216.6),
       (dict(T=4096, E=8, K=4096, N=14336, topk=2), 64, 11057.4), (dict(T=4096, E=8, K=4096, N=14336, topk=2), 128, 8089.2))


@pytest.mark.parametrize("shape,bm,measured", BIG)
def test_grouped_wgmma_pipeline_streams_its_tiles_at_the_sm_rate(shape, bm, measured):
    """BN 128 BK 64 4 stages at T >= 512: the roofline had these 0.34-0.54x of the H100 (635 us at T=2048 BM 64);
    the SM pulls the tiles' real bytes at grouped_gemm_cuda.WGMMA_STREAM_BPS_SM."""
    t = sim_us("grouped_gemm_cuda", "wgmma_pipeline", {"BN": 128, "STAGES": 4, "BK": 64, "BM": bm}, shape, "bf16")
    assert 0.8 <= t / measured <= 1.3, t
    # ...and cp_async_pipeline, which the H100 ran 1.5-2x faster at T=2048 (926.7 us BM 128 BN 128 4 stages BK 32),
    # is the faster rung in the model too
    if shape["T"] == 2048:
        cp = sim_us("grouped_gemm_cuda", "cp_async_pipeline", {"BM": 128, "BN": 128, "STAGES": 4, "BK": 32}, shape,
                    "bf16")
        assert cp < t


def test_grouped_wgmma_pipeline_stored_rows_of_both_cards():
    """Every stored wgmma_pipeline row outside the held-out seeds (H100 and H200, T=16 to 4096): within 0.8-1.3x,
    geomean 0.9-1.1 (without the stream floor: geomean 0.81, the T >= 512 rows at 0.34-0.54x)."""
    from kernelstrain.gpucheck import _sim_ms
    rows = stored_rows("grouped_gemm_cuda", "wgmma_pipeline")
    assert len(rows) >= 30
    logs = [math.log(_sim_ms(r, r["gpu"]) / r["time_ms"]) for r in rows]
    assert 0.9 <= math.exp(sum(logs) / len(logs)) <= 1.1
    assert all(math.log(0.8) <= x <= math.log(1.3) for x in logs), [round(math.exp(x), 2) for x in logs]


def test_triton_gemm_at_an_unspecialized_k_loads_one_element_at_a_time():
    """gemm_fp16_triton's pointer rungs at K = 776 / 777 (not divisible by 16: Triton proves no 16-byte row start, so
    no cp.async; ptxas 255 registers and spill): every H100 row of measurements/h100_gpucheck_kigrid.json within
    0.75-1.4x (the roofline had them at 0.03-0.30x uncalibrated, the shipped fit 0.22-1.1x); K = 768 has no floor."""
    from kernelstrain.gpucheck import _sim_ms
    from kernelstrain.ops import REGISTRY
    from kernelstrain.ops.matmul.gemm_fp16_triton import narrow_k_s
    from kernelstrain.tasks import make_task
    data = json.loads((MEASUREMENTS / "h100_gpucheck_kigrid.json").read_text())
    rows = [r for r in data["rows"] if r.get("module") == "gemm_fp16_triton" and r.get("time_ms") and r.get("ok")
            and not r.get("bug") and r["variant"] in ("tl_dot_blocked", "grouped_swizzle", "pipelined_stages")]
    assert len(rows) >= 30
    ratios = [_sim_ms(r, "H100") / r["time_ms"] for r in rows]
    assert all(0.75 <= x <= 1.4 for x in ratios), sorted(round(x, 2) for x in ratios)
    m = REGISTRY["gemm_fp16_triton"]
    v = m.variant("pipelined_stages")
    tile = {**v.defaults(), "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}
    aligned = make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 768})
    assert m.launch(v, tile, aligned).issue_s == 0.0
    odd = make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 776})
    assert m.launch(v, tile, odd).issue_s == narrow_k_s(m.launch(v, tile, odd), odd, 128, 128, 32) > 50e-6
