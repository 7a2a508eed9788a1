"""The generated sources of a workspace: `model_new.py` (class ModelNew: the reference's
constructor, its forward through the custom kernel), the PyTorch binding and the C trampoline
of a CUDA candidate (export/kb_form builds a KernelBench solution from the same parts).

A CUDA candidate is compiled as it is, with `Entry.trampoline` appended (extern "C" ks_entry),
by nvcc; the binding (`Entry.trampoline_binding`) is a separate C++ file, so PyTorch's headers
stay out of the nvcc translation unit. A Triton candidate is imported as a Python module and its
wrapper called.
"""
from __future__ import annotations

import ast
import textwrap

from ..compilers import NVCC_GENCODE
from ..ops.contract import py_value
from .lists import list_binding, list_forward, pointer_arrays

# the candidates use cuda_fp16.h / cuda_bf16.h operators that PyTorch's default nvcc flags switch off
CUDA_FLAGS = ("-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__")

def kernel_file(subject) -> str:
    """kernels/<name>: the candidate's file (fused tasks: the reference forward in Python)."""
    if subject.kind == "fused":
        return "fused_candidate.py" if subject.candidate else "fused_reference.py"
    m = subject.module
    return f"{m.entry.name}.cu" if m.impl == "cuda" else f"{m.entry.py_name or m.entry.name}.py"


def arch_flag(subject) -> str:
    """nvcc's target for the task's GPU, the one `kernelstrain verify` compiles for: the
    arch-specific sm_90a / sm_120a where the GPU has one (wgmma, setmaxnreg and the block-scaled
    mma exist only there; `-arch=sm_90a` alone still emits compute_90 PTX that ptxas rejects).
    A flag naming the arch also keeps PyTorch from adding its own -gencode for the local GPU.
    An AMD task's HIP source is built for the local GPU.

    >>> from types import SimpleNamespace as S
    >>> arch_flag(S(arch="sm_90a")), arch_flag(S(arch="sm_80"))
    ('-gencode=arch=compute_90a,code=sm_90a', '-gencode=arch=compute_80,code=[sm_80,compute_80]')
    """
    if subject.arch not in NVCC_GENCODE:
        return "-arch=native"
    gencode = NVCC_GENCODE[subject.arch]
    if not gencode.endswith("a"):          # with the PTX too, so a newer GPU (an A100 task on an H200) runs it
        virtual = gencode.split(",")[0].split("=")[1]
        gencode = gencode.replace("code=", "code=[") + f",{virtual}]"
    return f"-gencode={gencode}"


def forward_call(subject, target: str = "build().") -> tuple[list, str]:
    """(ModelNew.forward's parameters, its body lines) for a single-op subject; `target` is
    what the extension or wrapper is reached through ('' when it is in the same file). An
    argument that is not an input comes from its `source` in the entry (py_value), else a task
    dim, else the reference Model's attribute of its name."""
    m, task = subject.module, subject.task
    e = m.entry

    def value(a):
        if a.name in m.inputs:
            return a.name
        if a.source:
            return py_value(a.source, task.dims)
        if not hasattr(a, "role") and a.name in task.dims:
            return str(task.dims[a.name])
        return f"self.{a.name}"
    if m.impl == "cuda" and pointer_arrays(e):
        return list(m.inputs), list_forward(e, task, value, target)
    if m.impl == "cuda":
        call = f"{target}forward({', '.join(value(e.arg(n)) for n, _ in e.binding_params(task))})"
        return list(m.inputs), [f"return {call}" if len(e.results) == 1 else f"return tuple({call})"]
    args = [value(a) for a in e.tensors if a.role != "out"]
    args += [value(s) for s in e.scalars if not s.is_dim(task) and (s.source or f"self.{s.name}" in subject.reference)]
    call = f"{target}{e.py_name or e.name}({', '.join(args)})"
    if not any(e.arg(n).role == "inout" for n in e.results):
        return list(m.inputs), [f"return {call}"]
    # an inout result is updated in place: return the tensor the caller passed
    rets = [n if e.arg(n).role == "inout" else f"ret[{i}]" for i, n in enumerate(e.results)]
    return list(m.inputs), [f"ret = {call}", f"return {rets[0]}" if len(rets) == 1 else f"return ({', '.join(rets)})"]


