"""`kernelstrain gpu-check` without a GPU: the sampling, the report and the error paths."""
import importlib.util
import json

import pytest

from kernelstrain import gpucheck
from kernelstrain.cli import main
from kernelstrain.errors import UsageError
from kernelstrain.fields import as_dict
from kernelstrain.gpucheck import catalog_gpu, runtime
from kernelstrain.gpucheck.report import outcome, render, summarize
from kernelstrain.gpucheck.sample import MIN_PER_EPISODE, candidates, fits, sample_cases
from kernelstrain.ops import REGISTRY
from kernelstrain.reading import read_jsonl
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


@pytest.fixture(scope="module")
def episodes(small_dataset):
    return [ep for _, ep in read_jsonl(small_dataset / "episodes.jsonl")]


def test_sample_is_stratified_deterministic_and_runnable(episodes):
    cases = sample_cases(episodes, 120, seed=1)
    assert cases and cases == sample_cases(episodes, 120, seed=1)
    assert [c["id"] for c in cases] != [c["id"] for c in sample_cases(episodes, 120, seed=2)]
    by_id = {ep["id"]: ep for ep in episodes}
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        ep = by_id[c["episode"]]
        step = next(s for s in ep["steps"] if s["step"] == c["step"])
        assert ep["arch"] == "sm_90a" and c["label"] == step["status"] in ("ok", "wrong_result")
        assert step["kind"] != "rebench" and c["code"]
        if c["at"] == "task":
            assert c["code"] == step["code"] and c["shape"] == as_dict(ep["shape"])
    # every sm_90a module with candidates is there; an episode's ok picks spread over its variants
    modules = {ep["module"] for ep in episodes if ep["arch"] == "sm_90a" and any(candidates(ep))}
    assert {c["module"] for c in cases} == modules
    for ep_id in {c["episode"] for c in cases if c["label"] == "ok"}:
        picked = [c for c in cases if c["episode"] == ep_id and c["label"] == "ok"]
        tags = {s["tag"] for s in candidates(by_id[ep_id]) if s["status"] == "ok"}
        assert len({c["variant"] for c in picked}) == min(len(tags), len(picked))


def test_a_small_sample_still_times_min_per_episode_candidates_of_each_episode(episodes):
    """A sample smaller than modules x MIN_PER_EPISODE does not shrink the episodes' rankings to 3-4 candidates,
    whose Spearman is mostly the hardware's noise: every sampled episode holding MIN_PER_EPISODE distinct ok
    candidates gives that many."""
    cases = sample_cases(episodes, 10, seed=0)
    by_id = {ep["id"]: ep for ep in episodes}
    picked = {}
    for c in cases:
        if c["label"] == "ok":
            picked.setdefault(c["episode"], []).append(c)
    assert picked
    for ep_id, chosen in picked.items():
        have = len([s for s in candidates(by_id[ep_id]) if s["status"] == "ok"])
        assert len(chosen) >= min(have, MIN_PER_EPISODE), ep_id
    assert sum(len(v) >= MIN_PER_EPISODE for v in picked.values()) > len(picked) / 2


def test_sample_of_a_subset_holding_the_sampled_episodes_is_the_same(episodes):
    cases = sample_cases(episodes, 80, seed=0)
    keep = {c["episode"] for c in cases}
    for module in {ep["module"] for ep in episodes}:
        keep.add(next(ep["id"] for ep in episodes if ep["module"] == module))
    subset = [ep for ep in episodes if ep["id"] in keep]
    assert [c["id"] for c in sample_cases(subset, 80, seed=0)] == [c["id"] for c in cases]


def test_fits_rejects_shapes_far_beyond_the_check_shape():
    m = REGISTRY["rmsnorm_cuda"]
    assert fits(m, "fp16", {"T": 4096, "D": 4096})
    assert not fits(m, "fp16", {"T": 4096 * 64, "D": 16384})


