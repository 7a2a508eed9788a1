"""`validate` finds broken invariants and names file and line."""
import json

from kernelstrain.cli import main


def rewrite_episode(path, line_no, change):
    lines = path.read_text().splitlines()
    ep = json.loads(lines[line_no - 1])
    change(ep)
    lines[line_no - 1] = json.dumps(ep, ensure_ascii=False, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


def validate(capsys, d):
    code = main(["validate", str(d)])
    return code, capsys.readouterr().out


def first_failed_step(ep):
    return next(s for s in ep["steps"] if s["status"] != "ok")


def test_kept_failure_is_reported_with_file_and_line(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1)
                if any(s["status"] != "ok" for s in json.loads(l)["steps"]))
    rewrite_episode(path, line, lambda ep: first_failed_step(ep).update(kept=True))
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and f"episodes.jsonl:{line}" in out and "non-ok step is kept" in out


def test_broken_running_minimum(dataset_copy, capsys):
    rewrite_episode(dataset_copy / "episodes.jsonl", 3, lambda ep: ep["steps"][-1].update(best_ms=1e-9))
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and "episodes.jsonl:3" in out and "is not the recorded best" in out


def test_kind_that_does_not_say_what_changed(dataset_copy, capsys):
    def relabel(ep):
        s = next(s for s in ep["steps"] if s["kind"] == "structural")
        s["kind"] = "param_sweep"
    rewrite_episode(dataset_copy / "episodes.jsonl", 2, relabel)
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and "episodes.jsonl:2" in out and "kind param_sweep but the variant changed" in out


def test_time_on_failed_step(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1)
                if any(s["status"] != "ok" for s in json.loads(l)["steps"]))
    rewrite_episode(path, line, lambda ep: first_failed_step(ep).update(time_ms=1.0))
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and "time_ms must be null" in out


def test_wgmma_in_ok_step_on_a100(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    lines = path.read_text().splitlines()
    line = next(i for i, l in enumerate(lines, 1) if json.loads(l)["gpu"] == "A100")
    def plant(ep):
        s = next(s for s in ep["steps"] if s["status"] == "ok")
        s["code"] += '\nasm volatile("wgmma.fence.sync.aligned;");'
    rewrite_episode(path, line, plant)
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and "uses wgmma on A100" in out


def test_truncated_file_is_a_clean_error(dataset_copy, capsys):
    path = dataset_copy / "sft_steps.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    code = main(["validate", str(dataset_copy)])
    captured = capsys.readouterr()
    assert code in (1, 2)
    assert "sft_steps.jsonl" in captured.out + captured.err


def test_holdout_leak_is_found(dataset_copy, capsys):
    ep = json.loads((dataset_copy / "episodes.jsonl").read_text().splitlines()[0])
    hold = dataset_copy / "tasks_holdout.jsonl"
    row = json.loads(hold.read_text().splitlines()[0])
    row.update(module=ep["module"], gpu=ep["gpu"], dtype=ep["dtype"], shape=ep["shape"])
    hold.write_text(hold.read_text() + json.dumps(row) + "\n")
    code, out = validate(capsys, dataset_copy)
    assert code == 1 and "held-out combo" in out


def test_missing_stats_is_exit_2(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    assert main(["validate", str(tmp_path / "d")]) == 2
    assert "stats.json: missing" in capsys.readouterr().err
