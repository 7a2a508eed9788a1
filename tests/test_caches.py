"""Caches and incremental measures never change an answer: each is compared with the plain
computation it stands for."""
import json
import re
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

import kernelstrain

from kernelstrain import behaviour, contamination, knobs, sim
from kernelstrain.cli import main
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile
from kernelstrain.tasks import make_task, param_grid
from test_feasibility import ARANGE_CASES, odd_shape


def registry_sample():
    """(module, variant, params, task): every module's every rung on each GPU that runs the
    module, at its first shape and dtype, for up to 6 parameter settings of the rung."""
    for m in REGISTRY.values():
        for gpu in GPUS.values():
            dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
            if dtype is None:
                continue
            task = make_task(m, gpu.name, dtype, m.shapes[0])
            for v in m.variants:
                for _, params in zip(range(6), param_grid(v)):
                    yield m, v, params, task


@pytest.mark.parametrize("fn", [sim.simulate, sim.failure, sim.launch_failure, knobs.launch, knobs.module_launch],
                         ids=["simulate", "failure", "launch_failure", "launch", "module_launch"])
def test_candidate_cache_returns_the_plain_answer(fn):
    fn.cache_clear()
    sample = list(registry_sample())
    assert len(sample) > 1000
    for _ in range(2):                # a cold pass, then one answered from the cache
        for m, v, params, task in sample:
            assert fn(m, v, params, task) == fn.uncached(m, v, params, task), (m.name, v.tag, params, task.key)


def test_failure_is_simulates_answer_untimed():
    """sim.failure (what the engine asks of whole grids) is simulate's result where the
    candidate fails, and None exactly where simulate times it."""
    for m, v, params, task in registry_sample():
        r, failed = sim.simulate.uncached(m, v, params, task), sim.failure.uncached(m, v, params, task)
        assert (failed is None) == r.ok and (r.ok or failed == r), (m.name, v.tag, params, task.key)


def test_candidate_cache_keys_on_everything_the_answer_depends_on():
    m = REGISTRY["rmsnorm_cuda"]
    v = m.variants[-1]
    task = make_task(m, "H100", "fp16", {"T": 4096, "D": 4096})
    base = sim.simulate(m, v, v.defaults(), task)
    # another GPU record of the same name (a profile's edit of the catalog) is another key
    slower = replace(task, gpu=replace(task.gpu, bw_tbs=task.gpu.bw_tbs / 2))
    assert sim.simulate(m, v, v.defaults(), slower) == sim.simulate.uncached(m, v, v.defaults(), slower) != base
    # a rung changed by value (its efficiency) is another key
    worse = replace(v, memory_eff=v.memory_eff / 2)
    assert sim.simulate(m, worse, v.defaults(), task) == sim.simulate.uncached(m, worse, v.defaults(), task) != base
    # an unhashable parameter value is computed, not cached
    odd = {**v.defaults(), "unused": []}
    assert sim.simulate(m, v, odd, task) == sim.simulate.uncached(m, v, odd, task)


def test_candidate_cache_is_bounded(monkeypatch):
    monkeypatch.setattr("kernelstrain.memo.CANDIDATE_CACHE_MAX", 50)
    sim.simulate.cache_clear()
    for m, v, params, task in list(registry_sample())[:200]:
        sim.simulate(m, v, params, task)
    assert sim.simulate.cache_len() == 50


@pytest.mark.parametrize("config", ["kernelstrain", "kernelinfer"])
def test_contamination_measured_as_generated_equals_the_files_measure(config, tmp_path):
    """generate measures contamination as its workers build episodes (contamination.Incremental):
    the figures equal a measure of the finished files, with 1 and 2 workers; and a measure of
    the files in 2 processes equals one in this process."""
    for workers in ("1", "2"):
        out = tmp_path / f"d{workers}"
        assert main(["generate", "--seed", "3", "--config", config, "--episodes", "6", "--workers", workers,
                     "--out", str(out), "--quiet"]) == 0
        stats = json.loads((out / "stats.json").read_text())
        splits = stats["holdout"]["splits"]
        layout = kernelstrain.open(out).layout
        found = contamination.measure(out, {name: s["file"] for name, s in splits.items()}, layout)
        assert {name: s["contamination"] for name, s in splits.items()} == found["splits"]
        assert stats["holdout"]["contamination_method"]["training_candidates"] == found["training_candidates"] > 0
        assert contamination.measure(out, {name: s["file"] for name, s in splits.items()}, layout, workers=2) == found


