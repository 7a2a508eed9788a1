"""validate's (and generate's) speed-ups around the row checks: each kept answer is the plain computation's."""
from kernelstrain import references, runtime_texts
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def test_reference_ms_is_the_plain_computation_registry_wide():
    """references.reference_ms (kept once a process) answers as _reference_ms for every module on each GPU that
    runs it, at its first and last shape, both modes, asked in turns (a key without the GPU, the shape or the
    mode would answer one task with another's time)."""
    asked = 0
    references._TIMES.clear()
    for _ in range(2):
        for m in REGISTRY.values():
            if hasattr(m, "torch_ms"):
                continue
            for gpu in GPUS.values():
                dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
                if dtype is None:
                    continue
                for shape in (m.shapes[0], m.shapes[-1]):
                    task = make_task(m, gpu.name, dtype, shape)
                    for mode in ("eager", "compiled"):
                        assert references.reference_ms(m, task, mode) == references._reference_ms(m, task, mode), \
                            (m.name, task.key, mode)
                        asked += 1
    assert asked > 2000 and references._TIMES


def test_plan_row_compares_the_row_as_json_gives_it_back():
    """plan_row compares a dataset row with the plan's row as built, and as JSON gives it back only where
    they differ: a built tuple still equals the file's list, and a changed value is still a finding."""
    from types import SimpleNamespace

    from kernelstrain.validate import Findings
    from kernelstrain.validate_derived import plan_row

    class Rebuilt:             # validate_derived.Rebuilds' get, with one episode's rebuild as built
        def get(self, index):
            return None, {"id": "e", "shape": ({"dim": "T", "value": 8},), "time_ms": 1.5}, "its chats"

    ctx, out = SimpleNamespace(rebuilds=Rebuilt()), Findings(5)
    row = {"id": "e", "shape": [{"dim": "T", "value": 8}], "time_ms": 1.5}
    assert plan_row(ctx, 0, row, "episodes.jsonl:1", out) == "its chats" and out.total == 0
    row["shape"][0]["value"] = 16
    assert plan_row(ctx, 0, row, "episodes.jsonl:1", out) == "its chats"
    assert out.total == 1 and "shape" in out[0] and "not the plan's row" in out[0]


def test_validate_asks_the_plans_room_answers_ahead(small_dataset, monkeypatch):
    """validate makes its plan as generate does: the room checks (plan.rooms_ahead, kernelinfer's ~3 s) asked in
    `workers` forked processes before the plan is made (without, the parent asks every one itself)."""
    from kernelstrain import dataset
    from kernelstrain.validate import Context

    asked = []

    class Stop(Exception):
        pass

    def context(stats, manifest, plan=None):        # the plan is made here: rooms_ahead must have run before
        assert asked == [(manifest.profile.name, 2)]
        raise Stop
    monkeypatch.setattr(dataset, "rooms_ahead", lambda profile, workers, meanwhile=None: asked.append((profile.name, workers)))
    monkeypatch.setattr(dataset, "Context", context)
    try:
        dataset.validate(small_dataset, workers=2)
    except Stop:
        pass
    assert asked, "validate made its plan without asking the room checks ahead"


def _plain_in_dtype(x: float, dtype: str) -> float:
    """runtime_texts.in_dtype as it was written before its Structs were compiled once (issue 32)."""
    import math
    import struct
    if math.isinf(x) or math.isnan(x):
        return x
    if dtype == "fp16":
        return struct.unpack("e", struct.pack("e", x))[0] if abs(x) < 65520 else math.copysign(math.inf, x)
    f32 = struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3.4e38 else math.copysign(math.inf, x)
    if dtype != "bf16":
        return f32
    bits = struct.unpack("I", struct.pack("f", f32))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("f", struct.pack("I", bits))[0]


