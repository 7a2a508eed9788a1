"""The multi-tensor entry (adamw_cuda: arrays of device pointers, one per tensor) in the KernelBench
export and the workspaces: a binding that takes a list of tensors per pointer array, a ModelNew
that hands the kernel tensors of their own and copies the updates back, a problem KernelBench
scores at fp32. Run on the CPU with a stand-in extension doing the kernel's per-tensor update
(or a broken one), through KernelBench's steps: seed, cast to the precision, both forwards, one
torch.allclose."""
from __future__ import annotations

import re
from unittest import mock

import pytest

from kernelstrain.export.kb_form import precision, problem_source, solution_source
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.workdir.lists import binding_params, list_binding, pointer_arrays
from kernelstrain.workdir.render import binding_sources
from kernelstrain.workdir.subject import Candidate, Subject

SHAPE = {"N": 4099, "T": 5}       # ragged sections: 820, 820, 820, 820, 819


def subject(dtype="bf16") -> Subject:
    m = REGISTRY["adamw_cuda"]
    t = make_task(m, "H100", dtype, SHAPE)
    v = m.baseline_variant()
    return Subject(task_id="t", kind="single", split="train", reference=m.reference(t), dtype=dtype, title=m.title,
                   desc="", module=m, task=t, gpu="H100", arch=t.gpu.arch,
                   candidate=Candidate(m.render(v, v.defaults(), t, None), v.tag, "ok", None))


def test_binding_takes_a_list_per_pointer_array():
    s = subject()
    e = s.module.entry
    assert [a.name for a in pointer_arrays(e)] == ["params", "grads", "exp_avgs", "exp_avg_sqs"]
    assert binding_params(e, s.task) == [("params", "tensors"), ("grads", "tensors"), ("exp_avgs", "tensors"),
                                         ("exp_avg_sqs", "tensors"), ("lr", "scalar"), ("beta1", "scalar"),
                                         ("beta2", "scalar"), ("eps", "scalar"), ("weight_decay", "scalar"),
                                         ("step", "scalar")]
    cpp, tramp = binding_sources(s)
    assert cpp == list_binding(e, s.task)
    head = re.search(r"^void forward\((.*)\) \{$", cpp, re.M).group(1)
    assert head.count("std::vector<torch::Tensor>") == 4 and "torch::Tensor numels" not in head
    # the binding declares ks_entry with as many parameters as the trampoline defines
    declared = re.search(r'extern "C" int ks_entry\((.*)\);', cpp).group(1).split(", ")
    defined = re.search(r'extern "C" int ks_entry\((.*)\) \{', tramp).group(1).split(", ")
    assert len(declared) == len(defined) == len(e.args) + 1
    assert "grads, at::kBFloat16" in cpp and "params, at::kFloat" in cpp


def test_optimizer_step_is_scored_at_fp32():
    """Its results are fp32 state updated in place: fp32 whatever the grads' dtype; the grads are
    passed at fp32 and turned back into the task's dtype (exactly: they were drawn in it)."""
    for dtype in ("bf16", "fp32"):
        assert precision(subject(dtype)) == "fp32"
    assert "grads = grads.to(torch.bfloat16)" in problem_source(subject("bf16"))


class _AdamwExtension:
    """The extension's forward on the CPU: the kernel's update, one tensor at a time, in place;
    `drop_last` leaves each tensor's last element as it was (a bug the comparison must see)."""

    def __init__(self, drop_last=False):
        self.drop_last, self.calls = drop_last, []

    def forward(self, params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, eps, wd, step):
        import torch
        self.calls.append([len(params), [t.numel() for t in params]])
        for ts in (params, grads, exp_avgs, exp_avg_sqs):        # one allocation a tensor
            assert len({t.untyped_storage().data_ptr() for t in ts}) == len(ts)
        bc1, bc2 = 1 - beta1 ** step, 1 - beta2 ** step
        for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
            assert p.dtype == m.dtype == v.dtype == torch.float32 and g.dtype == torch.bfloat16
            n = p.numel() - 1 if self.drop_last else p.numel()
            g = g[:n].float()
            m[:n] = beta1 * m[:n] + (1 - beta1) * g
            v[:n] = beta2 * v[:n] + (1 - beta2) * g * g
            p[:n] = p[:n] * (1 - lr * wd) - lr / bc1 * m[:n] / (v[:n].sqrt() / bc2 ** 0.5 + eps)

    def set_poison(self, on):
        pass


def _kernelbench_trial(drop_last: bool) -> tuple:
    """(allclose at KernelBench's fp32 tolerance, the extension's calls): the problem and the
    solution exec'd into one dict, both models after one seed, inputs cast to fp32."""
    torch = pytest.importorskip("torch")
    s = subject()
    ext, ns = _AdamwExtension(drop_last), {}
    exec(compile(problem_source(s), "<problem>", "exec"), ns)  # noqa: S102 - our own export
    Model, get_inputs = ns["Model"], ns["get_inputs"]
    with mock.patch("torch.utils.cpp_extension.load_inline", lambda *a, **k: ext):
        exec(compile(solution_source(s), "<solution>", "exec"), ns)  # noqa: S102
    torch.manual_seed(42)
    model, new = Model(*ns["get_init_inputs"]()), ns["ModelNew"](*ns["get_init_inputs"]())
    torch.manual_seed(7)
    inputs = [x.to(torch.float32) for x in get_inputs()]
    kept = [x.clone() for x in inputs]
    with torch.no_grad():
        ref, out = model(*inputs), new(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(inputs, kept)), "a forward changed the harness's inputs"
    assert ref.shape == out.shape == (3 * SHAPE["N"],)
    return torch.allclose(ref, out, atol=1e-4, rtol=1e-4), ext.calls


def test_solution_matches_the_reference_through_the_lists():
    ok, calls = _kernelbench_trial(drop_last=False)
    assert ok and calls == [[5, [820, 820, 820, 820, 819]]]


def test_a_skipped_element_is_caught_at_fp32():
    ok, _ = _kernelbench_trial(drop_last=True)
    assert not ok
