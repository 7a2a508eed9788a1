"""The benchmark noise the simulator draws sits in SPEC's ranges (3-10% under 10 us, 1-2% from
50 us) at their low ends, the nearest to the hardware: per time band it is never below the
robust CV of 1,958 candidates gpu-check timed twice (measurements/*_gpucheck_*.json) and at
most 2.5x their plain spread. The model it replaced (6% under 10 us, 1.5% from 50 us) was 4x
the hardware's spread at 5-10 us."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import noise_fit  # noqa: E402
from kernelstrain.sim import noise_cv  # noqa: E402


def test_the_noise_model_is_near_the_hardware_repeat_in_every_band():
    rows = noise_fit.bands(noise_fit.pairs())
    assert sum(r["pairs"] for r in rows) >= 1500
    for r in rows:
        if r["pairs"] < 100:
            continue
        assert r["measured_cv"] <= r["model_cv"] <= 2.5 * max(r["measured_cv"], r["sd_cv"]), r


def test_the_noise_is_in_specs_ranges_and_falls_with_the_kernel_time():
    assert all(0.03 <= noise_cv(t) <= 0.10 for t in (0.001, 0.005, 0.0099))
    assert all(0.01 <= noise_cv(t) <= 0.02 for t in (0.05, 1.0, 100.0))
    cvs = [noise_cv(t) for t in (0.001, 0.01, 0.02, 0.03, 0.05, 1.0)]
    assert cvs == sorted(cvs, reverse=True)
