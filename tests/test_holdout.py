"""Holdout splits (combo, unseen_op, unseen_gpu) and their contamination figures."""
import json
from pathlib import Path

import pytest

import kernelstrain

from kernelstrain import contamination as cont
from kernelstrain.cli import main
from kernelstrain.fields import as_dict
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan, select_combos
from kernelstrain.profiles import DEFAULT_PROFILE, load_profile
from kernelstrain.engine import baseline_rung
from kernelstrain.tasks import make_task

PROFILE = load_profile(DEFAULT_PROFILE)


def profile_with(tmp_path, holdout: str):
    """The default profile with its [holdout] table replaced."""
    text = DEFAULT_PROFILE.read_text()
    start, end = text.index("[holdout]"), text.index("[output]")
    path = tmp_path / "p.toml"
    path.write_text(text[:start] + "[holdout]\nseed = 0\n" + holdout + "\n\n" + text[end:])
    return path


# -- splits -----------------------------------------------------------------------------
def test_default_splits_keep_the_card_figures():
    plan = make_plan(PROFILE, 0)
    combos = select_combos(PROFILE)
    assert len(combos) == 2313 and list(plan.splits) == ["combo", "unseen_op"]
    assert len(plan.holdout) == len(plan.splits["combo"]) == 185 == round(0.08 * len(combos))
    held_ops = set(PROFILE.holdout.unseen_ops)
    assert len(held_ops) == 3
    # every combo of a held op, both impls, is in the unseen_op split and none in training
    assert {t.key for t in plan.splits["unseen_op"]} == {t.key for t in combos if REGISTRY[t.module].op in held_ops}
    assert not [t for t in plan.train if REGISTRY[t.module].op in held_ops]
    held_modules = {t.module for t in plan.splits["unseen_op"]}
    assert {REGISTRY[m].impl for m in held_modules} == {"cuda", "triton"}
    assert all(f"{REGISTRY[m].op}_{impl}" not in REGISTRY or f"{REGISTRY[m].op}_{impl}" in held_modules
               for m in held_modules for impl in ("cuda", "triton"))
    # the combo split holds out combos whose (module, gpu) still trains; nothing is in two places
    train = {t.key for t in plan.train}
    pairs = {(t.module, t.gpu.name) for t in plan.train}
    assert all((t.module, t.gpu.name) in pairs and t.key not in train for t in plan.holdout)
    assert len(train) + 185 + len(plan.splits["unseen_op"]) == 2313
    # every family keeps training data
    families = {m.family for m in REGISTRY.values()}
    assert {REGISTRY[t.module].family for t in plan.train} == families


def test_splits_are_deterministic_and_independent_of_the_episode_seed():
    a, b, c = make_plan(PROFILE, 0), make_plan(PROFILE, 0), make_plan(PROFILE, 7)
    assert a.splits == b.splits == c.splits and a.order == b.order
    assert a.order != c.order
    other = make_plan(PROFILE, 0, holdout_seed=1)
    assert other.splits["unseen_op"] == a.splits["unseen_op"] and other.holdout != a.holdout


def test_unseen_gpu_split(tmp_path):
    path = profile_with(tmp_path, 'frac = 0.08\nsplits = ["combo", "unseen_gpu"]\nunseen_gpus = ["MI300X"]')
    profile = load_profile(path)
    plan = make_plan(profile, 0)
    combos = select_combos(profile)
    assert {t.gpu.name for t in plan.train} == {"A100", "H100", "RTX4090"}
    assert {t.key for t in plan.splits["unseen_gpu"]} == {t.key for t in combos if t.gpu.name == "MI300X"}
    assert len(plan.holdout) == round(0.08 * len(combos))
    assert not {t.key for t in plan.holdout} & {t.key for t in plan.splits["unseen_gpu"]}


