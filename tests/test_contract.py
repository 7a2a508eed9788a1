"""The op contract: entries generate prototypes, Triton def lines, trampolines, bindings and
output shapes consistent with the renders; a rung with a missing piece raises; dialects and
catalog facts are data."""
import re
import sys
from pathlib import Path

import pytest

from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY, register
from kernelstrain.ops.base import OpModule, Param, Rung, Variant
from kernelstrain.ops.contract import Arg, Entry, Scalar
from kernelstrain.ops.dialect import CUDA, HIP, prelude
from kernelstrain.tasks import make_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
WITH_ENTRY = sorted(n for n, m in REGISTRY.items() if m.entry is not None)


def task_of(m, gpu="H100"):
    return make_task(m, gpu, next(d for d in m.dtypes if m.supports(GPUS[gpu], d)), m.shapes[0])


def test_norms_are_converted():
    assert {"rmsnorm_cuda", "rmsnorm_triton", "layernorm_cuda", "layernorm_triton", "add_rmsnorm_cuda",
            "add_rmsnorm_triton", "layernorm_bwd_triton"} <= set(WITH_ENTRY)


@pytest.mark.parametrize("name", WITH_ENTRY)
def test_entry_matches_every_render(name):
    m = REGISTRY[name]
    for gpu in ("A100", "H100", "MI300X"):
        if not any(m.supports(GPUS[gpu], d) for d in m.dtypes):
            continue
        task = task_of(m, gpu)
        assert m.signature(task).startswith(m.entry.prototype(task) if m.impl == "cuda" else m.entry.py_def(task))
        for v in m.variants:
            code = m.render(v, v.defaults(), task)
            if m.impl == "cuda":   # the host function the trampoline calls is there, as the entry spells it
                assert " ".join(m.entry.prototype(task).split()) in " ".join(code.replace("(\n", "(").split()), \
                    (name, v.tag)
            else:
                assert m.entry.py_def(task) + ":" in code, (name, v.tag)


@pytest.mark.parametrize("name", WITH_ENTRY)
def test_trampoline_passes_every_prototype_parameter_in_order(name):
    m = REGISTRY[name]
    if m.impl != "cuda":
        pytest.skip("Triton modules are called through their wrapper")
    task = task_of(m)
    params = m.entry.ctypes_params(task)
    assert [p[2] for p in params] == [a.name for a in m.entry.args] + ["stream"]
    call = f"{m.entry.name}(" + ", ".join(f"({decl})a{i}" if kind in ("ptr", "stream") else f"a{i}"
                                          for i, (kind, decl, _) in enumerate(params)) + ");"
    assert call in m.entry.trampoline(task)
    # the casts restore the prototype's own parameter types
    proto = " ".join(m.entry.prototype(task).split())
    for kind, decl, pname in params:
        assert f"{decl} {pname}" in proto, (decl, pname)


@pytest.mark.parametrize("name", WITH_ENTRY)
def test_outputs_are_the_reference_results_with_concrete_shapes(name):
    m = REGISTRY[name]
    task = task_of(m)
    outs = m.entry.outputs(task)
    assert outs and all(isinstance(n, int) and n > 0 for _, shape, _ in outs for n in shape)
    assert [n for n, _, _ in outs] == list(m.entry.results)
    # every reference input the spec names is an in/inout tensor of the entry
    assert set(m.inputs) <= {a.name for a in m.entry.tensors if a.role != "out"}
    assert re.search(r"def forward\(self, " + re.escape(", ".join(m.inputs)) + r"\)", m.reference(task))


def test_outputs_word_shapes_in_the_task_dims():
    m = REGISTRY["add_rmsnorm_cuda"]
    task = make_task(m, "A100", "bf16", {"T": 7, "D": 4096})
    assert m.entry.outputs(task) == [("y", (7, 4096), "bf16"), ("residual", (7, 4096), "bf16")]
    e = Entry("f", (Arg("x", "in", ("T", "2*D")), Arg("s", "out", ("T",), "fp32"), Scalar("T"), Scalar("D")))
    assert e.outputs(task) == [("s", (7,), "fp32")]
    assert e.prototype(task) == "void f(const scalar_t* x, float* s, int T, int D, cudaStream_t stream)"