def failure_sample(stride: int = 29):
    """(module, variant, params, task): tasks of both bundled profiles' plans (every 7th), and each
    module's first menu shape with its rows made odd (test_feasibility.odd_shape: no vector access
    aligns) and the Triton arange cases; every `stride`-th config of their rungs' grids (big tiles,
    too many threads, missing arch features), and each rung's defaults at the odd shapes."""
    tasks = [t for config in ("kernelstrain", "kernelinfer") for t in make_plan(load_profile(config), 0).train[::7]]
    odd = [make_task(m, "H100", m.dtypes[0], odd_shape(m, m.shapes[0])) for m in REGISTRY.values() if m.entry]
    odd += [make_task(REGISTRY[name], "H100", "fp16", shape) for name, _, shape, _ in ARANGE_CASES]
    i = 0
    for task in tasks + odd:
        m = REGISTRY[task.module]
        for v in m.variants:
            if task in odd:
                yield m, v, v.defaults(), task
            for params in param_grid(v):
                i += 1
                if i % stride == 0:
                    yield m, v, params, task


def test_launch_failure_is_failures_answer_for_the_classes_it_decides():
    """engine.Episode.clear_failure asks launch_failure, not failure, for sim.LAUNCH_CLASSES
    (whole grids, without the code's access checks): the same answer wherever either is of
    such a class, and failure's other classes arise only where launch_failure finds nothing."""
    classes = Counter()
    for m, v, params, task in failure_sample():
        full, launched = sim.failure.uncached(m, v, params, task), sim.launch_failure.uncached(m, v, params, task)
        classes[full.error_class if full else None] += 1
        if launched is not None or (full is not None and full.error_class in sim.LAUNCH_CLASSES):
            assert launched == full, (m.name, v.tag, params, task.key)
    # the sample holds every class: the check above compared each kind of answer
    assert set(sim.LAUNCH_CLASSES) | {"align", "syntax", None} <= set(classes), classes


# behaviour._EXCERPT before it anchored its second branch at line starts (the plain computation)
_EXCERPT_PLAIN = re.compile(r"at \d+:\d+:\n.*?\n[ \t]*\^[ \t]*(?:\n|$)|[^\n]*\n[ \t]*\^[~ \t]*(?:\n|$)", re.S)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["at 3:14:", "x = f(y)", " ", "\t", "^", "~~~", "at", "12:", "\n", "\n", "a ^ b"]),
                max_size=40).map("".join))
def test_excerpt_pattern_removes_what_the_unanchored_one_did(text):
    assert behaviour._EXCERPT.sub("", text) == _EXCERPT_PLAIN.sub("", text)


def test_excerpt_pattern_on_prompts():
    """Tool texts with excerpts: a compiler's caret under a line, Triton's `at L:C:` block."""
    texts = ["error: expected ';'\n    int x = 1\n            ^\nmore", "at 12:4:\n    a = tl.load(p)\n    ^\nNameError",
             "ok\n\n^\n", "x at 1:2:\ny\n  ^~~ \n  ^\n"]
    for text in texts:
        assert behaviour._EXCERPT.sub("", text) == _EXCERPT_PLAIN.sub("", text)


def _labels_plain(text: str, tags) -> list:
    """behaviour.labels_in before its line cache and str.find fences: the whole prose's findall."""
    prose = behaviour._FENCE.sub("", text)
    prose = behaviour._EXCERPT.sub("", prose)
    found = behaviour.KINDS_SEEN.findall(prose)
    return found + [t for t in tags if re.search(rf"(?<![\w.]){re.escape(t)}(?!\w)", prose)]


_LABEL_PIECES = ["```", "`", "structural", "rebench", "tiled", "naive", "a-b", "x", ".", "_", " ", "\n", "\n",
                 "^", "  ^\n", "at 3:14:\n", "tiled_x", ".tiled", "7", "2.5", " us", " ms", "msx", "é", "٣", "joint"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_LABEL_PIECES), max_size=40).map("".join),
       st.sampled_from([("tiled", "naive"), ("tiled", "a-b"), ("tiled", "tiled_x"), ("tiled_x", "tiled"), ()]))
