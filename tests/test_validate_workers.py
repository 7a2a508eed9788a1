"""`validate --workers N` reports what one worker reports: the same findings, in the same order,
the same figures and exit code, on a sound dataset and on damaged ones of both layouts."""
import shutil

import pytest

from corrupt import refresh_hashes, rewrite_row
from kernelstrain.cli import main


def validate(data, workers: str, capsys) -> tuple:
    capsys.readouterr()
    code = main(["validate", str(data), "--workers", workers, "--quiet"])
    out = capsys.readouterr()
    return code, out.out, out.err


def damage_episode(d):
    """A step's time and a later episode's best both changed, the hashes refreshed: only content checks see it."""
    rewrite_row(d / "episodes.jsonl", 2, lambda ep: ep["steps"][0].update(time_ms=ep["steps"][0]["time_ms"] * 3))
    rewrite_row(d / "episodes.jsonl", 5, lambda ep: ep["best"].update(speedup=ep["best"]["speedup"] + 1))
    refresh_hashes(d)


def damage_session(d):
    """A message of the second session and its recorded baseline time changed."""
    def change(row):
        row["messages"][1]["content"] += " "
        row["baseline_ms"] *= 2
    rewrite_row(d / "sessions.jsonl", 2, change)


@pytest.mark.parametrize("config,episodes,damage", [("kernelstrain", "8", damage_episode),
                                                     ("kernelinfer", "3", damage_session)])
def test_workers_give_the_same_report(config, episodes, damage, tmp_path, capsys):
    sound = tmp_path / "sound"
    assert main(["generate", "--seed", "5", "--config", config, "--episodes", episodes, "--workers", "1",
                 "--out", str(sound), "--quiet"]) == 0
    one = validate(sound, "1", capsys)
    assert one[0] == 0 and one == validate(sound, "2", capsys)
    damaged = tmp_path / "damaged"
    shutil.copytree(sound, damaged)
    damage(damaged)
    one = validate(damaged, "1", capsys)
    assert one[0] == 1 and "problem" in one[1] + one[2]
    assert validate(damaged, "2", capsys) == one


def as_float(d):
    """An integer field written as an equal float: equal in Python, not the same JSON value."""
    rewrite_row(d / "episodes.jsonl", 3, lambda ep: ep.update(elapsed_s=float(ep["elapsed_s"])))
    refresh_hashes(d)


def reordered(d):
    """An episode row's keys in another order (its values untouched)."""
    rewrite_row(d / "episodes.jsonl", 4, lambda ep: ep.update(dict(reversed(list(ep.items())))) or
                ep.update({k: ep.pop(k) for k in list(ep)[:3]}))
    refresh_hashes(d)


def step_row(d):
    """A step row's completion changed: its episode's QA figures come from the rows read."""
    rewrite_row(d / "sft_steps.jsonl", 5, lambda row: row["messages"][-1].update(content="done"))
    refresh_hashes(d)


def unreadable(d):
    """A line that is not JSON: the contamination is measured on the files (their error)."""
    rows = (d / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    rows[2] = b"{not json\n"
    (d / "episodes.jsonl").write_bytes(b"".join(rows))
    refresh_hashes(d)


def carriage_return(d):
    """A carriage return as JSON whitespace: still one row (the dataset is sound), to the checks
    and to the contamination measure alike."""
    rows = (d / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    rows[1] = rows[1].replace(b'{"', b'{\r"', 1)
    (d / "episodes.jsonl").write_bytes(b"".join(rows))
    refresh_hashes(d)


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    out = tmp_path_factory.mktemp("workers") / "sound"
    assert main(["generate", "--seed", "5", "--episodes", "8", "--workers", "1", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.mark.parametrize("damage,code", [(as_float, 1), (reordered, 1), (step_row, 1), (unreadable, 1),
                                         (carriage_return, 0)])
def test_rows_unlike_the_plans_are_checked_in_the_parent(damage, code, sound, tmp_path, capsys):
    """Rows that equal the plan's in Python but are not the same JSON, and rows that cannot be
    measured: the parallel path checks them as one worker does."""
    damaged = tmp_path / "damaged"
    shutil.copytree(sound, damaged)
    damage(damaged)
    one = validate(damaged, "1", capsys)
    assert one[0] == code
    assert validate(damaged, "2", capsys) == one


@pytest.mark.parametrize("workers", [1, 2])
def test_the_streamed_contamination_is_measure_s(workers, sound, monkeypatch):
    """validate measures the contamination from the rows its checks read: the figures
    contamination.measure gives on the files, without reading them again."""
    import kernelstrain
    from kernelstrain import dataset
    from kernelstrain.validate import measure_splits
    found = []
    check = dataset.check_holdout_splits
    monkeypatch.setattr(dataset, "check_holdout_splits", lambda data, stats, out, f: found.append(f) or check(data, stats, out, f))
    monkeypatch.setattr(dataset, "measure_splits", lambda *a: pytest.fail("measured on the files again"))
    ds = kernelstrain.open(sound)
    assert ds.validate(workers=workers).total == 0
    assert found == [measure_splits(sound, ds.stats, ds.layout)]


def test_a_shard_is_checked_alike(tmp_path, capsys):
    """A shard's episodes start past index 0 (validate.first_index): the workers rebuild the same ones."""
    shard = tmp_path / "shard"
    assert main(["generate", "--seed", "5", "--episodes", "8", "--shard", "1/2", "--workers", "1", "--out", str(shard),
                 "--quiet"]) == 0
    one = validate(shard, "1", capsys)
    assert one[0] == 0 and validate(shard, "2", capsys) == one


def test_parts_measured_ahead_are_taken_until_a_row_comes_without_one():
    """A worker measures a candidate once, in the first row it rebuilds that holds it: once a row
    comes without its part (the dataset's row is not the plan's), the rows after it are measured
    in the parent, and the candidate the dropped row held is still counted where it recurs."""
    from types import SimpleNamespace

    from kernelstrain import contamination as cont
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    from kernelstrain.validate_ahead import StreamedMeasure

    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    codes = [m.render(v, v.defaults(), task) for v in m.variants if not v.needs - task.gpu.features]
    targets = SimpleNamespace(matcher=cont.Matcher([(codes[0], "cuda"), (codes[1], "cuda")]))

    def row(base, *steps):
        return {"module": m.name, "gpu": "H100", "dtype": task.dtype, "shape": dict(task.shape), "impl": "cuda",
                "baseline": {"code": base}, "steps": [{"code": c} for c in steps]}

    plan = [row(codes[0]), row(codes[0], codes[1]), row(codes[0], codes[1], codes[2])]
    data = [plan[0], row(codes[0]), plan[2]]          # the second row is not the plan's: it lacks codes[1]
    worker = cont.Incremental(targets)
    parts = [worker.part(ep) for ep in plan]          # the third part skips codes[1]: measured in the second
    assert len(parts[2][1]) == 1
    streamed = StreamedMeasure(cont.Incremental(targets), lambda r: r)
    for ep, part, taken in zip(data, parts, (True, False, True)):
        streamed.add_row(ep, ahead=part if taken else None)
    alone = cont.Incremental(targets)
    for ep in data:
        alone.add(alone.part(ep))
    assert streamed.scan.keys == alone.keys and len(alone.keys) == 3
    assert streamed.scan.tally.part() == alone.tally.part()
