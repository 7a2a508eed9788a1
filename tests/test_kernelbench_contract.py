"""The KernelBench contract of the export, checked without a GPU, from what KernelBench's own
code does (ScalingIntelligence/KernelBench: src/kernelbench/eval.py, kernel_static_checker.py):

- its harness `exec`s a CUDA solution's source in a plain dict (no `__file__`) and imports a
  Triton one from a temporary file; it builds Model and ModelNew after the same seed;
- it casts every input tensor and both models to the problem's precision, runs each forward
  under torch.no_grad() and compares ONE output tensor (shape, then torch.allclose);
- its static checker cuts every line at its first `#` and then its first `//`, refuses `pass`,
  try/except, thread and process pools, tensor subclasses and reassigned timers, and wants a
  visible `__global__` plus load_inline / cpp_extension (CUDA) or `@triton.jit` and `tl.*`
  (Triton). The rules below restate those, in this project's words.

The H200 run with KernelBench's own code is scripts/kb_official_eval.py (docs/kernelbench_official_h200.txt).
"""
from __future__ import annotations

import importlib.util
import math
import re
import sys
from dataclasses import replace
from unittest import mock

import pytest

from kernelstrain.export.kb_form import full_precision_draws, input_plan, precision, problem_source, solution_source
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.contract import TORCH
from kernelstrain.tasks import make_task
from kernelstrain.workdir.subject import Candidate, Subject

NVIDIA = sorted(n for n, m in REGISTRY.items() if "nvidia" in m.vendors)
CPU_NUMEL_MAX = 1 << 24       # reference inputs a CPU test run draws at most (elements)

# what the checker refuses in any solution (after cutting comments), and why
REFUSED = {
    r"\btry\s*:": "a try block (a fallback to PyTorch)",
    r"\bexcept\s*:|\bexcept\s+\w+": "an except clause (a fallback to PyTorch)",
    r"\bpass\b": "the word pass (a subclass that only inherits the reference)",
    r"import\s+threading|from\s+threading\s+import|threading\.Thread\s*\(": "threads",
    r"import\s+multiprocessing|multiprocessing\.(Process|Pool|Manager|Queue|Pipe)": "processes",
    r"concurrent\.futures|ThreadPoolExecutor|ProcessPoolExecutor": "executor pools",
    r"_make_subclass|class\s+\w+.*\((torch\.)?Tensor\)|torch\.Tensor\.__new__": "a tensor subclass (lazy tensors)",
    r"torch\.cuda\.(Event(\.record|\.elapsed_time)?|synchronize)\s*=|time\.(perf_counter|time)\s*=":
        "a reassigned timer",
}


def without_comments(code: str) -> str:
    """Each line up to its first '#', then up to its first '//' (strings included, as the checker does)."""
    return "\n".join(line.split("#", 1)[0].split("//", 1)[0] for line in code.split("\n"))


def static_problems(code: str, impl: str) -> list:
    """What KernelBench's static checker would refuse in a solution (empty: accepted)."""
    text = without_comments(code)
    found = [why for pattern, why in REFUSED.items() if re.search(pattern, text)]
    if impl == "cuda":
        if "__global__" not in text:
            found.append("no visible __global__ kernel")
        if "load_inline" not in text and "cpp_extension" not in text:
            found.append("no load_inline / cpp_extension")
    elif not (re.search(r"@triton\.(jit|autotune)", text) and re.search(r"\btl\.\w+", text)):
        found.append("no @triton.jit kernel using tl.*")
    return found


def test_the_rules_refuse_what_the_checker_refuses():
    ok = "from torch.utils.cpp_extension import load_inline\nSRC = '''\n__global__ void k() {}\n'''\n"
    assert static_problems(ok, "cuda") == []
    assert static_problems("SRC = '#include <x.h> __global__ void k();'\nload_inline", "cuda") == \
        ["no visible __global__ kernel"]
    assert static_problems(ok + "class ModelNew(Model):\n    pass\n", "cuda") == [REFUSED[r"\bpass\b"]]
    assert static_problems(ok + "x = 1  # pass, try: except Exception\n", "cuda") == []
    assert len(static_problems("try:\n    import threading\nexcept ImportError:\n    x = 1\n", "triton")) == 4


