"""The sessions layout (the kernelinfer card's files) on a small fixture profile: the rows
are a pure function of the episodes, batches concatenate to sessions.jsonl, workers, shards +
merge, --episodes prefixes and resume give the same bytes, and validate names what is broken
(file, line, and the batch report's mechanical check)."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.episodes import build_episode
from kernelstrain.errors import UsageError
from kernelstrain.messages import clock, hms
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile
from kernelstrain.schema import SESSION_KEYS, TRACE_KEYS
from kernelstrain.sessions import episode_row
from kernelstrain.dataset import validate
from kernelstrain.validate import Findings

PROFILE = Path(__file__).parent / "fixtures" / "sessions_profile.toml"


def gen(out: Path, *args: str) -> int:
    return main(["generate", "--seed", "0", "--config", str(PROFILE), "--out", str(out), "--quiet", "--workers", "1",
                 *args])


def killed(out: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    """A run in its own process, killed at a fault point (before the holdout's contamination)."""
    cmd = [sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--config", str(PROFILE), "--out",
           str(out), "--quiet", "--workers", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sessions") / "s"
    assert gen(out) == 0
    return out


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """The first 6 sessions: the reference of the workers / shards / resume tests."""
    out = tmp_path_factory.mktemp("prefix") / "p"
    assert gen(out, "--episodes", "6") == 0
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tree(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_files_of_the_layout(sessions):
    names = set(tree(sessions))
    assert {"sessions.jsonl", "sft_multiturn.jsonl", "sft_multiturn.validation.jsonl", "tasks_holdout.jsonl",
            "stats.json", "README.md"} <= names
    assert not names & {"episodes.jsonl", "sft_steps.jsonl", "sft_prompt_completion.jsonl", "qa.json"}
    assert sorted(n for n in names if n.startswith("batches/")) == [f"batches/batch_{k:03d}.jsonl" for k in range(3)]
    assert sorted(n for n in names if n.startswith("qa_reports/")) == sorted(
        f"qa_reports/batch_{k:03d}.{ext}" for k in range(3) for ext in ("json", "md"))
    card = (sessions / "README.md").read_text()
    assert "config_name: sessions\n" in card and "path: sessions.jsonl" in card and "config_name: holdout" in card
    assert "config_name: sft_multiturn\n" in card and "path: sft_multiturn.jsonl" in card


def test_a_session_row_is_the_episode_as_one_chat(sessions):
    plan = make_plan(load_profile(PROFILE), 0)
    for i, row in enumerate(lines(sessions / "sessions.jsonl")):
        assert tuple(row) == SESSION_KEYS and all(tuple(s) == TRACE_KEYS for s in row["trace"])
        ep = build_episode(plan, i).row()
        assert episode_row(row) == ep          # the trace and the renders give back the whole episode
        msgs = row["messages"]
        assert [m["role"] for m in msgs] == ["system", "user"] + ["assistant", "user"] * len(ep["steps"])
        for s, answer, feedback in zip(ep["steps"], msgs[2::2], msgs[3::2]):
            assert answer["content"].count("```") == 2 and s["code"] in answer["content"]
            assert feedback["content"].startswith(hms(s["elapsed_s"]) + f"Step {s['step']}: ")
        assert row["num_steps"] == len(ep["steps"]) and row["elapsed_hms"] == clock(ep["elapsed_s"])
        assert row["baseline_ms"] == ep["baseline"]["time_ms"] and row["best"] == ep["best"]


def test_batches_concatenate_and_stats_sum(sessions):
    stats = json.loads((sessions / "stats.json").read_text())
    whole = (sessions / "sessions.jsonl").read_bytes()
    assert b"".join((sessions / f"batches/batch_{k:03d}.jsonl").read_bytes() for k in range(3)) == whole
    rows = lines(sessions / "sessions.jsonl")
    assert [stats["files"][f"batches/batch_{k:03d}.jsonl"]["rows"] for k in range(3)] == [4, 4, 2]
    assert stats["layout"] == "sessions" and stats["sessions"] == len(rows) == 10
    assert stats["steps"] == sum(r["num_steps"] for r in rows)
    assert stats["status"]["compile_error"] == sum(s["status"] == "compile_error" for r in rows for s in r["trace"])
    assert stats["unique_combos"] == len({(r["op"], r["gpu"], json.dumps(r["shape"]), r["dtype"]) for r in rows})
    hours = [r["elapsed_s"] / 3600 for r in rows]
    assert stats["simulated_hours"]["min"] == round(min(hours), 3) and stats["simulated_hours"]["max"] == round(max(hours), 3)


def test_qa_reports_score_each_batch(sessions):
    reports = [json.loads((sessions / f"qa_reports/batch_{k:03d}.json").read_text()) for k in range(3)]
    assert [r["sessions"] for r in reports] == [4, 4, 2]
    assert all(r["mechanical"]["score"] == "11/11" for r in reports)
    steps = sum(r["qa"]["info"]["steps"] for r in reports)
    assert steps == json.loads((sessions / "stats.json").read_text())["steps"]
    md = (sessions / "qa_reports/batch_000.md").read_text()
    assert "11/11 mechanical checks passed" in md and reports[0]["qa"]["score"] in md


def test_validate_stats_show_report_on_sessions(sessions, capsys, tmp_path):
    assert main(["validate", str(sessions)]) == 0
    assert main(["stats", str(sessions)]) == 0
    assert main(["show", str(sessions), "sessions_fixture-s0-000002"]) == 0
    assert "sessions_fixture-s0-000002" in capsys.readouterr().out
    assert main(["report", str(sessions), "--out", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    main(["qa", str(sessions), "--json"])
    qa = json.loads(capsys.readouterr().out)
    assert qa["info"]["steps"] == json.loads((sessions / "stats.json").read_text())["steps"]


def test_verify_samples_sessions_and_compiles_their_assistant_code(sessions, capsys):
    """verify reads sessions.jsonl: each sampled step's code is its assistant turn's source,
    which is the code the trace re-renders; every module of the fixture is sampled."""
    from kernelstrain.sessions import stored_steps
    from kernelstrain.verify import pick_sample
    rows = lines(sessions / "sessions.jsonl") + lines(sessions / "sessions.validation.jsonl")   # numbered on, as verify does
    # the sample spreads over (outcome, target family) strata first, then modules within each:
    # a few picks reach ok and failed steps, a larger sample every module of the fixture
    picked = pick_sample(sessions, 6, seed=0)
    outcomes = {stored_steps(rows[n - 1])[i]["status"] for n, i in picked}
    assert len(picked) == 6 and "ok" in outcomes and len(outcomes) > 1, outcomes
    wide = pick_sample(sessions, 40, seed=0)
    assert len({rows[n - 1]["module"] for n, _ in wide}) == len({r["module"] for r in rows})
    for n, i in picked:
        got = stored_steps(rows[n - 1])[i]
        assert got["code"] == episode_row(rows[n - 1])["steps"][i]["code"] and got["step"] == i + 1
    if shutil.which("nvcc") is None or importlib.util.find_spec("triton") is None:
        pytest.skip("needs nvcc and triton to compile")
    assert main(["verify", str(sessions), "--sample", "3", "--jobs", "2"]) == 0, capsys.readouterr().out
    assert "3 candidates" in capsys.readouterr().out


def test_workers_shards_merge_and_prefix_give_the_same_bytes(sessions, prefix, tmp_path):
    want = tree(prefix)
    assert gen(tmp_path / "w", "--episodes", "6", "--workers", "2") == 0
    assert tree(tmp_path / "w") == want
    for i in range(2):
        assert gen(tmp_path / f"s{i}", "--episodes", "6", "--shard", f"{i}/2") == 0
    assert main(["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "m")]) == 0
    assert tree(tmp_path / "m") == want          # batches, QA reports, card and stats rebuilt
    assert (sessions / "sessions.jsonl").read_bytes().startswith(want["sessions.jsonl"])
    assert want["batches/batch_000.jsonl"] == (sessions / "batches/batch_000.jsonl").read_bytes()


@pytest.mark.parametrize("point", ["episode:3", "holdout-written:1"])
def test_resume_after_a_kill(prefix, tmp_path, point):
    out = tmp_path / "r"
    r = killed(out, "--episodes", "6", env={"KERNELSTRAIN_FAULT": point, "KERNELSTRAIN_CHECKPOINT_EPISODES": "2"})
    assert r.returncode == -9, r.stderr
    assert gen(out, "--episodes", "6", "--resume") == 0
    assert tree(out) == tree(prefix)


def _edit(data: Path, line: int, change) -> None:
    path = data / "sessions.jsonl"
    rows = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(rows[line - 1])
    change(row)
    rows[line - 1] = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


BATCH = 4        # sessions a batch of the fixture's run (lines 5-8 are batch 1)


def _editable(data: Path, change) -> int:
    """The first line that has what `change` edits, batch 1's lines first (a session may end
    without a failed step, or after one step: a new draw of the sessions can leave a batch without one)."""
    rows = (data / "sessions.jsonl").read_text(encoding="utf-8").splitlines()
    for line in [*range(BATCH + 1, 2 * BATCH + 1), *range(1, BATCH + 1), *range(2 * BATCH + 1, len(rows) + 1)]:
        try:
            change(json.loads(rows[line - 1]))
        except (StopIteration, IndexError):
            continue
        return line
    raise AssertionError("no session has what the corruption edits")


def _first(row, pred):
    return next(s for s in row["trace"] if pred(s))


def _kept_failure(row):
    _first(row, lambda s: s["status"] != "ok")["kept"] = True


def _stamp(row):
    m = row["messages"][5]
    m["content"] = re.sub(r"^\[t\+\d+:\d\d:\d\d\]", "[t+9:59:59]", m["content"])


def _time_of_failure(row):
    _first(row, lambda s: s["status"] != "ok")["time_ms"] = 0.5


def _code(row):
    row["messages"][4]["content"] = row["messages"][4]["content"].replace("\n", "\n// tuned\n", 1)


def _best(row):
    _first(row, lambda s: s["step"] == 2)["best_ms"] *= 0.5


CORRUPTIONS = {   # name -> (edit of line 5, the batch report's mechanical check it fails)
    "failure_kept": (_kept_failure, "non_ok_never_kept"),
    "stamp": (_stamp, "stamps"),
    "time_of_failure": (_time_of_failure, "time_ms_iff_ok"),
    "code": (_code, "code_and_feedback"),
    "best_ms": (_best, "best_running_minimum"),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_validate_names_the_broken_check(sessions, tmp_path, name):
    from kernelstrain.validate_sessions import MECHANICAL
    data = tmp_path / "d"
    shutil.copytree(sessions, data)
    edit, check = CORRUPTIONS[name]
    line = _editable(data, edit)
    _edit(data, line, edit)
    found = validate(data, limit=200)
    on_row = [c for f, c in zip(found, found.checks) if f.startswith(f"sessions.jsonl:{line}")]
    assert on_row and check in on_row, found
    batch = f"qa_reports/batch_{(line - 1) // BATCH:03d}"                 # the edited line's batch alone
    assert any(f"{batch}.json" in f for f in found)
    assert not any("qa_reports/batch_" in f and batch not in f for f in found)
    assert check in {name for name, _ in MECHANICAL}


def test_validate_finds_broken_batches(sessions, tmp_path):
    data = tmp_path / "d"
    shutil.copytree(sessions, data)
    part = data / "batches/batch_001.jsonl"
    part.write_bytes(part.read_bytes()[:-10] + b"0000000000")
    found = validate(data)
    assert any(f.startswith("batches/batch_001.jsonl") and "concatenate" in f for f in found), found
    (data / "qa_reports/batch_002.json").write_text("{}\n")
    assert any(f.startswith("qa_reports/batch_002.json") for f in validate(data))


@pytest.mark.parametrize("table, needle", [('layout = "sessions"', "output.layout"),
                                           ("batch_size = 4", "output.batch_size")])
def test_bad_layout_settings(tmp_path, table, needle):
    bad = {"output.layout": 'layout = "shards"', "output.batch_size": "batch_size = 0"}[needle]
    path = tmp_path / "p.toml"
    path.write_text(PROFILE.read_text().replace(table, bad))
    with pytest.raises(UsageError, match=needle):
        load_profile(path)


def test_findings_listener_sees_every_problem():
    seen = []
    out = Findings(1)
    out.listener = lambda where, what, check: seen.append((where, check))
    out.add("a:1", "x", "stamps")
    out.add("a:2", "y", "keep_rule")
    assert len(out) == 1 and out.checks == ["stamps"] and seen == [("a:1", "stamps"), ("a:2", "keep_rule")]
    with pytest.raises(ValueError, match="unknown check id"):
        out.add("a:3", "z", "no_such_check")



def test_validate_survives_malformed_rows(sessions, tmp_path):
    data = tmp_path / "d"
    shutil.copytree(sessions, data)
    _edit(data, 2, lambda r: r["messages"].__setitem__(3, 5))
    _edit(data, 3, lambda r: r["trace"][0].pop("kept"))
    _edit(data, 5, lambda r: r.__setitem__("shape", 5))
    path = data / "sessions.jsonl"
    rows = path.read_text().splitlines()
    rows[3], rows[6] = "[1, 2]", "not json"
    path.write_text("\n".join(rows) + "\n")
    found = validate(data, limit=100)
    for line in (2, 3, 4, 5, 7):
        assert any(f.startswith(f"sessions.jsonl:{line}:") for f in found), (line, found)
