"""`kernelstrain gpu-check` on a sessions.jsonl dataset (the kernelinfer layout), without a GPU:
its trace records are sampled like episodes' steps and their code rendered from the recipe."""
import json

import pytest

from kernelstrain import gpucheck
from kernelstrain.cli import main
from kernelstrain.gpucheck import as_episode, gpu_check
from kernelstrain.gpucheck.sample import sample_cases
from kernelstrain.sessions import SESSIONS_FILE, session_row
from kernelstrain.validate import read_jsonl


@pytest.fixture(scope="module")
def episodes(small_dataset):
    return [ep for _, ep in read_jsonl(small_dataset / "episodes.jsonl")]


@pytest.fixture(scope="module")
def sessions_dataset(episodes, tmp_path_factory):
    """The small dataset's episodes written as a sessions layout (sessions.jsonl only)."""
    out = tmp_path_factory.mktemp("sessions") / "d"
    out.mkdir()
    (out / SESSIONS_FILE).write_text("".join(json.dumps(session_row(ep, False)) + "\n" for ep in episodes))
    return out


def test_sessions_sample_the_same_candidates_with_the_recorded_code(episodes, sessions_dataset):
    """A session's trace holds each step's recipe: the sample is the episodes' one, and the code
    rendered from the recipe is the code the episode recorded at its task shape."""
    rows = [as_episode(r) for _, r in read_jsonl(sessions_dataset / SESSIONS_FILE)]
    from_sessions, from_episodes = sample_cases(rows, 120, 3), sample_cases(episodes, 120, 3)
    assert [c["id"] for c in from_sessions] == [c["id"] for c in from_episodes] and from_sessions
    assert len({c["module"] for c in from_sessions}) >= 5
    for s, e in zip(from_sessions, from_episodes):
        assert s["code"] == e["code"], s["id"]
        assert s["rendered"] and (e["rendered"] is (e["at"] == "check"))
        assert {k: v for k, v in s.items() if k != "rendered"} == {k: v for k, v in e.items() if k != "rendered"}


def test_gpu_check_reads_a_sessions_layout(sessions_dataset, tmp_path, monkeypatch, capsys):
    """The no-GPU path (--compile-only) samples the sessions dataset and builds its cases (the build
    itself stubbed: nvcc's minutes are not this test's subject)."""
    built = []

    def fake_build(cases, build_dir, jobs):
        built.extend(cases)
        for c in cases:
            c.update(build_ok=True, so=None, src=None, log="", compile_s=0.0)
    monkeypatch.setattr(gpucheck, "_build_all", fake_build)
    assert gpu_check(sessions_dataset, sample=60, compile_only=True, build_dir=tmp_path) == 0
    assert built and all(c["rendered"] for c in built)
    assert f"{len(built)} candidates built" in capsys.readouterr().err


def test_a_folder_without_either_file_is_named(tmp_path, capsys):
    assert main(["gpu-check", str(tmp_path), "--compile-only"]) == 2
    assert "no episodes.jsonl or sessions.jsonl" in capsys.readouterr().err