def test_labels_in_line_cache_finds_what_the_whole_prose_scan_did(text, tags):
    """Each prose line's labels kept (behaviour._LINES) and fences cut by str.find: the same
    list as the plain scan, asked twice (the second time from the cache), and time_units too."""
    for _ in range(2):
        assert behaviour.labels_in(text, tags) == _labels_plain(text, tags)
    assert behaviour.time_units(text) == set(behaviour._TIME.findall(behaviour._FENCE.sub("", text)))
    # the literal-first patterns find what the \b-first ones do, match for match
    assert behaviour._TIME_FROM.findall(text) == behaviour._TIME.findall(text)
    assert behaviour._KINDS_FROM.findall(text) == behaviour.KINDS_SEEN.findall(text)
    words = behaviour._tag_words(tags)
    if words is not None:
        alternatives = "|".join(map(re.escape, tags))
        assert words.findall(text) == re.findall(rf"(?<![\w.])(?:{alternatives})(?!\w)", text)


def test_labels_in_on_prompts_of_a_run(tmp_path):
    """Every prompt qa reads in a small run: the cached scan's answer is the plain one's."""
    out = tmp_path / "d"
    assert main(["generate", "--seed", "3", "--episodes", "6", "--out", str(out), "--quiet"]) in (0, 1)
    checked = 0
    for line in (out / "sft_steps.jsonl").read_text().splitlines():
        row = json.loads(line)
        tags = tuple(v.tag for v in REGISTRY[row["module"]].variants)
        prompt = row["messages"][1]["content"]
        for text in (prompt, prompt.replace("Last result:", "Last result (structural):"),
                     prompt + f"\nnext: {tags[-1]}"):
            assert behaviour.labels_in(text, tags) == _labels_plain(text, tags)
            checked += 1
    assert checked >= 30


def _device_stream_plain(lines, defs: dict):
    """scopes.device_stream before its caches: every line lexed, expanded and echoed afresh, the
    system-macro test asked backwards from each line (defs a plain dict: echoed keeps nothing)."""
    from kernelstrain.slips import cpp, scopes
    defs, stream, shown, directive, active = dict(defs), [], {}, False, []
    values = cpp.macros(lines, headers=False)
    for j, line in enumerate(lines):
        text = line.strip()
        if not directive and text.startswith("#"):
            scopes._condition(text, active, values)
        if directive or text.startswith("#"):
            directive = line.endswith("\\")
            continue
        if all(on for on, _ in active):
            shown[j], placed = cpp.echo_tokens(line, defs, cpp.follows_system_macro(lines, j))
            stream += [(j, pos, t) for pos, t in placed] + [(j, -1, t) for t in cpp.moved_tokens(line, defs)]
    return stream, shown


def test_slip_echo_caches_give_the_plain_stream():
    """The nvcc echo of every line of CUDA candidates (slips.cpp: tokens by line, echoed by line
    and the macros it reaches; scopes.device_stream's running system-macro test): the same stream
    as the plain computation, for renders of every CUDA module at several parameter settings
    (candidates that share lines and differ in a macro's value), and for macro edge cases."""
    from kernelstrain.slips import cpp, scopes
    cpp._ECHOED.clear()
    cpp._TOKENS.clear()
    codes = []
    for m in REGISTRY.values():
        if m.impl != "cuda":
            continue
        task = make_task(m, "H100", next(d for d in m.dtypes), m.shapes[0]) if m.supports(GPUS["H100"], m.dtypes[0]) else None
        if task is None:
            continue
        for v in m.variants[:3]:
            for _, params in zip(range(3), param_grid(v)):
                codes.append(knobs.render(m, v, params, task, None))
    codes += ["#define T 128\n#define W (T / 32)\nfloat y = -INFINITY\n\n  y = W + T;\n#if T > 64\nint a = T;\n#else\nint b;\n#endif",
              "#define T 64\n#define W (T / 32)\nfloat y = -INFINITY\n\n  y = W + T;\n#define F(x) ((x) + W)\nz = F(T);",
              "#define W 2\nfloat y = -INFINITY\n\n  y = W + T;"]
    assert len(codes) > 50
    for _ in range(2):          # the second pass from the caches
        for code in codes:
            lines = code.split("\n")
            assert scopes.device_stream(lines, cpp.macros(lines)) == _device_stream_plain(lines, cpp.macros(lines))


