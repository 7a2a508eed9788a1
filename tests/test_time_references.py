"""scripts/time_references.py: the paths that need no GPU (selection, refusal, merge)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "time_references.py"
sys.path.insert(0, str(ROOT / "scripts"))
import time_references as tr  # noqa: E402


def test_without_torch_it_refuses_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "rows.json"
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            f"sys.argv = ['time_references.py', '--modules', 'rmsnorm_cuda', '--out', {str(out)!r}]; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and not out.exists()
    assert p.stderr.startswith("time_references: error: timing needs torch and triton") and p.stderr.count("\n") == 1


def test_selection_and_shared_programs():
    assert tr.select("missing", tr.REFS_PATH) == sorted(set(tr.REGISTRY) - {
        r["module"] for r in json.loads(tr.REFS_PATH.read_text())["references"]})
    assert tr.main(["--modules", "nonesuch_cuda", "--out", "x.json"]) == 2
    progs = tr.programs(["rmsnorm_cuda", "rmsnorm_triton"])
    menus = [{json.dumps(s, sort_keys=True) for s in tr.REGISTRY[n].shapes} for n in ("rmsnorm_cuda", "rmsnorm_triton")]
    # the two impls' reference program is the same at a shape both menus hold: one measurement
    assert len(progs) == len(menus[0] | menus[1])
    shared = [p for p in progs if len(p["modules"]) == 2]
    assert len(shared) == len(menus[0] & menus[1]) > 0 and shared[0]["modules"] == ["rmsnorm_cuda", "rmsnorm_triton"]
    rows = tr._rows_of(shared[0], {"eager": 0.5, "compiled": None, "compile_error": "E: x"}, True)
    assert [r["same_program_as"] for r in rows] == [["rmsnorm_triton"], ["rmsnorm_cuda"]]
    assert rows[0]["compiled_ms"] is None and rows[0]["note"] == "compile: E: x"


def test_dump_keeps_the_shipped_layout_byte_for_byte():
    text = tr.REFS_PATH.read_text()
    assert tr.dump_references(json.loads(text)) == text


def test_merge_appends_new_rows_keeps_old_ones_and_updates_the_counts(tmp_path):
    refs, kernels = tmp_path / "refs.json", tmp_path / "kernels.json"
    shutil.copy(tr.REFS_PATH, refs)
    shutil.copy(tr.KERNELS_PATH, kernels)
    before = json.loads(refs.read_text())
    old = before["references"][0]
    new = {"module": "rmsnorm_cuda", "op": "rmsnorm", "dtype": "fp16", "shape": {"T": 3, "D": 4096},
           "eager_ms": 0.01, "compiled_ms": None, "note": "compile: TimeoutError"}
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps({"format": tr.ROWS_FORMAT, "meta": {"date": "2026-12-01 15:00:00 UTC", "compiled": True},
                                "rows": [new, dict(old, eager_ms=99.0)], "skipped": [
                                    {"module": "rmsnorm_cuda", "shape": {"T": 1}, "reason": "OOM"}]}))
    res = tr.merge(rows, refs, kernels)
    assert res["added"] == 1 and res["kept_existing"] == 1
    after = json.loads(refs.read_text())
    assert after["references"][:-1] == before["references"] and after["references"][-1] == new
    assert after["meta"]["notes"][:-1] == before["meta"]["notes"]
    assert "2026-12-01 15:00:00" in after["meta"]["notes"][-1] and "rmsnorm_cuda" in after["meta"]["notes"][-1]
    counts = json.loads(kernels.read_text())["meta"]["counts"]
    old_counts = json.loads(tr.KERNELS_PATH.read_text())["meta"]["counts"]
    assert counts["reference_rows"] == len(after["references"]) == old_counts["reference_rows"] + 1
    assert counts["compiled_rows_failed"] == old_counts["compiled_rows_failed"] + 1
    assert counts["kernels"] == old_counts["kernels"]
    # the shipped counts are what reference_counts computes (one definition, two places)
    assert tr.reference_counts(before["references"]) == {k: old_counts[k] for k in tr.reference_counts([])}
    assert tr.merge(rows, refs, kernels)["added"] == 0       # merging twice adds nothing
    # an eager-only row merged before takes the compiled_ms of a later run; shipped values never change
    eager_only = dict(new, shape={"T": 5, "D": 4096})
    del eager_only["compiled_ms"], eager_only["note"]
    rows.write_text(json.dumps({"format": tr.ROWS_FORMAT, "meta": {}, "rows": [eager_only]}))
    tr.merge(rows, refs, kernels)
    rows.write_text(json.dumps({"format": tr.ROWS_FORMAT, "meta": {"compiled": True}, "rows": [
        dict(eager_only, eager_ms=7.0, compiled_ms=0.004), dict(old, compiled_ms=1.0)]}))
    res = tr.merge(rows, refs, kernels)
    assert (res["added"], res["completed"], res["kept_existing"]) == (0, 1, 1)
    last = json.loads(refs.read_text())["references"]
    assert last[-1] == dict(eager_only, compiled_ms=0.004) and last[0] == old
    assert json.loads(kernels.read_text())["meta"]["counts"]["compiled_rows_alone"] == counts["compiled_rows_alone"] + 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": tr.ROWS_FORMAT, "rows": [dict(new, module="nonesuch")]}))
    with pytest.raises(tr.Usage):
        tr.merge(bad, refs, kernels)


def test_run_skips_a_failing_program_stops_at_the_budget_and_its_rows_merge(tmp_path, capsys):
    progs = tr.programs(["rmsnorm_cuda", "rmsnorm_triton", "softmax_cuda"])
    calls = []

    def measure(p, compiled):
        calls.append((p["modules"][0], compiled))
        if p["modules"] == ["softmax_cuda"] and not compiled:
            raise RuntimeError("CUDA out of memory\nmore")
        if compiled and len([c for c in calls if c[1]]) == 2:
            raise TimeoutError("torch.compile took over 150 s")
        return {"ms": 0.25, "compile_s": 1.0} if compiled else {"ms": 0.5}
    out = tmp_path / "rows.json"
    data = tr.run_programs(progs, measure, True, 1e9, out, {"date": "d"})
    assert json.loads(out.read_text()) == data and "SKIPPED RuntimeError: CUDA out of memory" in capsys.readouterr().out
    n_soft = len(tr.REGISTRY["softmax_cuda"].shapes)
    assert len(data["skipped"]) == n_soft and {s["module"] for s in data["skipped"]} == {"softmax_cuda"}
    assert sum(1 for c in calls if c[1]) == len(progs) - n_soft          # no compile of an eager failure
    assert len(data["rows"]) == sum(len(p["modules"]) for p in progs if p["modules"] != ["softmax_cuda"])
    failed = [r for r in data["rows"] if r["compiled_ms"] is None]
    assert failed and all(r["note"].startswith("compile: TimeoutError") for r in failed)
    # a spent budget: nothing new starts, the programs are skipped with the reason
    spent = tr.run_programs(progs[:2], measure, True, -1.0, tmp_path / "spent.json", {})
    assert not spent["rows"] and all("budget" in s["reason"] for s in spent["skipped"])
    refs, kernels = tmp_path / "refs.json", tmp_path / "kernels.json"
    shutil.copy(tr.REFS_PATH, refs)
    shutil.copy(tr.KERNELS_PATH, kernels)
    shipped = {(r["module"], json.dumps(r["shape"], sort_keys=True)) for r in json.loads(refs.read_text())["references"]}
    fresh = [r for r in data["rows"] if (r["module"], json.dumps(r["shape"], sort_keys=True)) not in shipped]
    assert tr.merge(out, refs, kernels)["added"] == len(fresh)