def test_torch_binding_checks_shapes_and_allocates_outputs():
    m = REGISTRY["add_rmsnorm_cuda"]
    src = m.entry.torch_binding(task_of(m))
    assert "std::vector<torch::Tensor> forward(torch::Tensor x, torch::Tensor residual, torch::Tensor weight, double eps)" in src
    assert 'TORCH_CHECK(residual.size(1) == (D)' in src and "auto y = torch::empty(" in src
    assert "return {y, residual};" in src and "PYBIND11_MODULE" in src


def test_entry_rejects_bad_roles_and_returns():
    with pytest.raises(ValueError, match="role"):
        Arg("x", "output", ("T",))
    with pytest.raises(ValueError, match="returns unknown"):
        Entry("f", (Arg("x", "in", ("T",)),), returns=("y",))


def _render(p, task, init="0.f"):
    return f"acc = {init};"


def test_rung_missing_pieces_raise():
    with pytest.raises(ValueError, match="needs launch= and render="):
        Rung("a", "a rung", render=_render, bugs={"wrong_init": {"init": "1.f"}})
    with pytest.raises(ValueError, match="have no edit"):
        Rung("a", "a rung", launch=lambda p, t: None, render=_render, bugs=("wrong_init",))
    with pytest.raises(ValueError, match="unknown bugs"):
        Rung("a", "a rung", launch=lambda p, t: None, render=_render, bugs={"typo_bug": {}})
    with pytest.raises(ValueError, match="faults"):
        Rung("a", "a rung", launch=lambda p, t: None, render=_render, bugs={"wrong_init": {"init": "1.f"}},
             faults=("missing_barrier",))


def test_rung_bugs_as_substitution_and_as_code():
    r = Rung("a", "a rung", launch=lambda p, t: None, render=_render,
             bugs={"wrong_init": {"init": "1.f"}, "off_by_one": lambda code: code.replace("0", "1")})
    assert r.bugs == ("wrong_init", "off_by_one")
    assert (r.source({}, None), r.source({}, None, "wrong_init"), r.source({}, None, "off_by_one")) == \
        ("acc = 0.f;", "acc = 1.f;", "acc = 1.f;")
    with pytest.raises(KeyError):
        r.source({}, None, "missing_scale")


def test_register_rejects_a_plain_variant_without_a_render():
    class Half(OpModule):
        op, impl, family = "half_done", "cuda", "misc"
        variants = tuple(Variant(f"v{i}", "v", (Param("t", (1, 2), 1),), bugs=("off_by_one",)) for i in range(4))
    with pytest.raises(ValueError, match="no launch"):
        register(Half())


def test_dialects_are_data_and_the_prelude_emits_them_once():
    assert HIP.ballot.format(p="f") == "__ballot(f)" and CUDA.ballot.format(p="f") == "__ballot_sync(0xffffffffu, f)"
    m = REGISTRY["rmsnorm_cuda"]
    hip = prelude(task_of(m, "MI300X"))
    assert hip.count("cudaFuncSetAttribute") == 1 and "#include <hip/hip_runtime.h>" in hip
    assert "__shfl_xor(v, o)" in hip and "__shfl_xor_sync" not in hip
    assert "#define WARP_SIZE 64" in hip and "#define WARP_SIZE 32" in prelude(task_of(m, "A100"))


def test_catalog_facts_are_one_value_per_gpu():
    assert GPUS["H100"].mma_sync_scale("fp16") == GPUS["H200"].mma_sync_scale("fp16") == 0.5
    assert all(GPUS[g].mma_sync_scale("fp16") == 1.0 for g in ("A100", "RTX4090", "RTX5090", "MI300X"))
    assert GPUS["A100"].int32_scale == 2.0 and GPUS["H100"].int32_scale == 1.0
    assert GPUS["H100"].triton_full_stage_rows == 64 and GPUS["A100"].triton_full_stage_rows == 0


@pytest.mark.parametrize("name", WITH_ENTRY)
def test_converted_modules_branch_on_no_arch_or_vendor(name):
    """A module with an entry is converted: Rungs only, no arch/vendor branch, <= 300 lines."""
    m = REGISTRY[name]
    src = Path(sys.modules[type(m).__module__].__file__).read_text()
    assert not re.search(r"\.arch\s*(==|!=|in\b)|is_hip|\.cc\s*[<>=]|vendor\s*==", src), name
    assert all(isinstance(v, Rung) for v in m.variants) and m.entry is not None
    assert len(src.splitlines()) <= 300