def _row(i, label="ok", ok=True, error=None, sim=None, meas=None, again=None, module="m1", episode="e1"):
    return {"id": f"{episode}|{i}", "episode": episode, "module": module, "variant": f"v{i % 3}", "params": {},
            "label": label, "ok": ok, "error": error, "time_ms": meas, "sim_ms": sim, "time_ms_2": again}


def test_report_counts_labels_and_ranks_against_the_repeat_ceiling():
    rows = [_row(i, sim=float(i + 1), meas=float(i + 1) * 1.05, again=float(i + 1) * 1.06) for i in range(5)]
    rows += [_row(10 + i, module="m2", episode="e2", sim=float(5 - i), meas=float(i + 1)) for i in range(4)]
    rows += [_row(20, label="wrong_result", ok=False),
             _row(21, label="wrong_result", ok=True),                                   # the hardware passes it
             _row(22, label="wrong_result", ok=False, error="kernel error: cudaErrorIllegalAddress (700)"),
             _row(23, ok=False, error="launch error: cudaErrorInvalidValue (1)"),       # an ok label that faults
             _row(24, ok=False, error="not run: time budget spent")]
    s = summarize(rows)
    assert s["counts"]["ok"] == {"match": 9, "fault": 1, "notrun": 1}
    assert s["counts"]["wrong_result"] == {"mismatch": 1, "match": 1, "fault": 1}
    assert s["ok_match"] == pytest.approx(9 / 10) and s["wrong_fail"] == pytest.approx(2 / 3)
    assert s["timing"]["n"] == 9 and s["timing"]["groups"] == 2
    assert s["timing"]["spearman_mean"] == pytest.approx(0.0)                     # +1 and -1
    assert s["repeat"]["spearman_mean"] == pytest.approx(1.0)
    assert s["modules"]["m2"]["spearman_pooled"] == pytest.approx(-1.0)
    negative = next(t for t in s["targets"] if "negative" in t["what"])
    assert negative["modules"] == ["m2"] and not negative["met"]
    assert [t["met"] for t in s["targets"][:2]] == [False, False]          # labels: 100 % / 100 % or not met
    off = next(t for t in s["targets"] if "geomean outside" in t["what"])
    assert off["value"] == 0 and off["met"]                              # m1 1/1.05, m2 1.0 per module
    assert len(s["problems"]) == 2
    text = render(s, "NVIDIA H200")
    assert "m1" in text and "m2" in text and "labels the hardware contradicts" in text
    json.dumps(s)


def test_a_module_far_from_the_hardware_misses_the_band_target():
    rows = [_row(i, sim=float(i + 1), meas=float(i + 1)) for i in range(4)]
    rows += [_row(10 + i, module="slow", episode="e2", sim=float(i + 1) * 0.5, meas=float(i + 1)) for i in range(4)]
    s = summarize(rows)
    off = next(t for t in s["targets"] if "geomean outside" in t["what"])
    assert off["modules"] == ["slow"] and not off["met"]
    gm = next(t for t in s["targets"] if t["what"].startswith("geomean"))
    assert gm["value"] == pytest.approx(0.5 ** 0.5)


def test_outcome_classes():
    assert outcome({"ok": True}) == "match"
    assert outcome({"ok": False, "error": None}) == "mismatch"
    assert outcome({"ok": False, "error": "timing pass: wrong after the timed re-runs (race?)"}) == "mismatch"
    assert outcome({"ok": False, "error": "timeout: no result after 60 s (hang?)"}) == "notrun"
    assert outcome({"ok": False, "error": "RuntimeError: CUDA error: misaligned address"}) == "fault"


def test_catalog_gpu_is_the_card_itself_or_a_refusal():
    assert catalog_gpu("NVIDIA H200") == "H200"
    assert catalog_gpu("NVIDIA H100 80GB HBM3") == "H100"
    # sm_90a cards no catalog profile describes, and cards the sm_90a builds cannot run on: never another GPU's times
    for other in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H800",
                  "NVIDIA GeForce RTX 4090", "NVIDIA A100-SXM4-80GB"):
        with pytest.raises(UsageError, match="not one of them"):
            catalog_gpu(other)