def binding_sources(subject) -> tuple[str, str]:
    """(binding.cpp, trampoline.cu) of a CUDA subject."""
    e, task = subject.module.entry, subject.task
    binding = list_binding(e, task) if pointer_arrays(e) else e.trampoline_binding(task)
    return binding, e.trampoline(task).lstrip("\n")


def fused_forward(reference: str) -> str:
    """kernels/fused_reference.py: the fused program's forward as a function of (model, inputs):
    PyTorch operators, the starting point a custom kernel replaces."""
    tree = ast.parse(reference)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    src = textwrap.dedent(ast.get_source_segment(reference, fwd, padded=True)).replace("def forward(", "def fused_forward(", 1)
    return ('"""The fused program\'s forward, in PyTorch operators: no custom kernel yet. Replace it\n'
            'with CUDA or Triton kernels that compute the same result (see SKILL.md)."""\n'
            "import math  # noqa: F401\n\nimport torch  # noqa: F401\nimport torch.nn.functional as F  # noqa: F401\n\n\n"
            + src.rstrip() + "\n")


_CUDA_BUILD = '''CUDA_FLAGS = {flags!r}
_EXT = None


def build(verbose=False):
    """Compile the candidate and its binding (once; cached on disk by source hash); the extension."""
    global _EXT
    if _EXT is None:
        from torch.utils.cpp_extension import load_inline
        binding, kernel = _sources()
        name = "ks_" + hashlib.sha1((binding + kernel + " ".join(CUDA_FLAGS)).encode()).hexdigest()[:16]
        options = inspect.signature(load_inline).parameters
        extra = {{}}
        if "no_implicit_headers" in options:      # keeps PyTorch's headers out of the nvcc unit
            extra["no_implicit_headers"] = True
        if "use_pch" in options and os.environ.get("KS_USE_PCH") == "1":
            extra["use_pch"] = True                # a precompiled torch/extension.h for the binding
        _EXT = load_inline(name, cpp_sources=[binding], cuda_sources=[kernel], extra_cflags=["-O2"],
                           extra_cuda_cflags=list(CUDA_FLAGS), build_directory=_build_dir(name),
                           verbose=verbose, **extra)
    return _EXT


def set_poison(on):
    """While on, every output the binding allocates starts as NaN / 0xFF bytes."""
    build().set_poison(bool(on))
'''

# the wrapper's `torch` whose outputs start poisoned: a source text both the workspace's Triton
# binding and the KernelBench export write (kb_form)
POISONED_TORCH = '''class _PoisonedTorch:
    """`torch` for the candidate's wrapper: its empty / empty_like outputs come back poisoned."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _poison(self, t):
        return t.fill_(float("nan")) if t.is_floating_point() else t.view(self._real.uint8).fill_(255).view(t.dtype)

    def empty(self, *args, **kwargs):
        return self._poison(self._real.empty(*args, **kwargs))

    def empty_like(self, *args, **kwargs):
        return self._poison(self._real.empty_like(*args, **kwargs))
'''

_TRITON_BUILD = '''_KERNEL = None


''' + POISONED_TORCH + '''

def set_poison(on):
    """While on, the wrapper's torch.empty / empty_like outputs start as NaN / 0xFF bytes."""
    kernel = build()
    kernel.torch = _PoisonedTorch(torch) if on else torch
'''


def model_new(subject) -> str:
    """model_new.py of a workspace: it reads kernels/ and binding/ next to it."""
    head = [f'"""ModelNew for {subject.title} ({subject.dtype}): ' + _what(subject) + '"""',
            "import hashlib  # noqa: F401\nimport importlib.util  # noqa: F401\nimport inspect  # noqa: F401\n"
            "import os  # noqa: F401\nfrom pathlib import Path\n\nimport torch\nimport torch.nn as nn  # noqa: F401\n"]
    head.append("from model import Model\n\nHERE = Path(__file__).resolve().parent\n")
    body = _loader(subject)
    if subject.kind == "fused" and subject.candidate:
        return "\n".join(head) + "\n\n" + _FUSED_CANDIDATE
    params, lines = (["*inputs"], ["return fused_forward(self, *inputs)"]) if subject.kind == "fused" \
        else forward_call(subject)
    cls = (f"class ModelNew(Model):\n    \"\"\"The reference's constructor and parameters; forward through the custom "
           f"kernel.\"\"\"\n\n    def forward(self, {', '.join(params)}):\n"
           + "".join(f"        {line}\n" for line in lines))
    return "\n".join(head) + "\n\n" + body + "\n\n" + cls