def test_in_dtype_is_the_plain_rounding():
    """in_dtype (weight_mismatch_text asks it ~6 times a column) rounds as the plain struct round trips do, bit
    for bit, at every magnitude, both signs, the edges of each dtype's range, zeros, infinities and NaN."""
    import math
    import random
    import struct
    rng = random.Random(32)
    values = [0.0, -0.0, math.inf, -math.inf, math.nan, 65504.0, 65519.9, 65520.0, 3.3999e38, 3.4e38, 1e-8, 5.96e-8,
              1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8]
    values += [s * rng.random() * 10.0 ** rng.randint(-45, 38) for s in (1, -1) for _ in range(8000)]
    values += [1 + 0.1 * rng.gauss(0, 1) for _ in range(5000)]
    for dtype in ("fp16", "bf16", "fp32", "fp8"):
        for x in values:
            got, want = runtime_texts.in_dtype(x, dtype), _plain_in_dtype(x, dtype)
            assert struct.pack("d", got) == struct.pack("d", want) or (math.isnan(got) and math.isnan(want)), (x, dtype)


def test_an_extended_rung_renders_as_the_rung_it_extends():
    """ops.base._rendered knows a rung made by knobs.extend as the rung it extends (memo.same_rung), so validate's
    re-render (rerender.render_code, on the module's rung) takes the engine's render of the extended rung: every
    rung of every module, extended with every knob of both bundled profiles that has a place in its code, renders
    the same code as its own rung, uncached, at its defaults and at another value of each parameter, with and
    without each bug (a rung whose code read its Params, knobs included, would fail here)."""
    from kernelstrain import knobs
    from kernelstrain.ops import base
    from kernelstrain.profiles import load_profile
    from kernelstrain.tasks import param_grid
    names = tuple(dict.fromkeys(n for c in ("kernelstrain", "kernelinfer") for n in load_profile(c).search.knobs))
    extended = 0
    for m in REGISTRY.values():
        for gpu in GPUS.values():
            dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
            if dtype is None or gpu.vendor != "nvidia" and gpu.name != "MI300X":
                continue
            task = make_task(m, gpu.name, dtype, m.shapes[0])
            for v in m.variants:
                if not isinstance(v, base.Rung):
                    continue
                ext = knobs.extend(v, m.impl, m.render(v, v.defaults(), task), names, task.gpu)
                if ext is v:
                    continue
                extended += 1
                for params in (v.defaults(), *[p for _, p in zip(range(2), param_grid(v))][1:]):
                    for bug in (None, *v.bugs):
                        plain = m.assemble(v.source(params, task, bug), v, params, task)
                        assert m.assemble(ext.source(params, task, bug), ext, params, task) == plain, (m.name, v.tag, bug)
                        base._RENDERS.clear()
                        assert m.render(ext, params, task, bug) == plain and m.render(v, params, task, bug) == plain
    assert extended > 300, extended


def test_biased_share_is_the_plain_midpoint_sum():
    """runtime_texts._biased_share tests a grid point and its mirror at a time: the same float as the plain sum over
    the 64 points in the grid's order, for weights and biases as weight_mismatch_text draws them (rounded to each
    dtype) and at the edges (a zero bias, a weight of one, a negative weight, points tying with the tolerance)."""
    import random
    rt = runtime_texts
    assert all(rt._GRID[i] == -rt._GRID[63 - i] and rt._WEIGHTS[i] == rt._WEIGHTS[63 - i] for i in range(64))

    def plain(off, w, b, atol, rtol):
        return sum([q for z, q in zip(rt._GRID, rt._WEIGHTS) if abs(z) * off > atol + rtol * abs(z * w + b)])
    rng = random.Random(26)
    cases = [(0.0, 1.0, 0.0), (0.5, 0.5, 0.0), (2.5, -1.5, 0.3), (0.01, 1.01, -0.01), (0.09375, 1.09375, 0.0)]
    for dtype in ("fp16", "bf16", "fp32"):
        for _ in range(1500):
            w = rt.in_dtype(1 + rng.choice((0.1, 0.5)) * rng.gauss(0, 1), dtype)
            cases.append((abs(w - 1), w, rt.in_dtype(rng.choice((0.0, 0.1, 1.0)) * rng.gauss(0, 1), dtype)))
    for off, w, b in cases:
        for atol, rtol in ((1e-2, 1e-2), (2e-2, 2e-2), (1e-4, 1e-4), (0.0, 0.0), (0.09375 * 0.5, 0.0)):
            got, want = rt._biased_share(off, w, b, atol, rtol), plain(off, w, b, atol, rtol)
            assert got == want and type(got) is type(want), (off, w, b, atol, rtol)


