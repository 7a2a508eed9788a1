"""Fused-operator tasks: generation (standard library), rendering, cost, similarity, CLI."""
import ast
import importlib.util
import json
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.fused import fused_cost, roofline_ms
from kernelstrain.fused.cost import fusion_groups
from kernelstrain.fused.dataset import candidate
from kernelstrain.fused.similarity import (KernelBenchIndex, coarse_ops, normalized_hash, op_sequence,
                                           too_similar)

FIXTURE = Path(__file__).parent / "fixtures" / "kernelbench_form"
HAS_TORCH = importlib.util.find_spec("torch") is not None
SAMPLE = [candidate(0, i) for i in range(250)]


def test_generation_is_byte_identical_and_a_prefix(tmp_path):
    a, b, small = tmp_path / "a", tmp_path / "b", tmp_path / "s"
    for out, n in ((a, "20"), (b, "20"), (small, "10")):
        assert main(["tasks", "fused", "--count", n, "--seed", "0", "--out", str(out), "--quiet"]) == 0
    for name in ("candidates_fused.jsonl", "stats.json", "README.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    big = (a / "candidates_fused.jsonl").read_text().splitlines()
    assert (small / "candidates_fused.jsonl").read_text().splitlines() == big[:13]
    assert len(big) == 26    # 20 + 30% spare
    other = tmp_path / "o"
    assert main(["tasks", "fused", "--count", "20", "--seed", "1", "--out", str(other), "--quiet"]) == 0
    assert (other / "candidates_fused.jsonl").read_bytes() != (a / "candidates_fused.jsonl").read_bytes()


def test_programs_are_kernelbench_form():
    for row in SAMPLE:
        assert 2 <= len(row["ops"]) <= 6, row["ops"]
        assert sum(s["role"] != "reshape" for s in row["program"]) >= 2
        tree = ast.parse(row["source"])
        names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names
        model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
        init = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        get_init = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_init_inputs")
        returned = [e.id for e in get_init.body[0].value.elts]
        assert [a.arg for a in init.args.args[1:]] == returned
        consts = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
        assert set(returned) <= consts and set(row["shapes"]) <= consts
        for step, nxt in zip(row["program"], row["program"][1:]):
            assert step["out"] == nxt["in"]      # shape inference chains
        assert row["output"]["shape"] == row["program"][-1]["out"]["shape"]
        assert "dropout" not in row["source"] and "rand_like" not in row["source"]


def test_catalog_coverage_in_a_sample():
    ops = {op for row in SAMPLE for op in row["ops"]}
    for needed in ("linear", "matmul", "bmm", "conv2d", "conv_transpose2d", "batch_norm", "layer_norm",
                   "group_norm", "rms_norm", "softmax", "logsumexp", "residual_add", "sdpa", "embedding"):
        assert needed in ops
    assert any(r["dtype"] == "bf16" for r in SAMPLE) and any(r["dtype"] == "fp32" for r in SAMPLE)


def test_operator_sequence_read_back_from_the_source():
    for row in SAMPLE:
        assert op_sequence(row["source"]) == coarse_ops(row["ops"]), row["id"]


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_shape_inference_matches_eager_execution():
    from kernelstrain.fused import execute
    import torch
    for row in SAMPLE[:40]:
        module = execute._load(row["source"], row["id"])
        model, inputs = execute._build(module, "cpu")
        assert [list(x.shape) for x in inputs] == [i["shape"] for i in row["inputs"]]
        with torch.no_grad():
            y = model(*inputs)
        assert list(y.shape) == row["output"]["shape"], row["id"]


def test_fused_cost_saves_intermediate_traffic():
    for row in SAMPLE:
        unfused, fused = fused_cost(row, "H200")
        assert fused.flops == unfused.flops == row["flops"]
        assert fused.bytes <= unfused.bytes and fused.bytes == row["bytes"]
        slow, fast = roofline_ms(row, "H200")
        assert fast <= slow
    row = next(r for r in SAMPLE if r["program"][0]["role"] != "contraction" and
               all(s["role"] in ("elementwise", "norm", "softmax") for s in r["program"]))
    inputs = sum(__import__("math").prod(i["shape"]) for i in row["inputs"])
    nb = 4 if row["dtype"] == "fp32" else 2
    weights = sum(s["weights"] for s in row["program"])
    assert row["bytes"] == (inputs + weights + __import__("math").prod(row["output"]["shape"])) * nb


def test_fusion_groups_break_at_contractions():
    roles = ["contraction", "elementwise", "norm", "contraction", "elementwise", "attention"]
    assert fusion_groups([{"role": r} for r in roles]) == [0, 0, 0, 1, 1, 2]
    assert fusion_groups([{"role": r} for r in ("norm", "contraction", "elementwise")]) == [0, 0, 0]


def test_similarity_against_fixture_problems():
    index = KernelBenchIndex(FIXTURE)
    assert len(index) == 5
    gemm = (FIXTURE / "level2" / "5_Gemm_Gelu_Scale.py").read_text()
    assert op_sequence(gemm) == ["gemm", "gelu", "mul"]
    assert op_sequence((FIXTURE / "level2" / "9_Conv2d_BatchNorm_ReLU_MaxPool.py").read_text()) == \
        ["conv2d", "batch_norm", "relu", "max_pool2d"]
    # the same problem with other names, comments and layout is the same normalized source
    renamed = gemm.replace("self.fc", "self.proj").replace("scaling", "factor").replace("# the GELU", "#")
    assert normalized_hash(renamed) == normalized_hash(gemm)
    assert too_similar(index.nearest(renamed, ["linear", "gelu", "scale"]))
    # a generated program with the same operator sequence is too similar; others are not
    same = next(r for r in SAMPLE if coarse_ops(r["ops"]) == ["gemm", "gelu", "mul"]) \
        if any(coarse_ops(r["ops"]) == ["gemm", "gelu", "mul"] for r in SAMPLE) else None
    if same is not None:
        assert too_similar(index.nearest(same["source"], same["ops"]))
    assert too_similar(index.nearest(SAMPLE[0]["source"], ["bmm", "softmax", "layer_norm"]))
    far = [r for r in SAMPLE if not too_similar(index.nearest(r["source"], r["ops"]))]
    assert len(far) >= 0.95 * len(SAMPLE)


def test_cli_errors_and_stats(tmp_path, capsys):
    out = tmp_path / "d"
    assert main(["tasks", "fused", "--count", "0", "--seed", "0", "--out", str(out)]) == 2
    assert main(["tasks", "fused", "--count", "5", "--seed", "0", "--out", str(out), "--quiet"]) == 0
    assert main(["tasks", "fused", "--count", "5", "--seed", "0", "--out", str(out)]) == 2   # not empty
    assert "not empty" in capsys.readouterr().err
    assert main(["stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "candidates (not yet filtered)" in text and "7" in text
    assert main(["stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 7
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: fused_candidates" in card
    assert main(["tasks", "filter", str(tmp_path / "nope")]) == 2


def test_filter_without_torch_is_a_clean_usage_error(tmp_path, capsys, monkeypatch):
    from kernelstrain.fused import filter as fused_filter
    out = tmp_path / "d"
    assert main(["tasks", "fused", "--count", "2", "--seed", "0", "--out", str(out), "--quiet"]) == 0
    real = fused_filter.importlib.util.find_spec
    monkeypatch.setattr(fused_filter.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["tasks", "filter", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kernelstrain: error:") and "PyTorch" in err[0]
    assert not (out / "tasks_fused.jsonl").exists()


def test_card_configs_load_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "d"
    assert main(["tasks", "fused", "--count", "30", "--seed", "0", "--out", str(out), "--quiet"]) == 0
    rows = datasets.load_dataset(str(out), "fused_candidates", split="train")
    assert len(rows) == 39 and rows[0]["id"] == "fused_s0_00000"