@pytest.mark.parametrize("device, gpu", [("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200")])
def test_gpu_check_simulates_the_card_it_runs_on(small_dataset, tmp_path, monkeypatch, capsys, device, gpu):
    """The sim column is the local card's profile, and the report says which (the hardware passes stubbed:
    each ok candidate 'measures' 1 ms)."""
    monkeypatch.setattr(gpucheck, "require_gpu", lambda: device)
    monkeypatch.setattr(gpucheck, "_build_all", lambda cases, build_dir, jobs: [
        c.update(build_ok=True, so=None, src=None, log="", compile_s=0.0) for c in cases])
    monkeypatch.setattr(gpucheck, "_passes", lambda cases, work, jobs, budget: [
        dict(c, ok=c["label"] == "ok", error=None, time_ms=1.0 if c["label"] == "ok" else None) for c in cases])
    report = tmp_path / "r.json"
    gpucheck.gpu_check(small_dataset, sample=40, report=report, build_dir=tmp_path)
    out = json.loads(report.read_text())
    assert out["device"] == device and out["sim_gpu"] == gpu
    assert f"gpu-check on {device} (simulated as {gpu})" in capsys.readouterr().out
    timed = [r for r in out["rows"] if r["sim_ms"]]

    def sim_on(r, name):
        module = REGISTRY[r["module"]]
        return simulate(module, module.variant(r["variant"]), r["params"],
                        make_task(module, name, r["dtype"], r["shape"])).time_ms
    assert timed and all(r["sim_ms"] == sim_on(r, gpu) for r in timed)
    # the two profiles differ (HBM 3.35 vs 4.8 TB/s), so the wrong card's column would show here
    other = "H200" if gpu == "H100" else "H100"
    assert sum(r["sim_ms"] != sim_on(r, other) for r in timed) > len(timed) / 2


