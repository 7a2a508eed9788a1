"""A CPU check of the Python path of a workspace's `model_new.py` or a KernelBench solution,
with no GPU and no compiler: the reference Model is built on PyTorch's meta device, ModelNew
with it, and ModelNew.forward runs against a stand-in for the extension (CUDA: the binding's
`forward`, which takes binding_params in order) or the Triton wrapper (a stub with the
candidate's own def line). A missing attribute, a missing or extra argument, a scalar where
the binding wants a tensor: each is a problem, found before a GPU run is spent on it.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
import types
from pathlib import Path

from .lists import binding_params as list_params, pointer_arrays


def _wrapper_stub(code: str, name: str):
    """A function with the def line of the candidate's wrapper `name` and an empty body."""
    fn = next((n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        raise LookupError(f"the candidate defines no function {name}()")
    fn.decorator_list, fn.returns, fn.body = [], None, [ast.Pass()]
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    ns: dict = {}
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), "<wrapper>", "exec"), ns)  # noqa: S102
    return ns[name]


class _Stand:
    """The extension (CUDA) or the wrapper's module (Triton): records the call and checks it."""

    def __init__(self, subject, torch):
        self.subject, self.torch, self.calls = subject, torch, []
        e, task = subject.module.entry, subject.task
        meta = [torch.empty(shape, device="meta") for _, shape, _ in e.outputs(task)]
        self.result = meta[0] if len(meta) == 1 else meta
        if subject.module.impl == "triton":
            stub = _wrapper_stub(subject.candidate.code, e.py_name or e.name)
            setattr(self, e.py_name or e.name, self._triton(stub))

    def set_poison(self, on):
        pass

    def forward(self, *args):
        e, task = self.subject.module.entry, self.subject.task
        params = list_params(e, task) if pointer_arrays(e) else e.binding_params(task)
        if len(args) != len(params):
            raise TypeError(f"forward() takes {len(params)} arguments ({', '.join(n for n, _ in params)}), "
                            f"ModelNew passed {len(args)}")
        for (name, kind), v in zip(params, args):
            self._kind(name, kind, v)
        self.calls.append(args)
        return self.result

    def _triton(self, stub):
        def call(*args):
            import inspect
            inspect.signature(stub).bind(*args)
            n_tensors = sum(a.role != "out" for a in self.subject.module.entry.tensors)
            for i, v in enumerate(args):
                self._kind(f"argument {i}", "tensor" if i < n_tensors else "scalar", v)
            self.calls.append(args)
            return tuple(self.result) if isinstance(self.result, list) else self.result
        return call

    def _kind(self, name, kind, v):
        if kind == "tensors" and not (isinstance(v, list) and all(self.torch.is_tensor(t) for t in v)):
            raise TypeError(f"{name}: a list of tensors is expected, ModelNew passed {type(v).__name__}")
        if kind == "tensor" and not self.torch.is_tensor(v):
            raise TypeError(f"{name}: a tensor is expected, ModelNew passed {type(v).__name__}")
        if kind == "scalar" and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"{name}: a number is expected, ModelNew passed {type(v).__name__}")


def dry_call(subject, source: str) -> str | None:
    """Run ModelNew of `source` (model_new.py text, or a standalone solution) on the meta device
    against the stand-in; the problem found, or None."""
    import torch
    if subject.kind != "single":
        return None
    from unittest import mock
    ref = types.ModuleType("model")
    saved = sys.modules.get("model")
    stand = _Stand(subject, torch)
    with tempfile.TemporaryDirectory() as tmp:       # a file: Triton's jit reads its kernels' source
        path = Path(tmp) / "model_new.py"
        path.write_text(source, encoding="utf-8")
        try:
            sys.modules["model"] = ref
            exec(compile(subject.reference, "<model.py>", "exec"), ref.__dict__)  # noqa: S102 - our own render
            spec = importlib.util.spec_from_file_location("ks_dry_model_new", path)
            mod = importlib.util.module_from_spec(spec)
            # a KernelBench solution compiles its extension as it loads: the stand-in is that extension
            with mock.patch("torch.utils.cpp_extension.load_inline", lambda *a, **k: stand):
                spec.loader.exec_module(mod)
        finally:
            sys.modules.pop("model")
            if saved is not None:
                sys.modules["model"] = saved
    ns = mod.__dict__
    try:
        ns["build"] = lambda verbose=False: stand
        e = subject.module.entry
        if (e.py_name or e.name) in ns:        # a standalone Triton solution calls its wrapper directly
            ns[e.py_name or e.name] = getattr(stand, e.py_name or e.name)
        names = subject.module.inputs      # a KernelBench solution: the harness passes those of PASSED_INPUTS
        passed = [names[i] for i in ns["PASSED_INPUTS"]] if "PASSED_INPUTS" in ns else names
        shapes = {a.name: a.shape(subject.task) for a in e.tensors}   # (a derived side input is computed from them)
        if "register_fixed_inputs" in ns:      # its integer buffers: empty, like the inputs (no draw on meta)
            ns["register_fixed_inputs"] = lambda model: [model.register_buffer("fixed_" + name, torch.empty(
                0, dtype=torch.int64, device="meta")) for name, _ in ns["FIXED_INPUTS"]]
        with torch.device("meta"):
            model = ns["ModelNew"](*ref.get_init_inputs())
            inputs = [torch.empty(shapes.get(name, (0,)), device="meta") for name in passed]
            model(*inputs)
    except Exception as err:  # noqa: BLE001 - the problem is the result
        return f"{type(err).__name__}: {err}"
    return None if stand.calls else "ModelNew.forward never called the custom kernel"