def test_generate_hands_its_plan_to_the_batch_reports_and_another_run_still_makes_its_own(tmp_path, monkeypatch):
    """generate's batch QA reports take its plan (no make_plan of the run once more at the end); a
    manifest of another seed or another profile still gets its own plan (validate.run_plan's guard)."""
    import json
    from dataclasses import replace
    from pathlib import Path

    from kernelstrain import validate
    from kernelstrain.cli import main
    from kernelstrain.manifest import read_manifest
    from kernelstrain.plan import make_plan
    from kernelstrain.validate_sessions import write_qa_reports

    made, real = [], validate.make_plan
    monkeypatch.setattr(validate, "make_plan", lambda profile, seed: made.append((profile.name, seed)) or real(profile, seed))
    data = tmp_path / "d"
    fixture = Path(__file__).parent / "fixtures" / "sessions_profile.toml"       # (the sessions layout, small)
    assert main(["generate", "--seed", "2", "--config", str(fixture), "--episodes", "3", "--workers", "1",
                 "--out", str(data), "--quiet"]) in (0, 1)
    assert made == []                          # the Context of the reports (and of the workers' checks) took the run's
    stats, manifest = json.loads((data / "stats.json").read_text()), read_manifest(data)
    before = {p.name: p.read_bytes() for p in sorted((data / "qa_reports").iterdir())}
    own = make_plan(manifest.profile, 2)
    assert validate.run_plan(manifest, own) is own
    write_qa_reports(data, stats, 1, plan=own)
    assert made == []
    assert {p.name: p.read_bytes() for p in sorted((data / "qa_reports").iterdir())} == before
    other_seed = make_plan(manifest.profile, 3)
    other_profile = replace(own, profile=replace(own.profile, description="another profile"))
    for plan in (other_seed, other_profile, None):
        assert validate.run_plan(manifest, plan) is not plan
        write_qa_reports(data, stats, 1, plan=plan)
        assert made[-1] == ("sessions_fixture", 2)
        assert {p.name: p.read_bytes() for p in sorted((data / "qa_reports").iterdir())} == before
    assert len(made) == 6


def test_later_hands_over_its_findings_and_what_it_raised_where_it_is_asked():
    """validate.Later: the findings a check made ahead reach the real Findings in their order when asked, after
    any made since; what it raised is raised then (a KeyError not swallowed by the guard it ran under); it runs once."""
    import pytest

    from kernelstrain.validate import Findings, Later
    calls = []

    def check(found):
        calls.append(1)
        found.add("a:1", "first", "files")
        found.add("a:2", "second", "holdout")
        raise KeyError("broken")

    later = Later(check)
    try:
        later.run()                 # (a caller's guard of MALFORMED around the wait never sees it)
    except KeyError:
        pytest.fail("run raised")
    later.run()
    out = Findings(2)
    out.add("m:1", "before", "manifest")
    with pytest.raises(KeyError, match="broken"):
        later.result(out)
    assert calls == [1] and out == ["m:1: before", "a:1: first"] and out.total == 3
    assert out.checks == ["manifest", "files"]
    ok = Later(lambda found: found.add("b:1", "x", "files") or {"v": 1})
    out = Findings(5)
    assert ok.result(out) == {"v": 1} and out == ["b:1: x"]
    with pytest.raises(ValueError):         # an unknown check id raises where it is added, as Findings.add does
        Later(lambda found: found.add("c", "y", "no such check")).result(Findings(5))