def test_without_torch_a_one_line_usage_error(small_dataset, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["gpu-check", str(small_dataset)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kernelstrain: error: gpu-check needs PyTorch with CUDA")


def test_report_path_and_dataset_are_checked_before_any_work(small_dataset, tmp_path, capsys):
    assert main(["gpu-check", str(small_dataset), "--report", str(tmp_path / "missing" / "r.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["gpu-check", str(small_dataset), "--report", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["gpu-check", str(tmp_path)]) == 2
    assert "stats.json: missing" in capsys.readouterr().err      # not a dataset: no run to read


def test_parallel_builds_of_one_source_each_get_the_library(tmp_path, monkeypatch):
    """gpu-check builds in threads; two cases with the same source must not share nvcc's output
    file (the H200 run on seed 5151 stopped on that race)."""
    import concurrent.futures
    import subprocess
    import time
    from kernelstrain.gpucheck import runtime

    outputs = []

    def fake_nvcc(cmd, **kw):
        out = cmd[cmd.index("-o") + 1]
        outputs.append(out)
        time.sleep(0.05)
        with open(out, "w") as f:
            f.write("lib")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runtime.subprocess, "run", fake_nvcc)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: runtime.build("one source", tmp_path), range(6)))
    assert all(r["ok"] and r["so"] and (tmp_path / r["so"]).exists() for r in results)
    assert len(set(outputs)) == len(outputs)
    assert not list(tmp_path.glob("*.tmp.so"))


def test_a_parameter_grid_folder_is_read_without_a_run_record(small_dataset, tmp_path):
    """scripts/shape_grid.py writes episodes.jsonl alone (no stats.json, no manifest): gpu-check reads
    that file; a dataset directory is still read through its layout."""
    from kernelstrain.gpucheck import rows_file
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "episodes.jsonl").write_bytes((small_dataset / "episodes.jsonl").read_bytes())
    assert rows_file(grid) == grid / "episodes.jsonl"
    assert rows_file(small_dataset) == small_dataset / "episodes.jsonl"
    (grid / "stats.json").write_text("{}")          # a run record that is not one is refused, not skipped
    with pytest.raises(Exception, match="stats"):
        rows_file(grid)


OOM = "OutOfMemoryError: CUDA out of memory. Tried to allocate 7.83 GiB. GPU 0 has a total capacity of 79.18 GiB"


def test_a_case_out_of_memory_among_the_parallel_workers_runs_again_alone(tmp_path, monkeypatch):
    """gpu-check's own concurrency is no verdict: a case whose allocation failed while other workers held the GPU
    runs again alone; one that fails alone too is 'not run', neither a fault of an ok label nor a failing
    wrong_result."""
    cases = [{"idx": i, "id": f"e|{i}", "episode": "e", "module": "m1", "variant": "v", "params": {}, "label": label}
             for i, label in enumerate(("ok", "ok", "ok", "wrong_result"))]
    calls = []

    def fake_run_cases(batch, work, path, timeout, deadline, workers, label):
        calls.append((label, workers, [c["idx"] for c in batch]))
        out = {}
        for c in batch:
            crowded_out = c["idx"] == 1 and workers > 1
            never_fits = c["idx"] in (2, 3)
            failed = crowded_out or never_fits
            out[c["idx"]] = {"idx": c["idx"], "ok": not failed, "error": OOM if failed else None, "time_ms": 1.0}
        return out
    monkeypatch.setattr(runtime, "run_cases", fake_run_cases)
    rows = gpucheck._passes(cases, tmp_path, jobs=16, budget_s=100.0)
    assert calls[0][0] == "check" and calls[1] == ("alone", 1, [1, 2, 3])
    by_idx = {r["idx"]: r for r in rows}
    assert by_idx[1]["ok"] and outcome(by_idx[1]) == "match"
    assert [outcome(by_idx[i]) for i in (2, 3)] == ["notrun", "notrun"]
    assert "out of GPU memory alone" in by_idx[2]["error"]
    s = summarize([dict(r, sim_ms=None) for r in rows])
    assert s["ok_match"] == 1.0 and s["wrong_fail"] is None and not s["problems"]
    assert not gpucheck.out_of_memory({"ok": False, "error": "RuntimeError: CUDA error: misaligned address"})


def test_the_spearman_mean_comes_with_its_standard_error_over_the_episodes():
    """Episodes of 3-4 candidates give a noisy mean: the report says how noisy (sd / sqrt(episodes))."""
    agree = [_row(i, sim=float(i + 1), meas=float(i + 1), episode="e1") for i in range(3)]
    reverse = [_row(10 + i, sim=float(3 - i), meas=float(i + 1), episode="e2") for i in range(3)]
    s = summarize(agree + reverse)
    assert s["timing"]["spearman_mean"] == pytest.approx(0.0)
    assert s["timing"]["spearman_se"] == pytest.approx(1.0)          # rhos 1 and -1: sample sd sqrt(2), / sqrt(2)
    assert "Spearman mean 0.000 (standard error 1.000)" in render(s)
    assert summarize(agree)["timing"]["spearman_se"] is None       # one episode: no spread to measure


def test_timed_runs_time_the_tasks_work():
    """Paged decode's ragged seq_lens are checked for correctness but never timed: the task and the simulator time
    full-length S (the ragged rows of seeds 98181/98282 timed ~0.75 of its KV bytes); other prepares stay."""
    from kernelstrain.gpucheck.adapters import WORK_SHRINKING_PREPARE, prepare
    from kernelstrain.ops import REGISTRY
    for name in WORK_SHRINKING_PREPARE:
        module = REGISTRY[name]
        assert prepare(module) is not None and prepare(module, timing=False) is not None
        assert prepare(module, timing=True) is None
    kept = [m for m in REGISTRY.values() if m.name not in WORK_SHRINKING_PREPARE and prepare(m)]
    assert kept and all(prepare(m, timing=True) is prepare(m) for m in kept)