_FUSED_CANDIDATE = '''_CANDIDATE = None


def build(verbose=False):
    """Import kernels/fused_candidate.py, a complete KernelBench solution (its load_inline compiles the
    CUDA source as it is imported; Triton compiles each kernel at its first launch)."""
    global _CANDIDATE
    if _CANDIDATE is None:
        spec = importlib.util.spec_from_file_location('ks_fused_candidate', HERE / 'kernels' / 'fused_candidate.py')
        _CANDIDATE = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_CANDIDATE)
    return _CANDIDATE


def set_poison(on):
    """The candidate's kernels allocate their outputs themselves (torch.empty in their wrappers)."""


class ModelNew(nn.Module):
    """The candidate's ModelNew: the reference's constructor arguments, modules and parameters (built in
    the same order, so a seeded construction gives the same weights), forward through its kernels."""

    def __new__(cls, *args, **kwargs):
        return build().ModelNew(*args, **kwargs)
'''


def _what(subject) -> str:
    if subject.kind == "fused" and subject.candidate:
        return f"the episode's candidate ({subject.candidate.label}), kernels/fused_candidate.py."
    if subject.kind == "fused":
        return "the fused program's forward, in PyTorch operators (kernels/fused_reference.py) until replaced."
    impl = subject.module.impl
    how = ("through the CUDA candidate, called via the PyTorch binding generated from the op's entry point"
           if impl == "cuda" else "through the Triton candidate's wrapper")
    return f"forward {how} ({subject.candidate.label})."


def _loader(subject) -> str:
    if subject.kind == "fused":
        return ("spec = importlib.util.spec_from_file_location('ks_fused_reference', HERE / 'kernels' / "
                "'fused_reference.py')\n_FUSED = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(_FUSED)\n"
                "fused_forward = _FUSED.fused_forward\n\n\ndef build(verbose=False):\n    \"\"\"Nothing to compile.\"\"\"\n"
                "    return _FUSED\n\n\ndef set_poison(on):\n    \"\"\"No outputs are allocated outside PyTorch.\"\"\"\n")
    kfile = kernel_file(subject)
    if subject.module.impl == "triton":
        return (_TRITON_BUILD.replace("_KERNEL = None\n", "_KERNEL = None\n\n\ndef build(verbose=False):\n"
                "    \"\"\"Import the candidate from kernels/ (Triton compiles each kernel at its first launch).\"\"\"\n"
                "    global _KERNEL\n    if _KERNEL is None:\n"
                f"        spec = importlib.util.spec_from_file_location('ks_kernel', HERE / 'kernels' / {kfile!r})\n"
                "        _KERNEL = importlib.util.module_from_spec(spec)\n        spec.loader.exec_module(_KERNEL)\n"
                "    return _KERNEL\n", 1))
    flags = CUDA_FLAGS + (arch_flag(subject),)
    src = ("def _sources():\n    \"\"\"(the binding, the candidate with its C trampoline appended).\"\"\"\n"
           "    binding = (HERE / 'binding' / 'binding.cpp').read_text()\n"
               f"    kernel = (HERE / 'kernels' / {kfile!r}).read_text()\n"
           "    return binding, kernel + '\\n' + (HERE / 'binding' / 'trampoline.cu').read_text()\n\n\n"
           "def _build_dir(name):\n    path = HERE / 'build' / name\n    path.mkdir(parents=True, exist_ok=True)\n"
           "    return str(path)\n\n\n")
    return src + _CUDA_BUILD.format(flags=flags)
