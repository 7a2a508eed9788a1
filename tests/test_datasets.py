"""The written directory loads with Hugging Face `datasets`, one config at a time, with the
newest `datasets` installed here and (when .ci/run has built it) the oldest the package claims.

Files are read in 64 KiB chunks so that every file spans many chunks: Arrow infers each
chunk's schema alone, and a field whose keys differ between rows fails to cast there."""
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kernelstrain.fields import as_dict
from kernelstrain.ops import REGISTRY
from kernelstrain.writers import FILES, validation_file

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [("episodes", "train", "steps"), ("sft_multiturn", "train", "messages"),
           ("sft_steps", "train", "messages"), ("sft_prompt_completion", "train", "prompt"), ("holdout", "test", "prompt"),
           ("episodes", "validation", "steps"), ("sft_multiturn", "validation", "messages"),
           ("sft_steps", "validation", "messages"),
           ("sft_prompt_completion", "validation", "completion")]

# run by the installed python and by the oldest-datasets venv alike: prints one JSON line
LOADER = r"""
import json, sys, tempfile
import datasets
out = {"version": datasets.__version__, "configs": {}}
for name, split in json.loads(sys.argv[2]):
    ds = datasets.load_dataset(sys.argv[1], name, split=split, cache_dir=tempfile.mkdtemp(), chunksize=1 << 16)
    out["configs"][f"{name}/{split}"] = {"rows": len(ds), "columns": ds.column_names,
                            "shape": ds[0]["shape"] if "shape" in ds.column_names else None,
                            "params": ds[0]["steps"][0]["params"] if name == "episodes" else None}
print(json.dumps(out))
"""


def oldest_claimed() -> str:
    """The lower bound of `datasets` in pyproject's dev extra."""
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    return re.fullmatch(r"datasets>=([\d.]+)", next(d for d in dev if d.startswith("datasets"))).group(1)