def subject(name: str, variant=None, smallest: bool = False, shape: dict = None) -> Subject:
    """A task of module `name` on an H100 (`shape`, else its first shape, or its smallest) with the
    candidate of `variant` (default: the baseline) at its default parameters."""
    m = REGISTRY[name]
    shape = shape or (min(m.shapes, key=lambda s: math.prod(v for v in s.values() if isinstance(v, int))) if smallest
                      else m.shapes[0])
    t = make_task(m, "H100", m.dtypes[0], shape)
    v = variant or m.baseline_variant()
    code = m.render(v, {p.name: p.default for p in v.params}, t, None)
    return Subject(task_id="t", kind="single", split="train", reference=m.reference(t), dtype=t.dtype, title=m.title,
                   desc="", module=m, task=t, gpu="H100", arch=t.gpu.arch,
                   candidate=Candidate(code, f"baseline {v.tag}", "ok", None))


class _Extension:
    """What load_inline would return: records the build it was asked for."""

    def __init__(self):
        self.builds = []

    def __call__(self, name, **kwargs):
        self.builds.append((name, kwargs))
        return self


def _has(name):
    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize("name", NVIDIA)
def test_every_solution_passes_the_static_rules(name):
    """Every rung of every NVIDIA module, as an exported solution."""
    m = REGISTRY[name]
    for v in m.variants:
        s = subject(name, v)
        assert static_problems(solution_source(s), m.impl) == [], (name, v.tag)


@pytest.mark.parametrize("name", [n for n in NVIDIA if REGISTRY[n].impl == "cuda"])
def test_cuda_solution_execs_without_file(name):
    """KernelBench exec()s the source in a dict: no __file__, the extension built as the file
    loads (load_inline, here a stand-in patched in for the call only), the CUDA source a
    readable multi-line string, ModelNew a Reference with its own __init__ and forward."""
    torch = pytest.importorskip("torch")
    s = subject(name)
    src = solution_source(s)
    assert "__file__" not in src and "Path(" not in src
    assert re.search(r"^KERNEL = r?('''|\"\"\")$", src, re.M), "the kernel is not a multi-line literal"
    ext, ns = _Extension(), {}
    with mock.patch("torch.utils.cpp_extension.load_inline", ext):
        exec(compile(src, "<solution>", "exec"), ns)  # noqa: S102 - our own export
    assert torch.utils.cpp_extension.load_inline is not ext
    assert len(ext.builds) == 1 and ns["kernel_extension"] is ext
    kwargs = ext.builds[0][1]
    assert "__global__" in kwargs["cuda_sources"][0] and "PYBIND11_MODULE" in kwargs["cpp_sources"][0]
    assert any(f.startswith(("-gencode", "-arch")) for f in kwargs["extra_cuda_cflags"])
    cls = ns["ModelNew"]
    assert issubclass(cls, ns["Reference"]) and {"__init__", "forward"} <= set(vars(cls))


