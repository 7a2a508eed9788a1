"""roomK (issue 30 order): grouped_gemm_cuda's cp.async ring at BK 16 (32-byte row slices) against every H100 / H200
row measured: without grouped_gemm_cuda.SHORT_SLICE the model ran BK 16 at 0.87x the device and BK 32 at 1.01x, so
BK 16 ranked ahead of BK 32 where the device ran it level or behind."""
import glob
import json
import math
from pathlib import Path

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
M = REGISTRY["grouped_gemm_cuda"]


def _ratios(bk):
    """sim / measured of the bug-free ok cp_async_pipeline rows at BK `bk` (H100 / H200 files)."""
    out = []
    for f in sorted(glob.glob(str(ROOT / "measurements" / "h[12]00_*.json"))):
        gpu = "H100" if "/h100_" in f else "H200"
        rows = json.loads(Path(f).read_text())
        for r in rows.get("rows", []) if isinstance(rows, dict) else rows:
            if (isinstance(r, dict) and r.get("module") == M.name and r.get("variant") == "cp_async_pipeline"
                    and not r.get("bug") and r.get("ok") and r.get("time_ms")):
                v = M.variant("cp_async_pipeline")
                p = {**v.defaults(), **r["params"]}
                if p["BK"] == bk:
                    t = simulate(M, v, p, make_task(M, gpu, r.get("dtype", "bf16"), r["shape"])).time_ms
                    out.append(t / r["time_ms"])
    return out


def test_bk16_and_bk32_rows_sit_at_the_same_level_of_their_model():
    means = {}
    for bk in (16, 32):
        xs = _ratios(bk)
        assert len(xs) >= 5, (bk, len(xs))
        means[bk] = math.exp(sum(map(math.log, xs)) / len(xs))
    assert all(0.93 < x < 1.07 for x in means.values()), means
    assert abs(math.log(means[16] / means[32])) < 0.06, means
