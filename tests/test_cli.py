"""The command line through main([...]): every command, bad input, clean errors."""
import json

import pytest

from kernelstrain.cli import build_parser, main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_is_documented():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == {"generate", "stats", "holdout", "validate", "qa", "verify", "gpu-check", "ops", "sim",
                                "merge", "report", "show", "tasks", "workdir", "export"}
    for name, sp in sub.choices.items():
        assert sp.description and len(sp.description) > 20, name


def test_generate_writes_all_files_and_validates(small_dataset, capsys):
    names = sorted(p.name for p in small_dataset.iterdir())
    assert names == ["README.md", "episodes.jsonl", "manifest.json", "qa.json", "sft_multiturn.jsonl", "sft_multiturn.validation.jsonl",
                     "sft_prompt_completion.jsonl", "sft_prompt_completion.validation.jsonl", "sft_steps.jsonl",
                     "sft_steps.validation.jsonl", "stats.json", "tasks_holdout.jsonl", "tasks_holdout_unseen_op.jsonl"]
    code, out, _ = run(capsys, "validate", str(small_dataset))
    assert code == 0 and "no problems" in out
    qa = json.loads((small_dataset / "qa.json").read_text())
    code, out, _ = run(capsys, "qa", str(small_dataset), "--json")
    assert json.loads(out) == qa and code == (0 if qa["pass"] else 1)
    assert {c["name"] for c in qa["checks"]} >= {"noise_keeps", "kind_mismatches", "roofline_violations"}


def test_stats_human_and_json(small_dataset, capsys):
    code, out, _ = run(capsys, "stats", str(small_dataset))
    assert code == 0 and "episodes        40" in out and "compile_error" in out
    code, out, _ = run(capsys, "stats", str(small_dataset), "--json")
    stats = json.loads(out)
    assert stats["episodes"] == 40 and sum(stats["status"].values()) == stats["steps"]


def test_ops_lists_registry(capsys):
    code, out, _ = run(capsys, "ops", "--json")
    rows = json.loads(out)
    assert code == 0 and all(len(r["variants"]) >= 4 for r in rows)
    assert {"module", "op", "impl", "family", "dims", "dtypes", "variants"} <= set(rows[0])


def test_sim_json(capsys):
    code, out, _ = run(capsys, "sim", "--gpu", "H200", "--op", "rmsnorm", "--impl", "cuda", "--dtype", "fp16",
                       "--shape", "T=4096,D=4096", "--json")
    r = json.loads(out)
    assert code == 0 and list(r) == ["flops", "bytes", "floor_ms", "baseline_ms", "best_ms", "best_variant", "best_params"]
    assert r["floor_ms"] <= r["best_ms"] < r["baseline_ms"]


def test_holdout_is_deterministic(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run(capsys, "holdout", "--frac", "0.08", "--out", str(a))[0] == 0
    assert run(capsys, "holdout", "--frac", "0.08", "--out", str(b))[0] == 0
    assert (a / "tasks_holdout.jsonl").read_bytes() == (b / "tasks_holdout.jsonl").read_bytes()


@pytest.mark.parametrize("argv, needle", [
    (["generate", "--seed", "abc", "--out", "{tmp}/o"], "invalid seed"),
    (["generate", "--seed", "0", "--episodes", "-1", "--out", "{tmp}/o"], "must be >= 1"),
    (["generate", "--seed", "0", "--out", "{file}"], "not a directory"),
    (["generate", "--seed", "0", "--out", "{tmp}/o", "--config", "{badprofile}"], "unknown key 'steps.bogus'"),
    (["generate", "--seed", "0", "--out", "{tmp}/o", "--config", "{typeprofile}"], "'profile.episodes' must be int"),
    (["generate", "--seed", "0", "--out", "{tmp}/o", "--shard", "3/2"], "--shard"),
    (["holdout", "--frac", "1.5", "--out", "{tmp}/o"], "--frac"),
    (["stats", "{tmp}/nothing"], "not a dataset directory"),
    (["sim", "--gpu", "H100", "--op", "nope", "--impl", "cuda", "--dtype", "fp16", "--shape", "T=1"], "no op module"),
    (["sim", "--gpu", "H100", "--op", "rmsnorm", "--impl", "cuda", "--dtype", "fp16", "--shape", "T=1"], "missing D"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(argv, needle, tmp_path, capsys):
    file = tmp_path / "a_file"
    file.write_text("x")
    bad = tmp_path / "bad.toml"
    from kernelstrain.profiles import DEFAULT_PROFILE
    text = DEFAULT_PROFILE.read_text()
    bad.write_text(text.replace("[steps]", "[steps]\nbogus = 1"))
    typed = tmp_path / "typed.toml"
    typed.write_text(text.replace("episodes = 11514", 'episodes = "many"'))
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [a.format(tmp=tmp_path, file=file, badprofile=bad, typeprofile=typed) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelstrain: error: ") and needle in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert file.read_text() == "x"


def test_non_empty_out_needs_force(small_dataset, tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run(capsys, "generate", "--seed", "0", "--out", str(out), "--episodes", "2", "--quiet")
    assert code == 2 and "not empty" in err and sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert run(capsys, "generate", "--seed", "0", "--out", str(out), "--episodes", "2", "--quiet", "--force")[0] == 0
    assert (out / "keep.txt").read_text() == "mine" and (out / "stats.json").exists()
