"""roomK (issue 30 order): gemm_int8_cuda's mma.sync rungs against every ok row of measurements/*.json
(scripts/roomK_resid.py): the register-bound single CTA (128 x 256 x 8 warps) and the register-staged 64-wide K
slice, which the shared _gemm_tc model had at 0.61-0.92x of the device, now within the rest's spread."""
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import roomK_resid  # noqa: E402

RUNGS = {"mma_sync", "cp_async_pipeline"}


def _rows():
    return roomK_resid.residuals({"gemm_int8_cuda"}, RUNGS)


def _geomean(rows):
    return math.exp(statistics.mean(math.log(r["sim_ms"] / r["meas_ms"]) for r in rows))


def test_single_cta_and_short_k_rows_sit_with_the_rest():
    rows = _rows()
    groups = {
        "one CTA, cp.async": [r for r in rows if r["rung"] == "cp_async_pipeline" and r["params"]["BN"] == 256
                              and r["params"]["warps"] == 8],
        "one CTA, register-staged": [r for r in rows if r["rung"] == "mma_sync" and r["params"]["BN"] == 256
                                     and r["params"]["warps"] == 8],
        "BK 64, register-staged": [r for r in rows if r["rung"] == "mma_sync" and r["params"]["BK"] == 64],
        "BK 128, register-staged": [r for r in rows if r["rung"] == "mma_sync" and r["params"]["BK"] == 128],
        "two CTAs, cp.async": [r for r in rows if r["rung"] == "cp_async_pipeline" and r["ctas"] >= 2],
    }
    for name, group in groups.items():
        assert len(group) >= 3, (name, len(group))
        assert 0.9 < _geomean(group) < 1.15, (name, _geomean(group), len(group))


def test_the_h100_2048_cube_register_staged_tiles_rank_as_measured():
    """Six tiles of mma_sync at 2048^3 on the H100 (ROOM_PLAN=edges and gpu-check seeds): 128 x 128 at BK 128 first,
    the 64-row tile last, the 128 x 256 ones between; the model before this change put 128 x 256 first."""
    rows = [r for r in _rows() if r["gpu"] == "H100" and r["rung"] == "mma_sync" and r["shape"]["M"] == 2048]
    assert len(rows) >= 5
    by_device = sorted(rows, key=lambda r: r["meas_ms"])
    by_model = sorted(rows, key=lambda r: r["sim_ms"])
    assert [id(r) for r in by_device] == [id(r) for r in by_model], [
        (r["params"], round(r["meas_ms"] * 1e3, 1), round(r["sim_ms"] * 1e3, 1)) for r in by_device]
