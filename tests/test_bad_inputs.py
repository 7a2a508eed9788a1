"""Bad input to every command: exit 2, one line `kernelstrain: error: ...`, no traceback, never
the internal-error guard (exit 3), and nothing touched (a snapshot of every file before and
after). Plus full disks, and the guard itself."""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from corrupt import dumps, lines, refresh_hashes, rewrite_row, snapshot, write_lines
from kernelstrain.cli import main
from kernelstrain.profiles import DEFAULT_PROFILE

PROFILE = DEFAULT_PROFILE.read_text()


MODULES = PROFILE[PROFILE.index("modules = ["):PROFILE.index("]", PROFILE.index("modules = [")) + 1]


def profile_with(old: str, new: str) -> str:
    assert old in PROFILE, old
    return PROFILE.replace(old, new, 1)


BAD_PROFILES = {   # name -> profile text (each one problem)
    "episodes_str": profile_with("episodes = 11514", 'episodes = "many"'),
    "episodes_zero": profile_with("episodes = 11514", "episodes = 0"),
    "episodes_neg": profile_with("episodes = 11514", "episodes = -5"),
    "episodes_huge": profile_with("episodes = 11514", "episodes = 1000000000000"),
    "episodes_float": profile_with("episodes = 11514", "episodes = 1.5"),
    "episodes_bool": profile_with("episodes = 11514", "episodes = true"),
    "combos_zero": profile_with("combos = 2313", "combos = 0"),
    "combos_str": profile_with("combos = 2313", 'combos = "x"'),
    "gpus_empty": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', "gpus = []"),
    "gpus_nested": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', 'gpus = [["A100"]]'),
    "gpus_unknown": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', 'gpus = ["Z100"]'),
    "gpus_string": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', 'gpus = "A100"'),
    "gpus_int": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', "gpus = [1]"),
    "gpus_dup": profile_with('gpus = ["A100", "H100", "RTX4090", "MI300X"]', 'gpus = ["A100", "A100"]'),
    "modules_empty": profile_with(MODULES, "modules = []"),
    "modules_nested": profile_with(MODULES, 'modules = [["rmsnorm_cuda"]]'),
    "modules_table": profile_with(MODULES, "modules = [{x = 1}]"),
    "modules_unknown": profile_with(MODULES, 'modules = ["nope_cuda"]'),
    "modules_word": profile_with(MODULES, 'modules = "some"'),
    "modules_int": profile_with(MODULES, "modules = 3"),
    "modules_dup": profile_with(MODULES, 'modules = ["rmsnorm_cuda", "rmsnorm_cuda"]'),
    "name_empty": profile_with('name = "kernelstrain"', 'name = ""'),
    "name_space": profile_with('name = "kernelstrain"', 'name = "a b"'),
    "name_int": profile_with('name = "kernelstrain"', "name = 5"),
    "description_empty": "\n".join('description = " "' if line.startswith("description =") else line
                                   for line in PROFILE.splitlines()),
    "steps_min_zero": profile_with("min = 8", "min = 0"),
    "steps_max_below_min": profile_with("max = 80", "max = 5"),
    "steps_mean_absurd": profile_with("mean = 24.5", "mean = 5e6"),
    "steps_max_absurd": profile_with("max = 80", "max = 100000"),
    "steps_mean_nan": profile_with("mean = 24.5", "mean = nan"),
    "steps_mean_inf": profile_with("mean = 24.5", "mean = inf"),
    "steps_min_str": profile_with("min = 8", 'min = "8"'),
    "steps_unknown_key": profile_with("[steps]", "[steps]\nbogus = 1"),
    "steps_missing_mean": profile_with("mean = 24.5", ""),
    "status_high": profile_with("compile_error = 0.033", "compile_error = 0.6"),
    "status_negative": profile_with("compile_error = 0.033", "compile_error = -0.1"),
    "status_nan": profile_with("wrong_result = 0.026", "wrong_result = nan"),
    "status_sum": profile_with("compile_error = 0.033\nwrong_result = 0.026", "compile_error = 0.49\nwrong_result = 0.49"),
    "status_str": profile_with("wrong_result = 0.026", 'wrong_result = "x"'),
    "holdout_frac_one": profile_with("frac = 0.08", "frac = 1.0"),
    "holdout_frac_neg": profile_with("frac = 0.08", "frac = -0.1"),
    "holdout_frac_nan": profile_with("frac = 0.08", "frac = nan"),
    "holdout_seed_neg": profile_with("seed = 0", "seed = -1"),
    "holdout_seed_str": profile_with("seed = 0", 'seed = "x"'),
    "timestamps_str": profile_with("timestamps = false", 'timestamps = "yes"'),
    "extra_table": PROFILE + "\n[extra]\nx = 1\n",
    "missing_table": PROFILE.replace("[output]\ntimestamps = false", ""),
    "not_a_table": re.sub(r"\[holdout\]\n(?:[^\[]*\n)", "holdout = 5\n\n", PROFILE, count=1),
    "toml_syntax": PROFILE + "\nthis is = = not toml\n",
    "empty_file": "",
}


