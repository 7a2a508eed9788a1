"""scripts/gpu_check_final.py (issue 30's closing check) without a GPU: the slim dataset it carries to
the H200 gives gpu-check the whole dataset's sample, and the done-when figures of both profiles."""
import importlib.util
from pathlib import Path

import pytest

from kernelstrain.gpucheck.report import summarize
from kernelstrain.gpucheck.sample import sample_cases

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def final():
    spec = importlib.util.spec_from_file_location("gpu_check_final", ROOT / "scripts" / "gpu_check_final.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_slim_dataset_gives_the_whole_datasets_sample(final, small_dataset, tmp_path):
    kept = final.slim(small_dataset, tmp_path / "slim")
    assert not list((tmp_path / "slim").glob("*.jsonl"))               # carried packed
    final.unpack(tmp_path / "slim")
    whole, slim = final.read_episodes(small_dataset), final.read_episodes(tmp_path / "slim")
    assert kept == len(slim) == sum(e["arch"] == "sm_90a" for e in whole) and 0 < kept < len(whole)
    a, b = sample_cases(whole, 80, 0), sample_cases(slim, 80, 0)
    assert a and [c["id"] for c in a] == [c["id"] for c in b] and [c["code"] for c in a] == [c["code"] for c in b]


def test_a_module_subset_keeps_those_modules_cases(final, small_dataset, tmp_path):
    """prepare --modules: the subset's sample is the whole dataset's cases of those modules, where the sample gives
    each module its floor of cases (a shorter device call of the same checks)."""
    whole = final.read_episodes(small_dataset)
    names = sorted({e["module"] for e in whole if e["arch"] == "sm_90a"})[:3]
    kept = final.slim(small_dataset, tmp_path / "sub", set(names))
    final.unpack(tmp_path / "sub")
    sub = final.read_episodes(tmp_path / "sub")
    assert kept == len(sub) > 0 and {e["module"] for e in sub} == set(names)
    a = [c["id"] for c in sample_cases(whole, 10, 0) if c["module"] in names]
    assert a and a == [c["id"] for c in sample_cases(sub, 10, 0)]


def test_prepare_writes_over_nothing(final, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("mine")
    assert final.main(["prepare", str(tmp_path / "out"), "--seed", "1", "--work", str(tmp_path / "w")]) == 2
    assert "not overwritten" in capsys.readouterr().err and (tmp_path / "out" / "x").read_text() == "mine"


def _rows(module, episode, ratio, n=4, again=1.02):
    return [{"id": f"{episode}|{i}", "episode": episode, "module": module, "variant": f"v{i}", "params": {},
             "label": "ok", "ok": True, "error": None, "time_ms": float(i + 1), "sim_ms": float(i + 1) * ratio,
             "time_ms_2": float(i + 1) * again} for i in range(n)]


def test_figures_put_each_profile_beside_its_repeat_ceiling(final, tmp_path):
    reports = {"default": summarize(_rows("rmsnorm_cuda", "e1", 1.0) + _rows("softmax_cuda", "e2", 1.1)),
               "kernelinfer": summarize(_rows("min_p_cuda", "e3", 0.4))}
    rows = {r[0]: r for r in final.figures_table(reports)}
    assert rows["geomean sim/measured"][1:] == ["1.049", "1.020", "0.400", "1.020", "0.9-1.1"]
    assert rows["Spearman within episodes, mean"][1:4] == ["1.000", "1.000", "1.000"]
    assert rows["modules with geomean outside 0.67-1.5"][3] == "1 (min_p_cuda)"
    assert rows["modules with geomean outside 0.67-1.5"][1] == "0"
    modules = {r[0]: r for r in final.module_table(reports)}
    assert modules["min_p_cuda"][2:8] == ["-"] * 6 and modules["min_p_cuda"][11] == "0.400"
    text = final.render(reports, markdown=True)
    assert text.startswith("| figure | default | repeat ceiling | kernelinfer | repeat ceiling | target |")


def test_rescore_recomputes_each_timed_rows_simulated_time():
    spec = importlib.util.spec_from_file_location("gpu_check_rescore", ROOT / "scripts" / "gpu_check_rescore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from kernelstrain.gpucheck import _sim_ms
    from kernelstrain.ops import REGISTRY
    defaults = REGISTRY["rmsnorm_cuda"].variant("warp_shuffle").defaults()
    base = {"episode": "e", "module": "rmsnorm_cuda", "variant": "warp_shuffle", "dtype": "bf16",
            "shape": {"T": 64, "D": 4096}, "label": "ok", "ok": True}
    rows = [dict(base, id=f"e|{v}", params={**defaults, "pragma_unroll": v}, time_ms=1e-3 * (5 + v)) for v in (0, 8)]
    rows.append(dict(base, id="e|bug", params=defaults, label="wrong_result", ok=False, time_ms=None, sim_ms=None))
    out = mod.rescored([dict(r, sim_ms=1.0) for r in rows], "H100")
    assert [r["sim_ms"] for r in out[:2]] == [_sim_ms(r, "H100") for r in rows[:2]] and out[2]["sim_ms"] == 1.0