@pytest.mark.parametrize("holdout, key", [
    ('frac = 0.08\nsplits = ["combo", "unseen_planet"]', "holdout.splits"),
    ('frac = 0.08\nsplits = ["unseen_op"]\nunseen_ops = ["rope"]', "holdout.splits"),
    ('frac = 0.08\nsplits = ["combo", "unseen_op"]', "holdout.unseen_ops"),
    ('frac = 0.08\nunseen_ops = ["rope"]', "holdout.unseen_ops"),
    ('frac = 0.08\nsplits = ["combo", "unseen_op"]\nunseen_ops = ["no_such_op"]', "holdout.unseen_ops"),
    ('frac = 0.08\nsplits = ["combo", "unseen_op"]\nunseen_ops = ["topk", "top_p"]', "sampling"),
    ('frac = 0.08\nsplits = ["combo", "unseen_gpu"]\nunseen_gpus = ["A100", "H100", "RTX4090", "MI300X"]',
     "every GPU"),
    ('frac = 0.08\nsplits = ["combo", 3]', "list of strings"),
])
def test_bad_split_settings_are_usage_errors(tmp_path, capsys, holdout, key):
    path = profile_with(tmp_path, holdout)
    assert main(["holdout", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelstrain: error:") and key in err and err.count("\n") == 1


def test_holdout_writes_each_split_like_generate(small_dataset, tmp_path, capsys):
    assert main(["holdout", "--out", str(tmp_path)]) == 0
    for name in ("tasks_holdout.jsonl", "tasks_holdout_unseen_op.jsonl"):
        assert (tmp_path / name).read_bytes() == (small_dataset / name).read_bytes()
    assert "unseen_op: 192 held-out tasks" in capsys.readouterr().out


def test_held_task_starts_an_episode_and_carries_no_solution(small_dataset):
    rows = [json.loads(line) for line in (small_dataset / "tasks_holdout_unseen_op.jsonl").open()]
    assert rows and {r["split"] for r in rows} == {"unseen_op"}
    for r in rows[:: max(1, len(rows) // 12)]:
        assert {"prompt", "system", "baseline", "reference", "signature", "shape", "gpu"} <= set(r)
        assert not {"steps", "best", "solution", "messages"} & set(r)
        module = REGISTRY[r["module"]]
        task = make_task(module, r["gpu"], r["dtype"], as_dict(r["shape"]))
        base = baseline_rung(module, task, load_profile("kernelstrain").search)   # the engine's, at its defaults
        assert r["baseline"]["tag"] == base.tag and r["baseline"]["code"] == module.render(base, base.defaults(), task)
        assert r["baseline"]["code"] in r["prompt"]
        assert r["signature"] in r["prompt"] and "class Model" in r["reference"]
        assert cont.solution_code(module, task) not in r["prompt"]


# -- normalizer -------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, lang", [
    ("int x=1;// one\n", "int  x = 1 ;", "cuda"),
    ("/* header\n spanning */ __global__ void k() {}", "__global__\nvoid k(){ }", "cuda"),
    ("x = f(a,\n      b)  # why\n", "x=f(a, b)", "python"),
    ("def f():\n    return 1\n", "def f():\n  return 1", "python"),
])
def test_comments_and_whitespace_do_not_change_the_fingerprint(a, b, lang):
    assert cont.fingerprint(a, lang) == cont.fingerprint(b, lang)


@pytest.mark.parametrize("a, b, lang", [
    ('printf("a // b");', 'printf("a");', "cuda"),        # // inside a string is code
    ("s = '# not a comment'", "s = ''", "python"),
    ("x = a+b", "x = a-b", "cuda"),
    ('s = """doc\n  kept"""', 's = """doc kept"""', "python"),
])
def test_code_changes_change_the_fingerprint(a, b, lang):
    assert cont.fingerprint(a, lang) != cont.fingerprint(b, lang)


def test_tokens_keep_numbers_operators_and_strings_whole():
    assert cont.tokens('a <<= 0x1Fu; b = 1e-5f >> 2; s = "x y";', "cuda") == [
        "a", "<<=", "0x1Fu", ";", "b", "=", "1e-5f", ">>", "2", ";", "s", "=", '"x y"', ";"]
    assert cont.tokens("y = x ** 2 // 3  # c\nz = rb'q'", "python") == [
        "y", "=", "x", "**", "2", "//", "3", "z", "=", "rb'q'"]
    assert len(cont.shingles(list(range(20)))) == 20 - cont.NGRAM + 1


def test_tokens_line_by_line_are_the_whole_sources_tokens():
    """tokens lexes line by line (cached) where no token can span lines: the same tokens as
    lexing the whole source, over every module's renders and sources that span lines."""
    def whole(code, lang):
        return [t for t in cont._LEXERS[lang].findall(code) if t]
    sources = [("int a; /* x\n y */ b = 1;\n c", "cuda"), ('s = "a\\\n b";\nint c;', "cuda"),
               ('x = """a\n b"""\ny = 1', "python"), ("x = 1 + \\\n 2\ny", "python"),
               ("a  \n\n  b // c\n#define K 4\n", "cuda"), ("", "python")]
    for m in REGISTRY.values():
        gpu, dtype = next((g, d) for g in GPUS.values() for d in m.dtypes if m.supports(g, d))
        task = make_task(m, gpu.name, dtype, m.shapes[0])
        sources += [(m.render(v, v.defaults(), task), cont.LANG[m.impl]) for v in m.variants if not v.needs - gpu.features]
    assert len(sources) > 100
    for code, lang in sources:
        assert cont.tokens(code, lang) == whole(code, lang), code[:200]


def test_boilerplate_holds_the_shared_prelude_only():
    plate = cont.boilerplate()
    prelude = cont.shingles(cont.tokens("#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n", "cuda"))
    assert prelude & plate
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    grams = cont.shingles(cont.tokens(m.render(m.variants[-1], m.variants[-1].defaults(), task), "cuda"))
    assert 0 < len(grams & plate) < len(grams) / 2     # the kernel itself is mostly specific


# -- contamination ----------------------------------------------------------------------
def renders(name, gpu="H100"):
    m = REGISTRY[name]
    task = make_task(m, gpu, m.dtypes[0], m.shapes[0])
    return [(m.render(v, v.defaults(), task), cont.LANG[m.impl]) for v in m.variants if not v.needs - task.gpu.features]


def test_matcher_agrees_with_brute_force_overlap():
    targets = renders("rmsnorm_cuda")[:3] + renders("rope_triton")[:2]
    training = renders("layernorm_cuda") + renders("rmsnorm_cuda")[2:4] + renders("softmax_triton")
    matcher = cont.Matcher(targets)
    tally = cont.Tally(matcher)
    for code, lang in training:
        tally.add(matcher.scan(code, lang))
    plate = cont.boilerplate()
    for i, (code, lang) in enumerate(targets):
        mine = cont.shingles(cont.tokens(code, lang))
        raws, specs = [0.0], [0.0]
        for other, other_lang in training:
            theirs = cont.shingles(cont.tokens(other, other_lang))
            raws.append(len(mine & theirs) / len(mine))
            specs.append(len((mine - plate) & theirs) / len(mine - plate))
        raw, spec = tally.overlaps()[i]
        assert raw == pytest.approx(max(raws)) and spec == pytest.approx(max(specs))
        exact = any(cont.fingerprint(code, lang) == cont.fingerprint(o, ol) for o, ol in training)
        assert (i in tally.exact) == exact
    assert 2 in tally.exact and 0 not in tally.exact   # rmsnorm's third rung is in training, its first is not


def test_small_dataset_reports_both_splits(small_dataset, capsys):
    stats = json.loads((small_dataset / "stats.json").read_text())
    h = stats["holdout"]
    combo, unseen = h["splits"]["combo"], h["splits"]["unseen_op"]
    assert combo["tasks"] == 185 and unseen["tasks"] == 192
    assert unseen["contamination"]["exact"] == {"solution": 0, "baseline": 0, "reference": 0, "any": 0}
    assert combo["contamination"]["exact"]["any"] > 0
    cn, un = combo["contamination"]["ngram"], unseen["contamination"]["ngram"]
    assert un["solution_ngram_specific"]["max"] < 0.5 < cn["solution_ngram_specific"]["max"]
    assert set(h["modules_held_out"]) == {t for t in REGISTRY if REGISTRY[t].op in PROFILE.holdout.unseen_ops}
    assert not set(h["modules_held_out"]) & set(h["modules_in_training"])
    assert not set(h["modules_held_out"]) & set(stats["by_module"])
    card = (small_dataset / "README.md").read_text()
    assert "config_name: holdout_unseen_op" in card and "path: tasks_holdout_unseen_op.jsonl" in card
    assert "## Splits and contamination" in card and "| `holdout_unseen_op` (unseen_op) | 192 | 0 / 0 / 0 |" in card
    assert main(["stats", str(small_dataset)]) == 0
    out = capsys.readouterr().out
    assert "unseen_op    192 tasks" in out and "solution 0/192, baseline 0/192, reference 0/192" in out


def test_validate_reports_combo_contamination_without_failing(small_dataset, capsys):
    assert main(["validate", str(small_dataset)]) == 0
    out = capsys.readouterr().out
    assert "holdout split combo (tasks_holdout.jsonl): exact normalized matches" in out


def plant(data: Path, code: str) -> None:
    """Write `code` into the first step of the first training episode, with the comments
    and spacing changed so only a normalizing check finds it."""
    path = data / "episodes.jsonl"
    lines = path.read_text().splitlines()
    ep = json.loads(lines[0])
    lang = cont.LANG[ep["impl"]]
    ep["steps"][0]["code"] = code.replace("\n", "\n\n") + ("\n// planted\n" if lang == "cuda" else "\n# planted\n")
    lines[0] = json.dumps(ep, ensure_ascii=False, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")


def test_validate_fails_on_a_planted_unseen_op_leak(dataset_copy, capsys):
    first = json.loads((dataset_copy / "episodes.jsonl").open().readline())
    rows = [json.loads(line) for line in (dataset_copy / "tasks_holdout_unseen_op.jsonl").open()]
    row = next(r for r in rows if r["impl"] == first["impl"])
    plant(dataset_copy, row["baseline"]["code"])
    outs = []
    for workers in ("1", "2"):     # contamination measured in this process, or in a second one meanwhile
        assert main(["validate", str(dataset_copy), "--workers", workers]) == 1
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert "tasks_holdout_unseen_op.jsonl: leak: exact normalized matches in training: solution 0/192, baseline" in outs[0]
    assert row["task_id"] in outs[0]


def test_planted_combo_solution_is_counted_not_failed(dataset_copy, capsys):
    impl = json.loads((dataset_copy / "episodes.jsonl").open().readline())["impl"]
    rows = [json.loads(line) for line in (dataset_copy / "tasks_holdout.jsonl").open()]
    layout = kernelstrain.open(dataset_copy).layout
    before = cont.measure(dataset_copy, {"combo": "tasks_holdout.jsonl"}, layout)
    row = next(r for t, r in zip(before["per_task"]["combo"], rows) if not t["solution_exact"] and r["impl"] == impl)
    module = REGISTRY[row["module"]]
    plant(dataset_copy, cont.solution_code(module, make_task(module, row["gpu"], row["dtype"], as_dict(row["shape"]))))
    after = cont.measure(dataset_copy, {"combo": "tasks_holdout.jsonl"}, layout)
    assert next(t for t in after["per_task"]["combo"] if t["task_id"] == row["task_id"])["solution_exact"]
    assert main(["validate", str(dataset_copy)]) == 1      # only because stats.json no longer matches the data
    out = capsys.readouterr().out
    assert "leak" not in out and "contamination figures differ" in out


def test_the_card_says_what_the_episodes_cover_and_that_an_empty_split_is_empty():
    """A 60-episode fused run (seed 8181) trains on 60 programs, but its card said "Training covers 6000 op
    modules" (the training split's task list), and described its holdout split (0 tasks, an empty
    tasks_holdout.jsonl that `datasets` cannot load) as if it held task combos."""
    from kernelstrain.holdout import card_section
    zero = {"max": 0.0, "mean": 0.0}
    split = {"config": "holdout", "file": "tasks_holdout.jsonl", "tasks": 0, "unseen": "task combos (module, gpu, "
             "dtype, shape); their modules and GPUs are in training", "modules": [],
             "contamination": {"tasks": 0, "exact": {"solution": 0, "baseline": 0, "reference": 0, "any": 0},
                               "ngram": {k: zero for k in ("solution_ngram", "solution_ngram_specific",
                                                           "baseline_ngram", "baseline_ngram_specific")}}}
    method = {"normalization": "n", "solution": "s", "training": "t", "ngram": 13, "ngram_overlap": "o",
              "specific": "p", "training_candidates": 561}
    stats = {"holdout": {"splits": {"combo": split}, "modules_in_training": [f"m{i}" for i in range(6000)],
                         "modules_held_out": [], "contamination_method": method},
             "by_module": {f"m{i}": {} for i in range(60)}}
    text = card_section(stats)
    assert "The episodes cover 60 op modules (of the 6000 the training split offers)" in text
    assert "Training covers 6000" not in text
    assert "none held out here: the file is empty (no config declared)" in text
    stats["by_module"] = {f"m{i}": {} for i in range(6000)}
    stats["holdout"]["splits"]["combo"] = {**split, "tasks": 5, "contamination": {**split["contamination"], "tasks": 5}}
    text = card_section(stats)
    assert "Training covers 6000 op modules" in text and "the file is empty" not in text