@pytest.mark.parametrize("name", [n for n in NVIDIA if REGISTRY[n].impl == "triton"])
def test_triton_solution_imports_from_a_file(name, tmp_path):
    """KernelBench imports a Triton solution from a temporary file (jit reads the source)."""
    pytest.importorskip("torch")
    if not _has("triton"):
        pytest.skip("triton is not installed")
    path = tmp_path / "solution.py"
    path.write_text(solution_source(subject(name)), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("ks_kb_contract_solution", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "ks_kb_contract_solution" not in sys.modules
    assert issubclass(mod.ModelNew, mod.Reference) and {"__init__", "forward"} <= set(vars(mod.ModelNew))


def _cast(x, dtype):
    """The harness's input processing, placement aside: every tensor to the precision."""
    return x.to(dtype=dtype) if hasattr(x, "to") and hasattr(x, "dtype") else x


@pytest.mark.parametrize("name", NVIDIA)
def test_problem_returns_one_tensor_after_the_harness_cast(name):
    """On the CPU, at the module's smallest shape (on the meta device, shapes only, past
    CPU_NUMEL_MAX elements): get_inputs() places no tensor itself, its inputs cast to the
    precision go through Model (built after a seed, cast too, under no_grad) and one tensor comes
    back: the op's output, or every output flattened in order; ModelNew's constructor (its kernel
    left out) draws the same parameters and buffers."""
    torch = pytest.importorskip("torch")
    s = subject(name, smallest=True)
    src = problem_source(s)
    assert "'cuda'" not in src and '"cuda"' not in src and ".cuda()" not in src
    ns = {}
    exec(compile(src, "<problem>", "exec"), ns)  # noqa: S102 - our own export
    plan = input_plan(s)
    try:                                   # sized on the meta device: no data drawn
        with torch.device("meta"):
            numel = sum(x.numel() for x in ns["reference_inputs"]() if torch.is_tensor(x))
    except NotImplementedError:            # a draw that needs data (bincount, nonzero): small enough here
        numel = 0
    device = torch.device("cpu" if numel <= CPU_NUMEL_MAX else "meta")   # meta: shapes only
    dtype = eval(TORCH[precision(s)], {"torch": torch})  # noqa: S307 - a dtype name of ours
    torch.manual_seed(42)
    try:
        with device:
            model = ns["Model"](*ns["get_init_inputs"]()).to(dtype=dtype)
            inputs = [_cast(x, dtype) for x in ns["get_inputs"]()]
            assert all(x.device == device for x in inputs if torch.is_tensor(x))   # the default: not placed
            with torch.no_grad():
                out = model(*inputs)
    except NotImplementedError as e:
        pytest.skip(f"reference inputs of {numel:,} elements, too large for the CPU, need data meta lacks: {e}"[:200])
    assert len(inputs) == sum(how in ("pass", "convert") for _, how, _, _ in plan)
    assert torch.is_tensor(out)
    outs = s.module.entry.outputs(s.task)
    if len(outs) == 1:
        assert tuple(out.shape) == outs[0][1]
    else:
        assert out.dtype == torch.float32 and out.numel() == sum(math.prod(shape) for _, shape, _ in outs)
    sol = {}
    with mock.patch("torch.utils.cpp_extension.load_inline", _Extension()):
        if s.module.impl == "triton" and not _has("triton"):
            return
        if s.module.impl == "cuda":
            exec(compile(solution_source(s), "<solution>", "exec"), sol)  # noqa: S102 - our own export
    if sol:
        torch.manual_seed(42)
        with device:
            new = sol["ModelNew"](*ns["get_init_inputs"]()).to(dtype=dtype)
        mine, theirs = new.state_dict(), model.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(mine[k].shape == theirs[k].shape and (device.type == "meta" or torch.equal(mine[k], theirs[k]))
                   for k in mine)


# shapes of the op's own form small enough for the CPU (their menus' smallest draw 20M+ elements)
CPU_SHAPES = {"flash_attn_bwd": {"B": 1, "H": 2, "S": 256, "D": 64},
              "adamw": {"N": 1 << 16, "T": 4},
              "gemm_fp8": {"M": 64, "N": 256, "K": 512}, "gemm_fp8_blockwise": {"M": 64, "N": 256, "K": 512},
              "gemm_int8": {"M": 64, "N": 256, "K": 512},
              "int8_kv_quant": {"N": 1, "H": 2, "Dh": 128, "S": 1024},
              "fused_qkv_rope": {"T": 64, "HID": 512, "H": 4, "KVH": 2, "D": 128}}
DRAWS = ("randn", "randn_like", "rand", "rand_like")     # the floating draws of the references' inputs
# fp32 side inputs drawn apart from the other inputs (then scaled, or a softmax of their own draw),
# which the reference's forward uses as given: the cast rounds them for Model and ModelNew alike
DRAWN_APART = {"gemm_fp8": ("scale_b",), "gemm_int8": ("scale_a", "scale_b"), "mamba_step": ("dt_bias",),
               "moe_combine": ("topk_weights",), "selective_scan": ("delta_bias",)}


def _side_input_modules() -> list:
    """Modules whose kernel takes an input in another floating type than the problem's precision."""
    return [n for n in NVIDIA
            if any(how in ("convert", "derive") and dt.startswith("torch.float") and not dt.startswith("torch.float8")
                   for _, how, dt, _ in input_plan(subject(n, smallest=True)))]


@pytest.mark.parametrize("name", _side_input_modules())
def test_side_inputs_reach_the_kernel_as_the_reference_makes_them(name):
    """KernelBench casts every input to the problem's precision. With the draws of the reference's
    inputs made at that precision (so the cast cannot change a drawn value), every input reaches
    the kernel (the arguments of the reference's forward, which ModelNew's forward gives the kernel
    too) with the value the reference's inputs give it, to fp32 rounding: an fp32 side tensor
    computed from the others (an lse, a mean / rstd, rope tables) must not go through the cast
    (a reference that recomputes it would see other values than the kernel). Only DRAWN_APART
    inputs, which the reference uses as given, may come rounded."""
    torch = pytest.importorskip("torch")
    m = REGISTRY[name]
    s = subject(name, smallest=True, shape=CPU_SHAPES.get(m.op))
    ns = {}
    exec(compile(problem_source(s), "<problem>", "exec"), ns)  # noqa: S102 - our own export
    model_new = solution_source(s).split("class ModelNew(Reference):", 1)[1]
    model = problem_source(s).split("class Model(Reference):", 1)[1].split("def get_inputs", 1)[0]
    prologue = lambda cls: cls.split("one output tensor.\"\"\"\n", 1)[1].split("return", 1)[0].split("with torch", 1)[0]
    assert prologue(model_new).startswith(prologue(model))   # ModelNew gives the kernel what Model gives the reference
    dtype = eval(TORCH[precision(s)], {"torch": torch})  # noqa: S307 - a dtype name of ours
    real = {d: getattr(torch, d) for d in DRAWS}

    def at_precision(draw):
        return lambda *a, **k: (lambda x: x.to(dtype).to(x.dtype) if x.is_floating_point() else x)(draw(*a, **k))
    seen = []
    with mock.patch.multiple(torch, **{d: at_precision(f) for d, f in real.items()}), \
            mock.patch.object(ns["Reference"], "forward", lambda self, *args: seen.append(
                [a.clone() if torch.is_tensor(a) else a for a in args]) or args[0]):
        torch.manual_seed(42)
        model = ns["Model"](*ns["get_init_inputs"]()).to(dtype=dtype)
        torch.manual_seed(7)
        expected = ns["reference_inputs"]()
        torch.manual_seed(7)
        with torch.no_grad():
            model(*[_cast(x, dtype) for x in ns["get_inputs"]()])
    plan = input_plan(s)
    for (arg, how, _, _), want, got in zip(plan, expected, seen[0]):
        if how == "fixed" or not torch.is_tensor(want):   # fixed: drawn at construction, by its own draw
            continue
        assert got.dtype == want.dtype, (arg, how)
        if arg in DRAWN_APART.get(m.op, ()):
            forward_body = s.reference.split("def forward", 1)[1].split("\n", 1)[1].split("def get_inputs", 1)[0]
            assert re.search(rf"\b{arg}\b", forward_body), f"{arg} (drawn apart) is not used by the reference"
            continue
        worst = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
        assert torch.allclose(got.double(), want.double(), rtol=1e-6, atol=1e-7), f"{arg} ({how}): off by {worst:.3g}"


def _computed_inputs(reference: str) -> list:
    """The positions of the reference's inputs that `get_inputs()` computes from its other inputs
    (a list of draws bound with :=; a draw shaped like another, randn_like(x), is not computed)."""
    import ast
    tree = ast.parse(reference.split("def get_inputs():", 1)[1].split("\n\n\n", 1)[0].strip())
    if not (isinstance(tree.body[0], ast.Return) and isinstance(tree.body[0].value, ast.List)):
        return []
    bound, computed = set(), []
    for i, el in enumerate(tree.body[0].value.elts):
        if isinstance(el, ast.NamedExpr):
            bound.add(el.target.id)
            el = el.value
        used = {n.id for n in ast.walk(el) if isinstance(n, ast.Name)} & bound
        if used and not re.fullmatch(r"torch\.\w+_like\(\w+\)", ast.unparse(el)):
            computed.append(i)
    return computed


def test_an_input_computed_from_the_others_is_derived_where_forward_runs():
    """KernelBench draws get_inputs() on the CPU. An input the reference's inputs compute from the
    others (an lse; flash_attn_bwd's o, the forward output its backward takes) must not come from
    there: CPU kernels round otherwise than the reference's own forward on the device (the H100's
    flash_attn_bwd element outside). Each such input is derived inside forward, not passed."""
    seen = []
    for n in NVIDIA:
        s = subject(n, smallest=True)
        plan = input_plan(s)
        for i in _computed_inputs(s.reference):
            seen.append((n, plan[i][0]))
            assert plan[i][1] == "derive", (n, plan[i])
    assert ("flash_attn_bwd_triton", "o") in seen and ("cross_entropy_bwd_triton", "lse") in seen


def test_reference_of_gpu_check_is_unchanged():
    """The export wraps the op's reference; gpu-check and the workspaces keep it as it is."""
    s = subject("rmsnorm_cuda")
    assert "class Model(nn.Module):" in s.reference and "def get_inputs():" in s.reference
    body = s.reference.split("def forward", 1)[1].split("def get_inputs", 1)[0]
    assert body in problem_source(s)


def test_problems_draw_normal_inputs_in_fp32_and_round_them():
    """torch's CPU randn at a 16-bit dtype keeps within +-3.33 sigma through 2.11 (pytorch#166853),
    and KernelBench draws get_inputs() on the CPU: every problem draws in fp32 and rounds to its
    dtype (a GPU draw's values), and an fp32 problem draws what its reference draws."""
    torch = pytest.importorskip("torch")
    left = [n for n in NVIDIA
            if re.search(r"torch\.randn\([^\n]*dtype=DTYPE|torch\.randn_like\(\w+\)",
                         problem_source(subject(n, smallest=True)))]
    assert left == []
    like = "[q := torch.randn(B, S).to(DTYPE), k := torch.randn_like(q)]"
    assert full_precision_draws(like) == ("[q := torch.randn(B, S).to(DTYPE), "
                                          "k := torch.randn_like(q, dtype=torch.float32).to(q.dtype)]")
    fused = "    return [torch.randn(batch_size, (C + 1) * 2, dtype=dtype), torch.randn(n)]"     # a fused program's
    assert full_precision_draws(fused) == "    return [torch.randn(batch_size, (C + 1) * 2).to(dtype), torch.randn(n)]"
    s = subject("cross_entropy_fwd_triton")           # T 16, V 128256 at bf16: the split-V combine's task
    assert s.dtype == "bf16"
    ns = {}
    exec(compile(problem_source(s), "<problem>", "exec"), ns)  # noqa: S102 - our own export
    torch.manual_seed(7)
    logits = ns["get_inputs"]()[0]
    torch.manual_seed(7)
    assert logits.dtype == torch.bfloat16 and torch.equal(logits, torch.randn(16, 128256).to(torch.bfloat16) * 2)
    task = make_task(s.module, "H100", "fp32", {"T": 16, "V": 128256})
    s = replace(s, task=task, dtype="fp32", reference=s.module.reference(task))
    drawn = []
    for src in (problem_source(s), s.reference.replace(", device='cuda'", "")):
        ns = {}
        exec(compile(src, "<program>", "exec"), ns)  # noqa: S102 - our own export / reference
        torch.manual_seed(7)
        drawn.append(ns["get_inputs" if "reference_inputs" not in ns else "reference_inputs"]())
    assert all(torch.equal(a, b) for a, b in zip(*drawn))


# -- every rung and every bug of every module, loaded against a stand-in torch --------------
def profile_modules() -> set:
    """Every module with an H100 or H200 task in a bundled profile (the export's NVIDIA tasks)."""
    from kernelstrain.gpus import GPUS
    from kernelstrain.profiles import bundled_names, load_profile
    out = set()
    for name in bundled_names():
        p = load_profile(name)
        for m in (REGISTRY[n] for n in (p.modules or tuple(REGISTRY))):
            if any(m.supports(GPUS[g], dt) for g in ("H100", "H200") if g in p.gpus for dt in m.dtypes):
                out.add(m.name)
    return out


def test_the_contract_tests_cover_both_profiles():
    """NVIDIA (every test here) holds every module with an H100 / H200 task in either bundled profile,
    and each one's first dtype runs on an H100 (the tests' task)."""
    from kernelstrain.gpus import GPUS
    covered = profile_modules()
    assert len(covered) >= 70 and covered <= set(NVIDIA)
    assert all(REGISTRY[n].supports(GPUS["H100"], REGISTRY[n].dtypes[0]) for n in covered)


class _Value:
    """Whatever a solution touches of torch / triton while it loads: attributes, calls,
    subscripts, decorators and arithmetic all give another stand-in value."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Value(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        return _Value(f"{self._name}()")

    def __getitem__(self, key):
        return _Value(f"{self._name}[]")

    def _op(self, *other):
        return _Value(self._name)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _op
    __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = __neg__ = __or__ = __ror__ = _op


class _StandInModule:
    """A module of the stand-in torch / triton: named members as given, any other a _Value."""

    def __init__(self, name, **members):
        self.__name__, self.__dict__ = name, {**members, "__name__": name}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Value(f"{self.__name__}.{name}")


class _Module:
    """torch.nn.Module as far as loading a solution needs: a base class."""

    def __init__(self, *args, **kwargs):
        pass


def stand_in_modules(builds: list) -> dict:
    """sys.modules entries of a stand-in torch (nn.Module a class, load_inline a recorder with
    load_inline's keywords) and triton: no real torch or triton is imported."""
    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                    verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                    keep_intermediates=True, use_pch=False, no_implicit_headers=False):
        builds.append({"name": name, "cpp": cpp_sources, "cuda": cuda_sources, "flags": extra_cuda_cflags})
        return _Value("extension")

    cpp = _StandInModule("torch.utils.cpp_extension", load_inline=load_inline)
    utils = _StandInModule("torch.utils", cpp_extension=cpp)
    nn = _StandInModule("torch.nn", Module=_Module)
    torch = _StandInModule("torch", nn=nn, utils=utils, Tensor=type("Tensor", (), {}))
    tl = _StandInModule("triton.language")
    triton = _StandInModule("triton", language=tl)
    return {"torch": torch, "torch.nn": nn, "torch.utils": utils, "torch.utils.cpp_extension": cpp,
            "triton": triton, "triton.language": tl}


def every_candidate(name: str):
    """(label, subject) for every rung of module `name` at its default parameters, clean and with
    each bug it injects (the wrong_result candidates the export writes)."""
    m = REGISTRY[name]
    base = subject(name)
    for v in m.variants:
        for bug in (None, *v.bugs):
            code = m.render(v, v.defaults(), base.task, bug)
            yield f"{v.tag}:{bug}", replace(base, candidate=Candidate(code, v.tag, "wrong_result" if bug else "ok", None))


@pytest.mark.parametrize("name", NVIDIA)
def test_every_candidate_loads_against_a_stand_in_torch(name, tmp_path):
    """Every rung and bug as an exported solution, against a stand-in torch and triton (nothing of
    theirs runs): the static rules hold; a CUDA solution exec()s in a plain dict (no __file__),
    building ONE extension from readable sources for the task's arch; a Triton one imports from a
    file; ModelNew subclasses Reference with its own __init__ and forward."""
    impl = REGISTRY[name].impl
    for label, s in every_candidate(name):
        src = solution_source(s)
        assert "__file__" not in src and static_problems(src, impl) == [], label
        builds = []
        with mock.patch.dict(sys.modules, stand_in_modules(builds)):
            if impl == "cuda":
                ns = {}
                exec(compile(src, "<solution>", "exec"), ns)  # noqa: S102 - our own export
            else:
                path = tmp_path / "solution.py"
                path.write_text(src, encoding="utf-8")
                spec = importlib.util.spec_from_file_location("ks_kb_stand_in_solution", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                ns = vars(mod)
        cls = ns["ModelNew"]
        assert issubclass(cls, ns["Reference"]) and {"__init__", "forward"} <= set(vars(cls)), label
        if impl == "cuda":
            assert len(builds) == 1 and "__global__" in builds[0]["cuda"][0], label
            assert "-gencode=arch=compute_90a,code=sm_90a" in builds[0]["flags"], label
        else:
            assert builds == [], label