def test_episodes_of_one_task_share_a_rungs_overflowing_configs():
    """limits.rung_failing: a second episode of a task takes the first one's scan of a rung's
    grid, and it is the plain filter of that episode's own configs, in order."""
    from kernelstrain import limits
    from kernelstrain.engine import Episode
    from test_engine import streams
    m = REGISTRY["gemm_fp16_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    limits._FAILING.clear()
    first, second = (Episode(m, task, streams(seed), 40, 0.0, 0.0, 1) for seed in (1, 2))
    # the highest rung with tiles too big for the H100's shared memory (the split-K rung's 64-row tiles all fit)
    top = next(v for v in reversed(first.rungs) if first._over_limit(v, "smem"))
    scanned = len(limits._FAILING)
    theirs = next(v for v in second.rungs if v.tag == top.tag)
    plain = [c.params for c in second.configs(theirs) if second.clear_failure(c, "smem") and second.writable(c)]
    second._over_limit(theirs, "smem")
    assert len(limits._FAILING) == scanned
    assert [c.params for c in second._limits[(top.tag, "smem")]] == plain


def test_a_cuda_rungs_launch_failure_ignores_its_tuning_knobs_on_nvidia():
    """engine.Episode._failing_test asks the launch once per own parameters of a CUDA rung's grid on
    an NVIDIA GPU: every knob setting of a config (knobs.KNOBS, the slips at 0 as grids leave them)
    fails as the config with the knobs off does, of the same class with the same shared memory (the
    knobs move registers alone, and sim.cap_registers keeps a block's registers within the SM's file).
    Every NVIDIA training task of both bundled profiles' plans (every 14th) whose rungs take knobs."""
    compared = Counter()
    for config in ("kernelstrain", "kernelinfer"):
        profile = load_profile(config)
        names = [n for n in profile.search.knobs if n not in knobs.SLIPS]
        for task in make_plan(profile, 0).train[::14]:
            m = REGISTRY[task.module]
            if m.impl != "cuda" or task.gpu.vendor != "nvidia" or hasattr(m, "simulate"):
                continue
            for base in m.variants:
                v = knobs.extend(base, m.impl, m.render(base, base.defaults(), task), profile.search.knobs)
                tuned = [p.name for p in v.params if p.name in names]
                if not tuned:
                    continue
                answers = {}
                for params in param_grid(knobs.untuned(v)):
                    r = sim.launch_failure.uncached(m, v, params, task)
                    answer = (r.error_class, r.smem_bytes) if r is not None else None
                    own = tuple(value for name, value in params.items() if name not in knobs.KNOBS)
                    assert answers.setdefault(own, answer) == answer, (m.name, v.tag, params, task.key)
                    compared[answer[0] if answer else None] += 1
    # failures of both classes the engine scans for were among the configs compared
    assert compared["smem"] and compared["resources"] and compared[None], compared


_FEATURE_PIECES = [".e2m1", "kind::f8f6f4", "kind::mxf4nvf4 ", "kind::mxf4", "kind::mxf4x", "e2m1", ".e2m1x", "kind::",
                   "wgmma.", "wgmma", "cp.async.bulk.tensor", "asm(", "asm volatile (", "__asm__(", "x", " ", "\n", "."]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_FEATURE_PIECES), max_size=12))
def test_features_hints_find_what_every_pattern_finds(pieces):
    """validate._features searches a feature's pattern only in code holding one of its hints: the
    same features as every pattern searched in every code (an fp4 marker is still caught)."""
    from kernelstrain import validate
    code = "".join(pieces)
    plain = frozenset(f for f, pat in validate.FEATURE_MARKERS.items() if pat.search(code))
    assert validate._features.__wrapped__(code) == plain
