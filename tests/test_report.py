"""`kernelstrain report`: one self-contained HTML file whose charts carry the dataset's
figures, with an episode browser that a real headless chromium loads and drives."""
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

import chromedriver
from kernelstrain.cli import main
from kernelstrain.report import Aggregate, failure_kind, read_rows, step_feedback
from kernelstrain.svg import quantiles


class Page(HTMLParser):
    """The tags, external references and script blocks of a page."""

    def __init__(self):
        super().__init__()
        self.charts, self.marks, self.external, self.scripts = [], Counter(), [], []
        self._chart = None
        self._script = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])
        if tag == "svg" and "chart" in a.get("class", ""):
            self._chart = a["data-chart"]
            self.charts.append(self._chart)
        if self._chart and "mark" in a.get("class", "").split():
            self.marks[self._chart] += 1
        if tag == "script":
            self._script = [a.get("type", "text/javascript"), a.get("id"), ""]

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None
        if tag == "script" and self._script:
            self.scripts.append(self._script)
            self._script = None

    def handle_data(self, data):
        if self._script:
            self._script[2] += data


@pytest.fixture(scope="module")
def report(small_dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", str(small_dataset), "--out", str(out)]) == 0
    return out


def test_report_is_one_self_contained_file(report):
    page = Page()
    page.feed(report.read_text(encoding="utf-8"))
    assert page.external == []
    # nothing loaded from the network (a tool's text may quote a URL: PyTorch's CUDA errors do)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?https?://|url\(\s*["']?https?://|fetch\(|XMLHttpRequest""",
                         report.read_text()), "no network references"
    assert {"status-mix", "steps-per-episode", "elapsed-hours", "speedup-by-family", "speedup-by-gpu",
            "failure-kinds"} <= set(page.charts)
    assert all(page.marks[c] > 0 for c in page.charts), {c: page.marks[c] for c in page.charts}


def test_report_charts_carry_the_datasets_figures(report, small_dataset):
    text = report.read_text(encoding="utf-8")
    eps = [ep for name in ("episodes.jsonl", "episodes.validation.jsonl") for _, ep in read_rows(small_dataset / name)]
    steps = [s for ep in eps for s in ep["steps"]]
    ok = sum(s["status"] == "ok" for s in steps)
    assert f"all ok: {ok:,} ({100 * ok / len(steps):.2f}%)" in text            # the status bar's tooltip
    lengths = Counter(len(ep["steps"]) for ep in eps)
    n, count = lengths.most_common(1)[0]
    assert f"<title>{n}: {count:,}</title>" in text                            # the step-count histogram
    modules = {ep["module"] for ep in eps}
    assert len(re.findall(r'data-chart="ladder-', text)) == len(modules)
    page = Page()
    page.feed(text)
    data = json.loads(next(s[2] for s in page.scripts if s[1] == "episode-data"))
    per_module = Counter(e["module"] for e in data)
    assert set(per_module) == modules and max(per_module.values()) <= 3
    assert f"{len(data)} of {len(eps):,} episodes" in text


def test_browser_episode_diffs_are_against_the_running_best(report, small_dataset):
    page = Page()
    page.feed(report.read_text(encoding="utf-8"))
    data = json.loads(next(s[2] for s in page.scripts if s[1] == "episode-data"))
    eps = {ep["id"]: ep for _, ep in read_rows(small_dataset / "episodes.jsonl")}
    view = data[0]
    raw = eps[view["id"]]
    best = 0
    for shown, s in zip(view["steps"], raw["steps"]):
        assert shown["against"] == best
        assert bool(shown["diff"]) == (s["code"] != (raw["baseline"]["code"] if best == 0 else
                                                    raw["steps"][best - 1]["code"]))
        if s["kept"]:
            best = s["step"]
    assert view["steps"][0]["feedback"].startswith("Step 1: ")


def test_sample_does_not_depend_on_file_order(small_dataset):
    eps = [ep for name in ("episodes.jsonl", "episodes.validation.jsonl") for _, ep in read_rows(small_dataset / name)]
    forward, backward = Aggregate(2), Aggregate(2)
    for ep in eps:
        forward.add(ep)
    for ep in reversed(eps):
        backward.add(ep)
    assert [e["id"] for e in forward.sampled()] == [e["id"] for e in backward.sampled()]
    module = eps[0]["module"]
    bands = forward.ladder_bands(module)
    assert bands[0] == [1.0] * 5 and all(b == sorted(b) for b in bands)
    finals = [ep["best"]["time_ms"] / ep["baseline"]["time_ms"] for ep in eps if ep["module"] == module]
    if max(len(ep["steps"]) for ep in eps if ep["module"] == module) <= len(bands) - 1:
        assert bands[-1][2] == pytest.approx(quantiles(finals, (0.5,))[0])