def _gen(out, *args):
    assert main(["generate", "--seed", "0", "--out", str(out), "--workers", "1", "--quiet", *args]) == 0


def _interrupted(out, episodes="8", point="episode:5"):
    env = {**os.environ, "KERNELSTRAIN_FAULT": point, "KERNELSTRAIN_CHECKPOINT_EPISODES": "2"}
    r = subprocess.run([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(out),
                        "--episodes", episodes, "--workers", "1", "--quiet"], env=env, capture_output=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    # the killed run's lock file stays, naming a dead pid (the kernel dropped the lock itself); the
    # next writer takes it over and removes it: remove it here so the snapshots see only data
    (out.parent / f".{out.name}.kernelstrain-lock").unlink()
    return out.parent / f".{out.name}.kernelstrain-staging"


def _edit_json(path, change):
    state = json.loads(path.read_text())
    path.write_text(json.dumps(change(state)))


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    """Everything the cases point at, built once."""
    w = tmp_path_factory.mktemp("world")
    (w / "afile").write_text("x")
    (w / "adir").mkdir()
    for name, text in BAD_PROFILES.items():
        (w / f"{name}.toml").write_text(text)
    (w / "bom.toml").write_bytes(b"\xef\xbb\xbf" + PROFILE.encode())
    (w / "latin1.toml").write_bytes(PROFILE.replace("Long-horizon", "Long-horizon \xe9").encode("latin-1"))
    _gen(w / "data", "--episodes", "6")
    for i in range(2):
        _gen(w / f"s{i}", "--episodes", "6", "--shard", f"{i}/2")
    _gen(w / "s1_e8", "--episodes", "8", "--shard", "1/2")
    main(["generate", "--seed", "1", "--out", str(w / "s1_seed1"), "--episodes", "6", "--shard", "1/2", "--quiet",
          "--workers", "1"])
    shard_variants(w)
    stats_variants(w)
    resume_variants(w)
    (w / "data_with_config").mkdir()
    (w / "data_with_config" / "p.toml").write_text(PROFILE)
    return w


def shard_variants(w):
    def copy(name):
        shutil.copytree(w / "s1", w / name)
        return w / name
    d = copy("s1_byte")          # a changed byte, hashes not refreshed
    raw = bytearray((d / "sft_steps.jsonl").read_bytes())
    raw[500] = ord("#") if raw[500] != ord("#") else ord("%")
    (d / "sft_steps.jsonl").write_bytes(bytes(raw))
    d = copy("s1_badjson")       # a corrupt line, hashes refreshed: only parsing finds it
    rows = lines(d / "episodes.jsonl")
    rows[1] = rows[1][:200] + b"\n"
    write_lines(d / "episodes.jsonl", rows)
    refresh_hashes(d)
    d = copy("s1_trunc")
    (d / "sft_steps.jsonl").write_bytes((d / "sft_steps.jsonl").read_bytes()[:-10])
    d = copy("s1_norun")
    _edit_json(d / "stats.json", lambda s: {k: v for k, v in s.items() if k != "run"})
    d = copy("s1_idgap")         # an episode row of another index, hashes refreshed
    rewrite_row(d / "episodes.jsonl", 1, lambda ep: ep.update(id=ep["id"][:-6] + "000000"))
    refresh_hashes(d)
    d = copy("s1_missing")
    (d / "sft_multiturn.jsonl").unlink()
    d = copy("s1_profile")       # same name, another profile file
    _edit_json(d / "stats.json", lambda s: {**s, "run": {**s["run"], "profile_sha": "0" * 64}})


STATS_VARIANTS = {
    "st_schema_only": b'{"schema": "kernelstrain/stats@1"}',
    "st_not_utf8": b'{"schema": "kernelstrain/stats@1", "profile": "\xff"}',
    "st_not_json": b"{ not json",
    "st_list": b"[1, 2]",
    "st_wrong_schema": b'{"schema": "other@1"}',
    "st_empty": b"",
}


def stats_variants(w):
    for name, raw in STATS_VARIANTS.items():
        shutil.copytree(w / "data", w / name)
        (w / name / "stats.json").write_bytes(raw)
    good = json.loads((w / "data" / "stats.json").read_text())
    edits = {"st_episodes_str": lambda s: s.update(episodes="many"),
             "st_no_sha": lambda s: s["files"]["episodes.jsonl"].pop("sha256"),
             "st_no_status": lambda s: s.pop("status"),
             "st_status_str": lambda s: s["status"].update(ok="lots"),
             "st_files_list": lambda s: s.update(files=[]),
             "st_speedup_null": lambda s: s["speedup"].update(mean=None)}
    for name, edit in edits.items():
        shutil.copytree(w / "data", w / name)
        s = json.loads(json.dumps(good))
        edit(s)
        (w / name / "stats.json").write_text(json.dumps(s))
    (w / "nostats").mkdir()
    shutil.copytree(w / "data", w / "data_nostats")
    (w / "data_nostats" / "stats.json").unlink()


def resume_variants(w):
    stage = _interrupted(w / "r_ok")
    cp = stage / ".kernelstrain-resume.json"
    assert json.loads(cp.read_text())["next"] == 4
    for name, change in {
        "r_list": lambda d: (d / ".kernelstrain-resume.json").write_text("[1, 2]"),
        "r_notjson": lambda d: (d / ".kernelstrain-resume.json").write_text("{"),
        "r_nobytes": lambda d: _edit_json(d / ".kernelstrain-resume.json", lambda s: {
            **s, "files": {k: {kk: vv for kk, vv in v.items() if kk != "bytes"} for k, v in s["files"].items()}}),
        "r_nextstr": lambda d: _edit_json(d / ".kernelstrain-resume.json", lambda s: {**s, "next": "4"}),
        "r_short": lambda d: (d / "sft_steps.jsonl").write_bytes((d / "sft_steps.jsonl").read_bytes()[:1000]),
        "r_changed": lambda d: (d / "episodes.jsonl").write_bytes(b"#" + (d / "episodes.jsonl").read_bytes()[1:]),
        "r_missing": lambda d: (d / "sft_multiturn.jsonl").unlink(),
        "r_rows": lambda d: _edit_json(d / ".kernelstrain-resume.json", lambda s: {
            **s, "files": {**s["files"], "episodes": {**s["files"]["episodes"], "rows": 3}}}),
    }.items():
        target = w / f".{name}.kernelstrain-staging"
        shutil.copytree(stage, target)
        change(target)


G = ["generate", "--seed", "0", "--workers", "1", "--quiet"]
NEW = "{w}/new_out"
CASES = [   # (argv, a needle the one error line must hold)
    # generate: arguments
    (["generate", "--seed", "abc", "--out", NEW], "invalid seed"),
    (["generate", "--seed", "-1", "--out", NEW], "invalid seed"),
    (["generate", "--seed", "1.5", "--out", NEW], "invalid seed"),
    (["generate", "--seed", "", "--out", NEW], "invalid seed"),
    (["generate", "--out", NEW], "--seed"),
    (["generate", "--seed", "0"], "--out"),
    (G + ["--out", NEW, "--episodes", "0"], "must be >= 1"),
    (G + ["--out", NEW, "--episodes", "-1"], "must be >= 1"),
    (G + ["--out", NEW, "--episodes", "x"], "not an integer"),
    (G + ["--out", NEW, "--episodes", "1e3"], "not an integer"),
    (G + ["--out", NEW, "--episodes", "20000"], "more than the profile's 11,514"),
    (G + ["--out", NEW, "--episodes", "1000000000000000"], "more than the profile's"),
    (["generate", "--seed", "0", "--out", NEW, "--workers", "0"], "must be >= 1"),
    (["generate", "--seed", "0", "--out", NEW, "--workers", "-2"], "must be >= 1"),
    (["generate", "--seed", "0", "--out", NEW, "--workers", "two"], "not an integer"),
    (G + ["--out", NEW, "--shard", "3/2"], "--shard"),
    (G + ["--out", NEW, "--shard", "a/b"], "--shard"),
    (G + ["--out", NEW, "--shard", "1"], "--shard"),
    (G + ["--out", NEW, "--shard", "0/0"], "--shard"),
    (G + ["--out", NEW, "--shard", "-1/2"], "--shard"),
    (G + ["--out", NEW, "--shard", "1/2/3"], "--shard"),
    (G + ["--out", NEW, "--episodes", "2", "--shard", "0/4"], "holds no episode"),
    (G + ["--out", "{w}/afile"], "not a directory"),
    (G + ["--out", "{w}/data", "--episodes", "2"], "not empty"),
    (G + ["--out", "{w}/r_ok", "--episodes", "8"], "--resume"),
    (G + ["--out", "{w}/data_with_config", "--config", "{w}/data_with_config/p.toml", "--force", "--episodes", "2"],
     "would write over the input"),
    (G + ["--out", NEW, "--config", "{w}/missing.toml"], "profile not found"),
    (G + ["--out", NEW, "--config", "{w}/adir"], "is a directory"),
    (G + ["--out", NEW, "--config", "{w}/latin1.toml"], "not valid TOML"),
    (G + ["--out", NEW, "--bogus"], "unrecognized arguments"),
    # generate: profiles
    *[(G + ["--out", NEW, "--config", "{w}/" + name + ".toml"], needle) for name, needle in {
        "episodes_str": "'profile.episodes' must be int", "episodes_zero": "profile.episodes",
        "episodes_neg": "profile.episodes", "episodes_huge": "profile.episodes", "episodes_float": "must be int",
        "episodes_bool": "must be int", "combos_zero": "profile.combos", "combos_str": "profile.combos",
        "gpus_empty": "empty list", "gpus_nested": "must list names", "gpus_unknown": "unknown GPU",
        "gpus_string": "profile.gpus", "gpus_int": "must list names", "gpus_dup": "more than once",
        "modules_empty": "empty list", "modules_nested": "must list names", "modules_table": "must list names",
        "modules_unknown": "unknown module", "modules_word": "profile.modules", "modules_int": "profile.modules",
        "modules_dup": "more than once", "name_empty": "profile.name", "name_space": "profile.name",
        "name_int": "profile.name", "description_empty": "profile", "steps_min_zero": "steps",
        "steps_max_below_min": "steps", "steps_mean_absurd": "<= 1000", "steps_max_absurd": "<= 1000",
        "steps_mean_nan": "steps", "steps_mean_inf": "steps", "steps_min_str": "steps.min",
        "steps_unknown_key": "unknown key 'steps.bogus'", "steps_missing_mean": "missing key 'steps.mean'",
        "status_high": "status.compile_error", "status_negative": "status.compile_error",
        "status_nan": "status.wrong_result", "status_sum": "sum to 0.98", "status_str": "status.wrong_result",
        "holdout_frac_one": "holdout.frac", "holdout_frac_neg": "holdout.frac", "holdout_frac_nan": "holdout.frac",
        "holdout_seed_neg": "holdout.seed", "holdout_seed_str": "holdout.seed", "timestamps_str": "output.timestamps",
        "extra_table": "unknown table", "missing_table": "missing table", "not_a_table": "holdout",
        "toml_syntax": "not valid TOML", "empty_file": "missing table"}.items()],
    # generate --resume
    # (--resume where no run has started starts it: tests/test_untrusted.py, kills before the first checkpoint)
    (G + ["--out", "{w}/afile", "--resume"], "not a directory"),
    (G + ["--out", "{w}/r_ok", "--episodes", "8", "--resume", "--seed", "1"], "different seed"),
    (G + ["--out", "{w}/r_ok", "--episodes", "7", "--resume"], "different episodes"),
    (G + ["--out", "{w}/r_ok", "--episodes", "8", "--resume", "--shard", "0/2"], "different"),
    (G + ["--out", "{w}/r_ok", "--episodes", "8", "--resume", "--config", "{w}/bom.toml"], "different profile_sha"),
    *[(G + ["--out", "{w}/" + name, "--episodes", "8", "--resume"], needle) for name, needle in {
        "r_list": "corrupt", "r_notjson": "corrupt", "r_nobytes": "corrupt", "r_nextstr": "corrupt",
        "r_short": "checkpoint recorded", "r_changed": "does not match its checkpoint", "r_missing": "missing",
        "r_rows": "does not match its checkpoint"}.items()],
    (G + ["--out", "{w}/data", "--episodes", "5", "--resume"], "complete dataset of another run"),
    # stats
    (["stats", "{w}/nothing"], "not a dataset directory"),
    (["stats", "{w}/afile"], "not a dataset directory"),
    (["stats", "{w}/nostats"], "stats.json: missing"),
    (["stats"], "data"),
    (["stats", "{w}/data", "--bogus"], "unrecognized"),
    *[(["stats", "{w}/" + name], needle) for name, needle in {
        "st_schema_only": "key 'generator'", "st_not_utf8": "not valid UTF-8", "st_not_json": "stats.json:1",
        "st_list": "not a kernelstrain stats file", "st_wrong_schema": "not a kernelstrain stats file",
        "st_empty": "not valid JSON", "st_episodes_str": "key 'episodes' must be int",
        "st_no_sha": "sha256", "st_no_status": "key 'status'", "st_status_str": "status.ok",
        "st_files_list": "key 'files'", "st_speedup_null": "speedup.mean"}.items()],
    # holdout
    (["holdout", "--frac", "1.5", "--out", NEW], "--frac"),
    (["holdout", "--frac", "-0.1", "--out", NEW], "--frac"),
    (["holdout", "--frac", "nan", "--out", NEW], "--frac"),
    (["holdout", "--frac", "inf", "--out", NEW], "--frac"),
    (["holdout", "--frac", "abc", "--out", NEW], "invalid float"),
    (["holdout", "--seed", "-3", "--out", NEW], "invalid seed"),
    (["holdout", "--out", "{w}/afile"], "not a directory"),
    (["holdout", "--out", "{w}/data"], "exists (a dataset's held-out tasks"),
    (["holdout", "--out", "{w}/s0"], "use --force"),
    (["holdout", "--out", NEW, "--config", "{w}/missing.toml"], "profile not found"),
    (["holdout", "--out", NEW, "--config", "{w}/gpus_nested.toml"], "must list names"),
    (["holdout", "--out", NEW, "--config", "{w}/status_sum.toml"], "sum to"),
    # validate
    (["validate", "{w}/nothing"], "not a dataset directory"),
    (["validate", "{w}/afile"], "not a dataset directory"),
    (["validate", "{w}/nostats"], "missing"),
    (["validate", "{w}/data_nostats"], "stats.json: missing"),
    (["validate", "{w}/data", "--max-problems", "0"], "must be >= 1"),
    (["validate", "{w}/data", "--max-problems", "-1"], "must be >= 1"),
    (["validate", "{w}/data", "--max-problems", "many"], "not an integer"),
    (["validate"], "data"),
    *[(["validate", "{w}/" + name], needle) for name, needle in {
        "st_schema_only": "key 'generator'", "st_not_utf8": "UTF-8", "st_not_json": "not valid JSON",
        "st_list": "not a kernelstrain stats file", "st_no_sha": "sha256", "st_files_list": "files"}.items()],
    # verify: its report path is checked before any work
    (["verify", "{w}/data", "--report", "{w}/nodir/x.json"], "does not exist"),
    (["verify", "{w}/data", "--report", "{w}/adir"], "is a directory"),
    (["verify", "{w}/data", "--report", "{w}/afile"], "exists (use --force"),
    (["verify", "{w}/data", "--report", "{w}/data/stats.json", "--force"], "would write over the input"),
    (["verify", "{w}/data", "--report", "{w}/data/episodes.jsonl", "--force"], "would write over the input"),
    (["verify", "{w}/data", "--sample", "0"], "must be >= 1"),
    (["verify", "{w}/data", "--jobs", "0"], "must be >= 1"),
    (["verify", "{w}/nothing"], "not a dataset directory"),
    (["verify", "{w}/st_list"], "not a kernelstrain stats file"),
    (["verify", "{w}/data_nostats"], "missing"),
    # ops
    (["ops", "--bogus"], "unrecognized"),
    (["ops", "extra"], "unrecognized"),
    # sim
    *[(["sim", "--gpu", gpu, "--op", op, "--impl", impl, "--dtype", dtype, "--shape", shape], needle)
      for gpu, op, impl, dtype, shape, needle in [
        ("H100", "rmsnorm", "cuda", "fp16", "T=0,D=0", "between 1 and"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=-4096,D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=" + "9" * 400 + ",D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1e30,D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1.5,D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=0x10,D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=,D=4096", "positive integer"),
        ("H100", "rmsnorm", "cuda", "fp16", "=5,D=4096", "must look like"),
        ("H100", "rmsnorm", "cuda", "fp16", "T", "must look like"),
        ("H100", "rmsnorm", "cuda", "fp16", "", "must look like"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1,T=2,D=4", "twice"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1", "missing D"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1,D=8,X=3", "unknown X"),
        ("H100", "rmsnorm", "cuda", "fp16", "T=1,D=99999999999999", "positive integer"),
        ("H100", "gemm_int4", "cuda", "fp16", "M=1,N=4096,K=0", "between 1 and"),
        ("H100", "gemm_int4", "cuda", "fp16", "M=1,N=4096,K=100", "multiple of 128"),
        ("H100", "gemv", "cuda", "fp16", "M=9,N=4096,K=4096", "between 1 and 8"),
        ("H100", "bias_gelu", "cuda", "fp16", "T=1,N=4096,TANH=2", "one of 0, 1"),
        ("H100", "paged_decode", "cuda", "fp16", "B=1,H=1,KVH=1,S=1,D=1,P=1", "no simulator model"),
        ("Z100", "rmsnorm", "cuda", "fp16", "T=1,D=8", "unknown GPU"),
        ("H100", "rmsnorm", "cuda", "fp64", "T=1,D=8", "dtype 'fp64'"),
        ("H100", "nope", "cuda", "fp16", "T=1", "no op module"),
        ("MI300X", "gemm_int8", "cuda", "int8", "M=128,N=128,K=128", "does not run int8 on MI300X"),
    ]],
    (["sim", "--gpu", "H100", "--op", "rmsnorm", "--impl", "rust", "--dtype", "fp16", "--shape", "T=1,D=8"], "invalid choice"),
    (["sim", "--gpu", "H100", "--op", "rmsnorm", "--impl", "cuda", "--dtype", "fp16"], "--shape"),
    # merge
    (["merge", "{w}/s0", "--out", NEW], "every shard"),
    (["merge", "{w}/s0", "{w}/s0", "--out", NEW], "every shard"),
    (["merge", "{w}/s0", "{w}/data", "--out", NEW], "not a shard"),
    (["merge", "{w}/s0", "{w}/nothing", "--out", NEW], "not a dataset directory"),
    (["merge", "{w}/s0", "{w}/s1", "--out", "{w}/s1", "--force"], "would write over the input"),
    (["merge", "{w}/s0", "{w}/s1", "--out", "{w}/s1/sub", "--force"], "would write over the input"),
    (["merge", "{w}/s0", "{w}/s1", "--out", "{w}", "--force"], "would write over the input"),
    (["merge", "{w}/s0", "{w}/s1", "--out", "{w}/afile"], "not a directory"),
    (["merge", "{w}/s0", "{w}/s1", "--out", "{w}/data"], "not empty"),
    (["merge", "{w}/s0", "{w}/s1_e8", "--out", NEW], "differs"),
    (["merge", "{w}/s0", "{w}/s1_seed1", "--out", NEW], "seed"),
    (["merge", "{w}/s0", "{w}/s1_byte", "--out", NEW], "sft_steps.jsonl"),
    (["merge", "{w}/s0", "{w}/s1_badjson", "--out", NEW], "episodes.jsonl:2: not valid JSON"),
    (["merge", "{w}/s0", "{w}/s1_trunc", "--out", NEW], "sft_steps.jsonl"),
    (["merge", "{w}/s0", "{w}/s1_norun", "--out", NEW], "'run' record"),
    (["merge", "{w}/s0", "{w}/s1_idgap", "--out", NEW], "episodes.jsonl:1: episode"),
    (["merge", "{w}/s0", "{w}/s1_missing", "--out", NEW], "file not found"),
    (["merge", "{w}/s0", "{w}/s1_profile", "--out", NEW], "profile file differs"),
    (["merge", "--out", NEW], "dirs"),
    # the top level
    ([], "command"),
    (["frobnicate"], "invalid choice"),
    (["--bogus"], "required"),
]


@pytest.mark.parametrize("argv, needle", CASES, ids=[f"{i:03d}-{c[0][0] if c[0] else 'none'}" for i, c in enumerate(CASES)])
def test_bad_input_exits_2_with_one_line_and_touches_nothing(argv, needle, w, capsys):
    argv = [a.format(w=w) for a in argv]
    before = snapshot(w)
    code = main(argv)
    err = capsys.readouterr().err
    lines_ = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines_) == 1 and lines_[0].startswith("kernelstrain: error: ") and needle in lines_[0], err
    assert snapshot(w) == before, "a bad input changed files"


def test_the_catalogue_is_large():
    assert len(CASES) >= 150


def test_bom_profile_is_accepted(w, tmp_path):
    assert main(["generate", "--seed", "0", "--out", str(tmp_path / "o"), "--config", str(w / "bom.toml"),
                 "--episodes", "1", "--quiet", "--workers", "1"]) == 0


def test_workers_above_the_cores_are_capped_with_a_note(tmp_path, capsys):
    assert main(["generate", "--seed", "0", "--out", str(tmp_path / "o"), "--episodes", "2", "--quiet",
                 "--workers", "4096"]) == 0
    assert "capped at the" in capsys.readouterr().err


def test_an_unexpected_exception_is_exit_3_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr("kernelstrain.reading.read_stats", lambda data: {})
    monkeypatch.setattr("kernelstrain.stats.summary", lambda stats: 1 / 0)
    code = main(["stats", "anything"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and err[0].startswith("kernelstrain: internal error: ZeroDivisionError")
    assert "please report" in err[0]


def test_interrupt_of_validate_does_not_suggest_resume(monkeypatch, capsys, w):
    def stop(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr("kernelstrain.dataset.validate", stop)
    assert main(["validate", str(w / "data")]) == 130
    err = capsys.readouterr().err
    assert "--resume" not in err and err.count("\n") == 1


def test_full_disk_is_one_line_names_the_destination_and_leaves_nothing_complete(tmp_path):
    """A write that fails (file-size limit standing in for a full disk) -> exit 2, no stats.json."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(out),
                        "--episodes", "60", "--workers", "1", "--quiet"], capture_output=True, text=True,
                       preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    lines_ = r.stderr.strip().splitlines()
    assert len(lines_) == 1 and lines_[0].startswith(f"kernelstrain: error: cannot write {out}:") \
        and "large" in lines_[0].lower() and "--resume" in lines_[0]
    assert not (out / "stats.json").exists() and not (out / "episodes.jsonl").exists()


def test_full_disk_during_merge_leaves_the_old_dataset(w, tmp_path):
    out = tmp_path / "m"
    shutil.copytree(w / "data", out)
    before = snapshot(out)
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))
    r = subprocess.run([sys.executable, "-m", "kernelstrain", "merge", str(w / "s0"), str(w / "s1"), "--out", str(out),
                        "--force"], capture_output=True, text=True, preexec_fn=limit)
    assert r.returncode == 2 and r.stderr.startswith(f"kernelstrain: error: cannot write {out}:"), r.stderr
    assert snapshot(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unwritable_out_is_a_clean_error(capsys):
    code = main(["generate", "--seed", "0", "--out", "/proc/kernelstrain-out", "--episodes", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kernelstrain: error: ") and len(err.strip().splitlines()) == 1


def test_corrupt_episode_line_is_a_finding_for_validate_and_bad_input_for_verify(w, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(w / "data", d)
    rows = lines(d / "episodes.jsonl")
    rows[4] = rows[4][:100] + b"\n"
    write_lines(d / "episodes.jsonl", rows)
    assert main(["validate", str(d)]) == 1
    assert "episodes.jsonl:5: not valid JSON" in capsys.readouterr().out
    assert main(["verify", str(d), "--sample", "1"]) == 2
    assert "episodes.jsonl:5: not valid JSON" in capsys.readouterr().err


def test_merge_of_good_shards_equals_the_single_run(w, tmp_path):
    out = tmp_path / "m"
    assert main(["merge", str(w / "s1"), str(w / "s0"), "--out", str(out)]) == 0
    single = tmp_path / "single"
    _gen(single, "--episodes", "6")
    for name in ("episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl", "stats.json",
                 "README.md"):
        assert (out / name).read_bytes() == (single / name).read_bytes(), name
    assert main(["validate", str(out)]) == 0


def test_holdout_force_replaces_atomically(w, tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["holdout", "--out", str(out)]) == 0
    first = (out / "tasks_holdout.jsonl").read_bytes()
    assert main(["holdout", "--out", str(out), "--frac", "0.2", "--force"]) == 0
    assert (out / "tasks_holdout.jsonl").read_bytes() != first
    assert sorted(p.name for p in out.iterdir()) == ["tasks_holdout.jsonl", "tasks_holdout_unseen_op.jsonl"]   # no temporaries left