def _stated_plain(code: str) -> tuple[list, list]:
    """messages._STATED's matches, each pattern run over the whole code (what _stated stands for)."""
    from kernelstrain import messages
    found = [[(m.start(), m.group(1), m.group(2)) for m in p.finditer(code)] for p in messages._STATED]
    return found[0] + found[1], found[2]


_STATED_PIECES = ["#define", "#define ", " ", "\t", "\n", "(", ")", ",", "=", "==", "BLOCK", "num_warps", "num_stages",
                  "xBLOCK", "_T", "8", "128", "u", "// c", "constexpr int N = 4;", "k[grid](", "é", "٣", "  #define W 2",
                  "a, b = 1, 2", "x = 3", ";", "BLOCK=64", "(num_warps=4)", "//#define V 8"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_STATED_PIECES), max_size=40).map("".join))
def test_stated_from_literals_finds_what_the_patterns_did(code):
    """messages._stated (the `#define`s and the launch keywords found from a literal) and the
    _TUPLE prefilter: the same matches as the plain patterns, on texts of their edge pieces."""
    from kernelstrain import messages
    defines, kwargs = messages._stated(code)
    plain_defines, plain_kwargs = _stated_plain(code)
    assert sorted(defines) == sorted(plain_defines) and kwargs == plain_kwargs
    assert messages._TUPLE.findall(code) == (messages._TUPLE.findall(code) if messages._TUPLE_VALUES.search(code)
                                             else [])


def test_code_values_on_every_rung_is_the_plain_patterns():
    """The literal-first searches of code_values against the plain patterns, on renders of every
    module's first rungs (CUDA and Triton, fused programs' several launches among them)."""
    from kernelstrain import messages
    codes = []
    for m in REGISTRY.values():
        gpu = next((g for g in GPUS.values() if any(m.supports(g, d) for d in m.dtypes)), None)
        if gpu is None:
            continue
        task = make_task(m, gpu.name, next(d for d in m.dtypes if m.supports(gpu, d)), m.shapes[0])
        for v in m.variants[:3]:
            for _, params in zip(range(2), param_grid(v)):
                codes.append((knobs.render(m, v, params, task, None), params))
    assert len(codes) > 100 and any("num_warps=" in c for c, _ in codes) and any("#define" in c for c, _ in codes)
    for code, _ in codes:
        assert messages._stated(code) == _stated_plain(code)
        assert bool(messages._TUPLE_VALUES.search(code)) or not messages._TUPLE.findall(code)


def test_tokens_cache_counts_what_the_plain_rule_does(tmp_path):
    """messages.tokens (kept for the last texts): every message of a small run's chat rows, asked
    twice and after the cache was cleared, counts what the uncached rule counts."""
    from kernelstrain import messages
    from kernelstrain.episodes import chat_rows
    assert main(["generate", "--seed", "3", "--episodes", "4", "--out", str(tmp_path / "d"), "--quiet"]) in (0, 1)
    texts = [m["content"] for line in (tmp_path / "d" / "episodes.jsonl").read_text().splitlines()
             for rows in chat_rows(json.loads(line), False, 16000) for r in rows for m in r["messages"]]
    assert len(texts) > 100
    plain = messages.tokens.__wrapped__
    for _ in range(2):
        assert [messages.tokens(t) for t in texts] == [plain(t) for t in texts]
        assert messages.tokens.cache_info().hits > 0
        messages.tokens.cache_clear()
    assert messages.tokens("é1") == plain("é1") == 2


def test_a_fit_that_has_kept_its_rung_sums_still_pickles_and_copies_equal():
    """Fit._rung keeps closures in the instance; a pickled or copied Fit leaves them behind and answers the same."""
    import copy
    import pickle
    from kernelstrain.calibration import load_fit
    fit = load_fit()
    want = fit.core_factor("gemm_fp16_cuda", "cuda", "wgmma_tma", {"waves": 2.0})
    for other in (pickle.loads(pickle.dumps(fit)), copy.deepcopy(fit), copy.copy(fit)):
        assert other == fit and "_kept_rungs" not in other.__dict__
        assert other.core_factor("gemm_fp16_cuda", "cuda", "wgmma_tma", {"waves": 2.0}) == want