def test_validate_checks_files_and_held_out_rows_in_the_wait_with_the_plain_findings(dataset_copy, monkeypatch):
    """With 2 workers the files' digests and the held-out rows' check run before the rebuilds' pool (in the
    held-out search's wait); the findings are those of 1 worker, in the same order: the files' first, then the
    held-out rows'; an error in the held-out check is raised, not taken for an unreadable held-out file."""
    import json

    import pytest

    from corrupt import rewrite_row
    from kernelstrain import dataset

    rewrite_row(dataset_copy / "tasks_holdout.jsonl", 2, lambda r: r["baseline"].update(time_ms=r["baseline"]["time_ms"] * 2))
    order, real_check, real_rebuilds = [], dataset._check_holdout, dataset.Rebuilds
    monkeypatch.setattr(dataset, "_check_holdout", lambda *a: order.append("held") or real_check(*a))
    monkeypatch.setattr(dataset, "Rebuilds", lambda *a: order.append("rebuilds") or real_rebuilds(*a))
    found = {w: dataset.validate(dataset_copy, 50, w) for w in (1, 2)}
    assert order == ["held", "rebuilds", "held", "rebuilds"]
    assert list(found[2]) == list(found[1]) and found[2].checks == found[1].checks and found[2].total == found[1].total
    assert found[1].checks[:2] == ["files", "holdout"] and "tasks_holdout.jsonl" in found[1][0]
    assert "tasks_holdout.jsonl:2" in found[1][1]

    def broken(path, ctx, out):
        out.add("tasks_holdout.jsonl:1", "seen", "holdout")
        raise KeyError("a bug in the check")
    monkeypatch.setattr(dataset, "_check_holdout", broken)
    for workers in (1, 2):
        with pytest.raises(KeyError, match="a bug in the check"):
            dataset.validate(dataset_copy, 50, workers)
    assert json.loads((dataset_copy / "stats.json").read_text())["episodes"] == 40


def test_the_plans_rows_as_built_are_identical_to_their_json_round_trip():
    """validate's workers hand over the plan's rows as built (validate_derived.rebuild, no JSON round trip): a
    file's row takes their verdicts only where it is `identical` to them, so they must be JSON's own types all
    through, or every row would be checked again in the parent (both layouts, rows and chat rows)."""
    from pathlib import Path

    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    from kernelstrain.validate import identical
    from kernelstrain.validate_derived import json_value, rebuild

    fixture = Path(__file__).parent / "fixtures" / "sessions_profile.toml"
    for config, sessions in (("kernelstrain", False), (str(fixture), True)):
        plan = make_plan(load_profile(config), 1)
        for index in range(3):
            _, want, chats = rebuild(plan, index, sessions)
            assert identical(want, json_value(want)), (config, index)
            assert chats is None if sessions else all(identical(r, json_value(r)) for rows in chats for r in rows)
            key = next(k for k, v in want.items() if isinstance(v, list))
            assert not identical(want, {**want, key: tuple(want[key])})      # (a tuple is told from JSON's list)


def _plain_check_batches(data, stats, size, out):
    """validate_sessions.check_batches as written before it read in chunks (each batch and its share whole)."""
    from kernelstrain.sessions import BATCH_DIR, SESSIONS_FILE
    listed = [f for f in stats["files"] if f.startswith(f"{BATCH_DIR}/")]
    on_disk = sorted(f"{BATCH_DIR}/{p.name}" for p in (data / BATCH_DIR).glob("*")) if (data / BATCH_DIR).is_dir() else []
    if on_disk != listed:
        out.add(BATCH_DIR, f"holds {on_disk[:3]}... ({len(on_disk)} files), stats.json lists {len(listed)}", "files")
        return
    with open(data / SESSIONS_FILE, "rb") as whole:
        for k, name in enumerate(listed):
            part = (data / name).read_bytes()
            rows_in = part.count(b"\n")
            if name != f"{BATCH_DIR}/batch_{k:03d}.jsonl" or (rows_in != size and k != len(listed) - 1):
                out.add(name, f"batch {k} should be {BATCH_DIR}/batch_{k:03d}.jsonl of {size} sessions "
                              f"(it holds {rows_in})", "files")
            if whole.read(len(part)) != part:
                out.add(name, f"is not bytes {k * size}.. of {SESSIONS_FILE}: the batches do not concatenate to it", "files")
                return
        if whole.read(1):
            out.add(SESSIONS_FILE, "holds more than its batches' concatenation", "files")


