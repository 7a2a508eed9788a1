"""generate's batch QA reports from the checks its workers made of the session rows they built
(validate_written) are the reports a check of the files writes; a file that is not what the
workers built is checked again."""
import json
import shutil

import pytest

from kernelstrain.cli import main
from kernelstrain.generation import iter_episodes
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile
from kernelstrain.sessions import QA_DIR, SESSIONS_FILE
from kernelstrain.validate import Context
from kernelstrain.manifest import read_manifest
from kernelstrain.validate_sessions import write_qa_reports
from kernelstrain.validate_written import WrittenChecks

EPISODES = 9


def _written(plan, size: int) -> WrittenChecks:
    written = WrittenChecks(plan, size, 0)
    for item in iter_episodes(plan, range(EPISODES), 1, None, judge=True):
        written.add(item[4])
    return written


def _reports(data, tmp_path, name, stats, written=None) -> dict:
    out = tmp_path / name
    shutil.copytree(data, out)
    shutil.rmtree(out / QA_DIR)
    write_qa_reports(out, stats, 1, written)
    return {p.name: p.read_bytes() for p in sorted((out / QA_DIR).iterdir())}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    data = tmp_path_factory.mktemp("written") / "d"
    assert main(["generate", "--seed", "2", "--config", "kernelinfer", "--episodes", str(EPISODES), "--workers", "1",
                 "--out", str(data), "--quiet"]) in (0, 1)
    return data


def test_written_checks_give_the_reports_of_the_files(dataset, tmp_path):
    data = tmp_path / "d"
    shutil.copytree(dataset, data)
    stats = json.loads((data / "stats.json").read_text())
    stats["batch_size"] = 2          # several batches
    written = _written(make_plan(load_profile("kernelinfer"), 2), 2)
    held = set()
    assert written.checks(data, Context(stats, read_manifest(data)), held) is not None      # taken
    assert len(written.batches.accs) >= 3
    assert _reports(data, tmp_path, "a", stats, written) == _reports(data, tmp_path, "b", stats)

    # one session's time edited: the files are checked again, and the report says what they hold
    lines = (data / SESSIONS_FILE).read_bytes().split(b"\n")
    row = json.loads(lines[2])
    row["best"]["time_ms"] *= 2
    lines[2] = json.dumps(row).encode()
    (data / SESSIONS_FILE).write_bytes(b"\n".join(lines))
    assert written.checks(data, Context(stats, read_manifest(data)), held) is None
    edited = _reports(data, tmp_path, "c", stats, written)
    assert edited == _reports(data, tmp_path, "e", stats)
    assert edited != _reports(tmp_path / "a", tmp_path, "f", stats)


def test_written_checks_refuse_another_run(dataset):
    """Verdicts made for another seed's plan are never taken."""
    data = dataset
    stats = json.loads((data / "stats.json").read_text())
    other = _written(make_plan(load_profile("kernelinfer"), 3), stats["batch_size"])
    assert other.checks(data, Context(stats, read_manifest(data)), set()) is None