def load_all(python: str, data: Path) -> dict:
    proc = subprocess.run([python, "-c", LOADER, str(data), json.dumps([c[:2] for c in CONFIGS])],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_loaded(result: dict, data: Path) -> None:
    rows = json.loads((data / "stats.json").read_text())["files"]
    for name, split, field in CONFIGS:
        got = result["configs"][f"{name}/{split}"]
        path = validation_file(FILES[name]) if split == "validation" else FILES[name]
        assert got["rows"] == rows[path]["rows"] > 0 and field in got["columns"], (name, split, got)
    first = json.loads((data / "episodes.jsonl").open().readline())
    assert result["configs"]["episodes/train"]["shape"] == first["shape"]      # list of {dim, value}, as written
    assert as_dict(result["configs"]["episodes/train"]["params"]) == as_dict(first["steps"][0]["params"])
    held = result["configs"]["holdout/test"]["shape"]
    assert all(set(d) == {"dim", "value"} for d in held)                 # no struct of every op's dims


def test_newest_datasets_loads_every_config(small_dataset):
    pytest.importorskip("datasets", reason="pip install 'kernelstrain[dev]' for the datasets load test")
    check_loaded(load_all(sys.executable, small_dataset), small_dataset)


def test_oldest_claimed_datasets_loads_every_config(small_dataset):
    """.ci/run builds a venv with pyproject's lowest `datasets` and names it in this variable."""
    venv = os.environ.get("KERNELSTRAIN_OLDEST_DATASETS")
    if not venv:
        pytest.skip("KERNELSTRAIN_OLDEST_DATASETS (a venv with the oldest claimed datasets) not set; .ci/run sets it")
    result = load_all(str(Path(venv) / "bin" / "python"), small_dataset)
    assert result["version"] == oldest_claimed()
    check_loaded(result, small_dataset)


def test_varying_fields_hold_one_type():
    """shape and params are lists of {name, value} with int values: one Arrow type in every row."""
    for m in REGISTRY.values():
        for shape in m.shapes:
            assert all(isinstance(v, int) for v in shape.values()), m.name
        for v in m.variants:
            assert all(isinstance(x, int) and not isinstance(x, bool) for p in v.params for x in p.values), (m.name, v.tag)


def test_rows_carry_lists_not_objects(small_dataset):
    ep = json.loads((small_dataset / "episodes.jsonl").open().readline())
    assert isinstance(ep["shape"], list) and list(as_dict(ep["shape"])) == list(REGISTRY[ep["module"]].dims)
    assert all(isinstance(s["params"], list) for s in ep["steps"])
    mt = json.loads((small_dataset / "sft_multiturn.jsonl").open().readline())
    assert mt["shape"] == ep["shape"]


def test_card_keeps_the_seed_sections_with_this_datasets_figures(small_dataset):
    card = (small_dataset / "README.md").read_text()
    stats = json.loads((small_dataset / "stats.json").read_text())
    headings = re.findall(r"^## (.+)$", card, re.M)
    assert headings[:5] == ["At a glance", "Coverage", "Files", "Usage", "Generation"]
    assert {"Caveats", "Splits and contamination", "License"} <= set(headings)
    assert f"| Episodes | {stats['episodes']:,} |" in card
    assert f"{stats['status_pct']['ok']}% ok" in card and f"| Holdout tasks | {stats['holdout_tasks']:,} " in card
    for name, path in FILES.items():
        assert f"- config_name: {name}\n    data_files:\n      - split: " in card and f"path: {path}" in card
        split = "test" if name == "holdout" else "train"
        assert f"| `{path}` | `{name}` ({split}) | {stats['files'][path]['rows']:,} |" in card
    assert "no candidate in it was run on a GPU" in card and "not from this dataset" in card
    from kernelstrain.card import VERIFICATION
    assert all(figure in card for _, figure, _ in VERIFICATION) and "0 disagreements" in card
    assert f"datasets` {oldest_claimed()} and later" in card
    assert 'd["dim"]: d["value"]' in card


def test_card_lists_splits_and_contamination_from_stats(small_dataset):
    """The card's splits section is the holdout block of stats.json: each split's file, what it
    holds out, and its contamination figures, with the combo split's recall caveat."""
    from kernelstrain.card import render_episodes_card
    stats = json.loads((small_dataset / "stats.json").read_text())
    h = stats["holdout"]
    card = render_episodes_card(stats)
    section = card.split("## Splits and contamination")[1].split("\n## ")[0]
    for name, split in h["splits"].items():
        c = split["contamination"]
        assert f"| `{split['config']}` ({name}) | {c['tasks']} | {c['exact']['solution']} / " in section
        assert f"`{split['file']}`" in section
    assert "it measures recall of variants, not generalization" in section
    assert all(f"`{m}`" in section for m in h["modules_held_out"])


def test_card_declares_every_configs_features(small_dataset):
    """dataset_info fixes each column's type, so a chunk where a field is always null still casts."""
    from kernelstrain.schema import FEATURES
    card = (small_dataset / "README.md").read_text()
    info = card.split("dataset_info:\n")[1].split("\n---")[0]
    for config in ("episodes", "sft_multiturn", "sft_steps", "holdout", "holdout_unseen_op"):
        assert f"  - config_name: {config}\n    features:\n" in info
    rows = {k: FILES[k] for k in ("episodes", "sft_multiturn", "sft_steps", "sft_prompt_completion")}
    for config, name in rows.items():
        row = json.loads((small_dataset / name).open().readline())
        assert list(row) == list(FEATURES[config]), config


def test_the_sessions_layout_loads(tmp_path):
    """The sessions layout's card (card_sessions.py) declares `sessions` (train and validation),
    `sft_multiturn` and `holdout`."""
    datasets = pytest.importorskip("datasets", reason="pip install 'kernelstrain[dev]' for the datasets load test")
    from kernelstrain.cli import main
    data = tmp_path / "s"
    fixture = Path(__file__).parent / "fixtures" / "sessions_profile.toml"
    profile = tmp_path / "half.toml"           # half the tasks held for validation: both splits hold sessions
    profile.write_text(fixture.read_text().replace("[output]", "[output]\nvalidation_frac = 0.5"))
    assert main(["generate", "--seed", "0", "--config", str(profile), "--out", str(data), "--episodes", "6",
                 "--quiet", "--workers", "1"]) == 0
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    first = json.loads((data / "sessions.jsonl").open().readline())
    ds = datasets.load_dataset(str(data), "sessions", split="train", cache_dir=str(tmp_path / "c"), chunksize=1 << 16)
    val = datasets.load_dataset(str(data), "sessions", split="validation", cache_dir=str(tmp_path / "c"))
    assert len(ds) + len(val) == 6 and len(ds) and len(val) and not set(ds["task_id"]) & set(val["task_id"])
    assert ds[0]["trace"][0]["params"] == first["trace"][0]["params"]
    assert ds[0]["messages"][2]["weight"] == first["messages"][2]["weight"]
    held = datasets.load_dataset(str(data), "holdout", split="test", cache_dir=str(tmp_path / "c"))
    assert len(held) == json.loads((data / "stats.json").read_text())["holdout_tasks"]
    windows = datasets.load_dataset(str(data), "sft_multiturn", split="train", cache_dir=str(tmp_path / "c"))
    assert len(windows) == len(ds) and windows[0]["messages"][2]["content"] == first["messages"][2]["content"]


def test_card_leaves_off_an_empty_holdout_split(small_dataset, tmp_path):
    """A profile that holds no task out (configs/fused.toml) writes an empty tasks_holdout.jsonl: the
    card must not declare it (nor show its usage line), or `load_dataset(dir, "holdout")` fails with
    "Instruction 'test' corresponds to no data" (datasets 5.2, seed 8181 of the fused profile)."""
    from kernelstrain.card import render_episodes_card
    stats = json.loads((small_dataset / "stats.json").read_text())
    assert "config_name: holdout\n" in render_episodes_card(stats)
    for split in stats["holdout"]["splits"].values():
        stats["files"][split["file"]]["rows"] = 0
    card = render_episodes_card(stats)
    assert "config_name: holdout" not in card and '"holdout", split="test"' not in card
    assert "config_name: sft_steps\n" in card