def test_check_batches_in_chunks_finds_what_reading_whole_found(tmp_path, monkeypatch):
    """check_batches compares each batch with sessions.jsonl a chunk at a time (peak RSS): the findings are those
    of the whole-file comparison on sound files and on every kind of damage, with chunks of 3 bytes and of 1 MB."""
    import pytest

    from kernelstrain import validate_sessions
    from kernelstrain.validate import Findings

    lines = [b'{"id": "s-%06d", "pad": "%s"}\n' % (i, b"x" * (5 * i)) for i in range(7)]

    def dataset(name, damage=None):
        d = tmp_path / name
        (d / "batches").mkdir(parents=True)
        parts = [lines[0:3], lines[3:6], lines[6:7]]
        sessions = b"".join(lines)
        if damage == "byte":           # a byte of the second batch changed
            parts[1] = [parts[1][0], parts[1][1].replace(b"x", b"y", 1), parts[1][2]]
        elif damage == "short":        # the second batch lost its last line
            parts[1] = parts[1][:2]
        elif damage == "extra":        # sessions.jsonl holds a line no batch has
            sessions += lines[1]
        elif damage == "count":        # the first batch of 2 rows, the second of 4: same bytes, wrong cut
            parts[0], parts[1] = lines[0:2], lines[2:6]
        elif damage == "truncated":    # sessions.jsonl cut short inside the last batch
            sessions = sessions[:-4]
        for k, part in enumerate(parts):
            (d / "batches" / f"batch_{k:03d}.jsonl").write_bytes(b"".join(part))
        (d / "sessions.jsonl").write_bytes(sessions)
        return d, {"files": {f"batches/batch_{k:03d}.jsonl": {} for k in range(3)}}

    for chunk in (3, 1 << 20):
        monkeypatch.setattr(validate_sessions, "PART_CHUNK", chunk)
        for damage in (None, "byte", "short", "extra", "count", "truncated"):
            d, stats = dataset(f"{damage}-{chunk}", damage)
            got, want = Findings(50), Findings(50)
            validate_sessions.check_batches(d, stats, 3, got)
            _plain_check_batches(d, stats, 3, want)
            assert list(got) == list(want) and got.total == want.total, (damage, chunk, list(got), list(want))
            assert bool(got.total) == (damage is not None), (damage, list(got))


def test_a_sessions_verdict_sends_its_episodes_stats_fields_unless_the_parent_must_judge_it(monkeypatch):
    """A sessions verdict worked out ahead (validate_ahead.ahead) holds the checked episode row as the parent reads
    it: its stats' fields alone (stats.stats_fields: no code, ~45% of the pickled verdict with the rebuilt session
    row, which is the plan's row and not sent) where its QA figures were made; the whole row where they were not
    (the parent then judges it: qa._Acc.episode reads its steps' code)."""
    from pathlib import Path

    from kernelstrain import qa
    from kernelstrain.stats import stats_fields
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    from kernelstrain.validate_ahead import ahead
    from kernelstrain.validate_derived import rebuild
    from kernelstrain.validate_sessions import check_session
    from kernelstrain.validate import Findings
    from kernelstrain.validate_written import written_context

    plan = make_plan(load_profile(str(Path(__file__).parent / "fixtures" / "sessions_profile.toml")), 1)
    ctx = written_context(plan)
    rebuilt = rebuild(plan, 0, True)
    whole = check_session(rebuilt[1], "", Findings(1), ctx, 0)[0]
    verdict = ahead(ctx, 0, rebuilt, True)
    assert verdict.clean and verdict.judged is not None
    assert verdict.episode == stats_fields(whole) and "baseline" not in verdict.episode
    monkeypatch.setattr(qa._Acc, "episode", lambda self, ep: {}["a malformed row"])
    verdict = ahead(ctx, 0, rebuilt, True)
    assert verdict.clean and verdict.judged is None and verdict.episode == whole


def test_validate_checks_the_rows_with_its_set_up_frozen_and_leaves_the_collector_as_it_was(small_dataset, monkeypatch):
    """dataset.set_up_frozen: the rows are checked with the set-up out of the cyclic collector's reach (gc.freeze),
    which validate puts back after (a library caller's objects are never left frozen), and where a caller froze
    objects itself, validate leaves them so."""
    import gc

    from kernelstrain import dataset

    seen = []
    rebuilds = dataset.Rebuilds
    monkeypatch.setattr(dataset, "Rebuilds", lambda *a: seen.append(gc.get_freeze_count()) or rebuilds(*a))
    assert gc.get_freeze_count() == 0
    assert dataset.validate(small_dataset).total == 0
    assert seen[0] > 0 and gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert dataset.validate(small_dataset).total == 0
        assert 0 < gc.get_freeze_count() <= frozen        # (frozen objects freed meanwhile leave it)
    finally:
        gc.unfreeze()