def test_browser_sample_keeps_to_its_byte_budget(small_dataset, monkeypatch):
    from kernelstrain import report as report_module
    _, full = report_module.build_report(small_dataset, per_module=3)
    monkeypatch.setattr(report_module, "BROWSER_BYTES", 400_000)
    page, cut = report_module.build_report(small_dataset, per_module=3)
    assert 0 < cut["browser_episodes"] < full["browser_episodes"]
    parser = Page()
    parser.feed(page)
    data = json.loads(next(s[2] for s in parser.scripts if s[1] == "episode-data"))
    assert len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()) <= 400_000 or len(data) == 1
    assert [e["module"] for e in data] == sorted(e["module"] for e in data)


@pytest.mark.parametrize("step, kind", [
    ({"status": "compile_error", "error": "ptxas error   : Entry function 'k' uses too much shared data (0xfa00 bytes, 0xc000 max)"}, "compile: shared memory"),
    ({"status": "compile_error", "error": "ptxas /tmp/x.ptx, line 9; error   : Instruction 'wgmma.fence' not supported on .target 'sm_80'"}, "compile: arch feature"),
    ({"status": "compile_error", "error": "candidate.cu(68): error: identifier \"chunks\" is undefined"}, "compile: typo / syntax"),
    ({"status": "compile_error", "error": "cudaFuncSetAttribute(k, MaxDynamicSharedMemorySize, 212992) failed: invalid argument (requested 212992 bytes of shared memory per block, device limit 101376)"}, "compile: shared memory"),
    ({"status": "wrong_result", "error": "Mismatch vs reference: max abs error 1.2e+00", "bug": "missing_barrier"}, "wrong: missing_barrier"),
    ({"status": "wrong_result", "error": "Mismatch vs reference: max abs error 1.2e+00"}, "wrong: mismatch vs reference"),
    ({"status": "ok", "error": None}, None),
])
def test_failure_kinds(step, kind):
    assert failure_kind(step) == kind


def test_step_feedback_pairs_each_candidate_with_the_turn_after_it():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "c1"}, {"role": "user", "content": "f1"},
            {"role": "assistant", "content": "c2"}]
    assert step_feedback(msgs) == ["f1", ""]


def test_report_bad_inputs(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    assert "no episodes.jsonl" in capsys.readouterr().err
    (tmp_path / "episodes.jsonl").write_text('{"id": 1\n')     # rows without their run (stats, manifest)
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stats.json: missing" in err and not (tmp_path / "r.html").exists()


def test_report_renders_qa_and_splits_when_present(dataset_copy, tmp_path):
    (dataset_copy / "qa.json").write_text(json.dumps({"figures": {"identical_faster": {"value": 0, "threshold": 0,
                                                                                     "pass": True}}}))
    stats = json.loads((dataset_copy / "stats.json").read_text())
    stats["splits"] = {"combo": {"tasks": 185, "max_ngram_overlap": 0.31}}
    (dataset_copy / "stats.json").write_text(json.dumps(stats))
    out = tmp_path / "r.html"
    assert main(["report", str(dataset_copy), "--out", str(out)]) == 0
    text = out.read_text()
    assert "Trajectory QA" in text and "identical_faster" in text and 'class="pass"' in text
    assert "Holdout splits and contamination" in text and "max_ngram_overlap" in text


@pytest.mark.skipif(chromedriver.missing() is not None, reason=str(chromedriver.missing()))
def test_report_in_a_headless_browser(report):
    with chromedriver.Browser(1280, 900) as b:
        b.get(report.as_uri())
        charts = b.run("""return Array.from(document.querySelectorAll('svg.chart')).map(function (s) {
            var box = s.getBoundingClientRect();
            return [s.dataset.chart, s.querySelectorAll('.mark').length, box.width, box.height]; });""")
        assert len(charts) > 6
        assert all(marks > 0 and w > 50 and h > 50 for _, marks, w, h in charts), charts
        first = b.run("return [document.getElementById('episode-head').textContent, "
                      "document.querySelectorAll('#steps-table tbody tr').length, "
                      "document.getElementById('episode-select').options.length]")
        assert first[0] and first[1] > 0 and first[2] > 1
        b.run("var s = document.getElementById('episode-select'); s.selectedIndex = s.options.length - 1;"
              "s.dispatchEvent(new Event('change'));")
        second = b.run("return [document.getElementById('episode-head').textContent, "
                       "document.querySelectorAll('#steps-table tbody tr').length]")
        assert second[0] != first[0] and second[1] > 0
        b.run("document.querySelectorAll('#steps-table tbody tr')[1].click()")
        title, sel = b.run("return [document.getElementById('step-title').textContent, "
                           "document.querySelectorAll('#steps-table tr.sel').length]")
        assert title.startswith("Step 2 ") and sel == 1
        errors = [e for e in b.console() if e.get("level") in ("SEVERE", "ERROR")]
        assert errors == []
        # the console check can fail: a page with a script error is caught
        broken = report.with_name("broken.html")
        broken.write_text("<!DOCTYPE html><title>x</title><script>no_such_function();</script>")
        b.get(broken.as_uri())
        assert any("no_such_function" in e.get("message", "") for e in b.console())
