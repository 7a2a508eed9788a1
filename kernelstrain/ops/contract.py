"""An op's entry point as data: its name, tensor arguments (role, shape in the task's dims,
dtype) and scalars. From one Entry come the CUDA host prototype and `signature()`, the Triton
wrapper's def line, an `extern "C"` trampoline for ctypes, a PyTorch C++ binding, and the
concrete shape and dtype of every output.

>>> from kernelstrain.ops import REGISTRY
>>> from kernelstrain.tasks import make_task
>>> e = Entry("scale_rows", (Arg("x", "in", ("T", "D")), Arg("y", "out", ("T", "D")),
...                          Scalar("T"), Scalar("D"), Scalar("alpha", "float", "1.0")))
>>> t = make_task(REGISTRY["rmsnorm_cuda"], "A100", "fp16", {"T": 8, "D": 64})
>>> e.prototype(t)
'void scale_rows(const scalar_t* x, scalar_t* y, int T, int D, float alpha, cudaStream_t stream)'
>>> e.py_def(t)
'def scale_rows(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor'
>>> e.outputs(t)
[('y', (8, 64), 'fp16')]
"""
from __future__ import annotations

import re
from dataclasses import dataclass

ROLES = ("in", "out", "inout")
# C spelling of dtypes that do not depend on the dialect ('task' is the dialect's scalar_t)
C_SCALAR = {"fp32": "float", "int32": "int", "int64": "int64_t", "uint8": "uint8_t", "uint32": "uint32_t",
            "int8": "int8_t", "bool": "bool"}
TORCH = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16", "fp8": "torch.float8_e4m3fn",
         "int8": "torch.int8", "uint8": "torch.uint8", "int32": "torch.int32", "int64": "torch.int64",
         "uint32": "torch.int32", "bool": "torch.bool"}
ATEN = {"fp32": "at::kFloat", "fp16": "at::kHalf", "bf16": "at::kBFloat16", "fp8": "at::kFloat8_e4m3fn",
        "int8": "at::kChar", "uint8": "at::kByte", "int32": "at::kInt", "int64": "at::kLong", "uint32": "at::kInt",
        "bool": "at::kBool"}
CTYPES = {"int": "c_int", "unsigned": "c_uint", "float": "c_float", "double": "c_double", "int64_t": "c_int64",
          "uint32_t": "c_uint32", "uint64_t": "c_uint64", "long long": "c_longlong",
          "unsigned long long": "c_ulonglong"}
PY_SCALAR = {"float": "float", "double": "float"}          # everything else is an int
TORCH_SCALAR = {"float": "double", "double": "double"}     # the binding's parameter type


@dataclass(frozen=True)
class Arg:
    """A tensor argument. dims: names of the task's dims, ints, or small expressions ("2*I");
    dtype: 'task' (the task's dtype) or a dtype name; ctype: a C spelling that overrides the
    derived one (pointer arrays: "float* const*"); source: where a caller holding the reference
    Model finds an argument that is not one of the op's inputs (`self.weight`), see `py_value`;
    tol: the tolerance class (gpucheck.adapters.TOLS) a result is compared with when it is not the
    op's; view: the dtype a result is compared as (raw uint8 codes as "fp8")."""
    name: str
    role: str                   # in | out | inout
    dims: tuple
    dtype: str = "task"
    ctype: str | None = None
    source: str | None = None
    tol: str | None = None
    view: str | None = None

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"arg {self.name}: role {self.role!r} not in {ROLES}")

    def dtype_of(self, task) -> str:
        return task.dtype if self.dtype == "task" else self.dtype

    def shape(self, task) -> tuple:
        return tuple(_dim(d, task.dims) for d in self.dims)

    def c_decl(self, task) -> str:
        if self.ctype:
            return f"{self.ctype} {self.name}"
        base = "scalar_t" if self.dtype == "task" else C_SCALAR.get(self.dtype) or task.dialect.ctype[self.dtype]
        return f"{'const ' if self.role == 'in' else ''}{base}* {self.name}"


@dataclass(frozen=True)
class Scalar:
    """A scalar argument: a task dim when its name is one, else a value the caller passes
    (`default` is its Python literal in the Triton wrapper; `value` an expression of the dims
    the C side computes; `source` the Python expression a caller computes it from, of the dims
    or the reference Model's attributes: "D ** -0.5", "self.eps"; see `py_value`)."""
    name: str
    ctype: str = "int"
    default: str | None = None
    value: str | None = None
    source: str | None = None

    def c_decl(self, task) -> str:
        return f"{self.ctype} {self.name}"

    def is_dim(self, task) -> bool:
        return self.name in task.dims or self.value is not None


def py_value(source: str, dims: dict) -> str:
    """The Python text a caller (ModelNew, an adapter) passes for an argument of `source`: an
    expression of the dims alone is evaluated to its literal, one of the reference Model's
    attributes (`self.x`) is kept as written.

    >>> py_value("D ** -0.5", {"D": 64})
    '0.125'
    >>> py_value("self.weight", {"D": 64})
    'self.weight'
    """
    if "self." in source:
        return source
    return repr(eval(source, {"__builtins__": {}}, dict(dims)))  # noqa: S307 - the spec's own expression


def _c_expr(d) -> str:
    """A dim expression (Python) in C++: integer division is `/` there (`//` opens a comment).

    >>> _c_expr("(K + 127) // 128")
    '(K + 127) / 128'
    """
    return str(d).replace("//", "/")


def _dim(d, dims: dict) -> int:
    if isinstance(d, int):
        return d
    return dims[d] if d in dims else int(eval(d, {"__builtins__": {}}, dict(dims)))  # noqa: S307 - own literals


@dataclass(frozen=True)
class Entry:
    """The host entry point of an op (CUDA modules: `void name(..., cudaStream_t stream)`;
    Triton modules: a wrapper `py_name` taking the in/inout tensors and non-dim scalars and
    returning `returns`, by default every out/inout tensor in argument order)."""
    name: str
    args: tuple
    py_name: str | None = None
    returns: tuple | None = None

    def __post_init__(self):
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"entry {self.name}: duplicate argument names")
        for r in self.returns or ():
            if r not in names:
                raise ValueError(f"entry {self.name}: returns unknown argument {r!r}")

    # -- views -----------------------------------------------------------------------
    @property
    def tensors(self) -> tuple:
        return tuple(a for a in self.args if isinstance(a, Arg))

    @property
    def scalars(self) -> tuple:
        return tuple(a for a in self.args if isinstance(a, Scalar))

    def arg(self, name: str):
        return next(a for a in self.args if a.name == name)

    @property
    def results(self) -> tuple:
        """Names of what the op produces, in the reference's return order."""
        return self.returns or tuple(a.name for a in self.tensors if a.role != "in")

    def outputs(self, task) -> list:
        """[(name, concrete shape, dtype)] of every result, in the reference's return order."""
        return [(n, self.arg(n).shape(task), self.arg(n).dtype_of(task)) for n in self.results]

    # -- CUDA --------------------------------------------------------------------------
    def decls(self, task) -> list:
        return [a.c_decl(task) for a in self.args] + ["cudaStream_t stream"]

    def prototype(self, task) -> str:
        """The host function's prototype on one line (this is a CUDA module's signature())."""
        return f"void {self.name}({', '.join(self.decls(task))})"

    def host_head(self, task) -> str:
        """The prototype as renders write it: tensors on the first line, scalars and the
        stream on a second one aligned under the first argument."""
        ptrs = [a.c_decl(task) for a in self.tensors]
        rest = [a.c_decl(task) for a in self.scalars] + ["cudaStream_t stream"]
        head = f"void {self.name}("
        return head + ", ".join(ptrs) + ",\n" + " " * len(head) + ", ".join(rest) + ")"

    def call_args(self) -> str:
        """The argument names in order, to forward them to a kernel."""
        return ", ".join(a.name for a in self.args)

    def host(self, task, kernel: str, grid: str, block: str, smem: str = "0", pre: str = "") -> str:
        """A host function that launches `kernel` with every argument of the entry, in order;
        `pre` holds lines run before the launch (each starting with a newline)."""
        return (f"\n{self.host_head(task)} {{{pre}\n    {kernel}<<<{grid}, {block}, {smem}, stream>>>"
                f"({self.call_args()});\n}}\n")

    def ctypes_params(self, task) -> list:
        """[(kind, c type, name)]: kind 'ptr', 'stream' or the ctypes name of a scalar."""
        out = [p for a in self.args for p in
               ([("ptr", a.c_decl(task).rsplit(" ", 1)[0], a.name)] if isinstance(a, Arg)
                else [(CTYPES[a.ctype], a.ctype, a.name)])]
        return out + [("stream", "cudaStream_t", "stream")]

    def trampoline(self, task) -> str:
        """`extern "C"` wrappers for ctypes: ks_entry(void* for every pointer and the stream,
        scalars by value) returning the launch error, ks_sync, ks_error_name."""
        formals, actuals = [], []
        for i, (kind, decl, _) in enumerate(self.ctypes_params(task)):
            if kind in ("ptr", "stream"):
                formals.append(f"void* a{i}")
                actuals.append(f"({decl})a{i}")
            else:
                formals.append(f"{decl} a{i}")
                actuals.append(f"a{i}")
        return f"""

// ---- gpu_check trampoline: C linkage for ctypes --------------------------------------
extern "C" int ks_entry({", ".join(formals)}) {{
    cudaGetLastError();                                   // start from a clean error state
    {self.name}({", ".join(actuals)});
    return (int)cudaGetLastError();                       // launch-time errors of the host function
}}
extern "C" int ks_sync(void* stream) {{
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    return (int)e;
}}
extern "C" const char* ks_error_name(int e) {{ return cudaGetErrorName((cudaError_t)e); }}
"""

    def torch_binding(self, task, fn: str = "forward") -> str:
        """C++ source of a PyTorch extension function `fn` taking the in/inout tensors and the
        scalars no tensor's shape gives, checking every tensor's device, layout, shape and
        dtype, allocating the outputs and calling the entry on the current stream. Compile it
        in one translation unit after the candidate (scalar_t comes from the candidate)."""
        params, lines = self._binding_checks(task)
        actual = [f"reinterpret_cast<{a.c_decl(task).rsplit(' ', 1)[0]}>({a.name}.data_ptr())" for a in self.tensors]
        casts = iter(actual)
        call = [next(casts) if isinstance(a, Arg) else f"({a.ctype}){a.name}" for a in self.args]
        res = self.results
        ret_t = "torch::Tensor" if len(res) == 1 else "std::vector<torch::Tensor>"
        ret = res[0] if len(res) == 1 else "{" + ", ".join(res) + "}"
        body = "\n".join(lines)
        return f"""

// ---- PyTorch binding of {self.name} ------------------------------------------------
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

{ret_t} {fn}({", ".join(params)}) {{
{body}
    {self.name}({", ".join(call + ["c10::cuda::getCurrentCUDAStream()"])});
    return {ret};
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("{fn}", &{fn}, "{self.name}"); }}
"""

    def trampoline_binding(self, task, fn: str = "forward") -> str:
        """A PyTorch binding in a translation unit of its own (a .cpp, no CUDA types): the same
        checks and allocations as torch_binding, calling the candidate through `ks_entry` of
        trampoline() (compiled with the candidate) and raising on a launch error. It also
        defines `set_poison(bool)`: while on, every allocated output is first filled with NaN
        (floating types) or all-ones bytes, so an element the kernel never writes shows."""
        params, lines = self._binding_checks(task)
        decl, call = [], []
        for kind, ctype, name in self.ctypes_params(task):
            decl.append("void*" if kind in ("ptr", "stream") else ctype)
            call.append(f"{name}.data_ptr()" if kind == "ptr" else
                        "(void*)c10::cuda::getCurrentCUDAStream().stream()" if kind == "stream" else f"({ctype}){name}")
        poison = [f"    if (ks_poison) ks_fill_poison({a.name});" for a in self.tensors if a.role == "out"]
        res = self.results
        ret_t = "torch::Tensor" if len(res) == 1 else "std::vector<torch::Tensor>"
        ret = res[0] if len(res) == 1 else "{" + ", ".join(res) + "}"
        body = "\n".join(lines + poison)
        return f"""// ---- PyTorch binding of {self.name}, calling the candidate through its C trampoline ----
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <limits>

extern "C" int ks_entry({", ".join(decl)});
extern "C" const char* ks_error_name(int e);

static bool ks_poison = false;

static void ks_fill_poison(torch::Tensor& t) {{
    if (at::isFloatingType(t.scalar_type())) t.fill_(std::numeric_limits<float>::quiet_NaN());
    else t.view(at::kByte).fill_(0xFF);
}}

{ret_t} {fn}({", ".join(params)}) {{
{body}
    const int err = ks_entry({", ".join(call)});
    TORCH_CHECK(err == 0, "{self.name}: launch error ", ks_error_name(err));
    return {ret};
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
    m.def("{fn}", &{fn}, "{self.name}");
    m.def("set_poison", [](bool on) {{ ks_poison = on; }}, "fill outputs with NaN / 0xFF before each launch");
}}
"""

    def _binding_checks(self, task) -> tuple[list, list]:
        """(the binding's parameters, its checking and allocating lines)."""
        bound, lines, params = {}, [], []
        for a in self.tensors:
            if a.role == "out":
                continue
            params.append(f"torch::Tensor {a.name}")
            lines.append(f'    TORCH_CHECK({a.name}.is_cuda() && {a.name}.is_contiguous(), '
                         f'"{a.name} must be a contiguous CUDA tensor");')
            lines.append(f'    TORCH_CHECK({a.name}.scalar_type() == {ATEN[a.dtype_of(task)]}, '
                         f'"{a.name} must be {a.dtype_of(task)}");')
            lines.append(f'    TORCH_CHECK({a.name}.dim() == {len(a.dims)}, "{a.name} must have {len(a.dims)} dims");')
            for i, d in enumerate(a.dims):
                if isinstance(d, str) and d.isidentifier() and d not in bound:
                    bound[d] = f"{a.name}.size({i})"
        # every dim a tensor gives is declared (shape expressions and scalar values use them);
        # a dim no tensor gives and no scalar passes is the task's constant
        lines += [f"    const int64_t {d} = {size};" for d, size in bound.items()]
        names = {s.name for s in self.scalars} | set(bound)
        used = [n for a in self.tensors for d in a.dims if isinstance(d, str) for n in re.findall(r"[A-Za-z_]\w*", d)]
        used += [n for s in self.scalars if s.value for n in re.findall(r"[A-Za-z_]\w*", s.value)]
        lines += [f"    const int64_t {n} = {task.dims[n]};"
                  for n in dict.fromkeys(used) if n not in names and n in task.dims]
        for s in self.scalars:
            if s.name in bound:
                continue
            if s.value is not None:
                lines.append(f"    const int64_t {s.name} = {_c_expr(s.value)};")
            else:
                params.append(f"{TORCH_SCALAR.get(s.ctype, 'int64_t')} {s.name}")
        for a in self.tensors:          # shapes checked once every dim is known
            for i, d in enumerate(a.dims):
                if a.role != "out" and bound.get(d) != f"{a.name}.size({i})":
                    lines.append(f'    TORCH_CHECK({a.name}.size({i}) == ({_c_expr(d)}), "{a.name}: dim {i} must be {d}");')
        first = next(a.name for a in self.tensors if a.role != "out")
        for a in self.tensors:
            if a.role == "out":
                dims = ", ".join(f"(int64_t)({_c_expr(d)})" for d in a.dims)
                lines.append(f"    auto {a.name} = torch::empty(std::vector<int64_t>{{{dims}}}, "
                             f"{first}.options().dtype({ATEN[a.dtype_of(task)]}));")
        return params, lines

    def binding_params(self, task) -> list:
        """[(name, 'tensor' | 'scalar')]: what the PyTorch binding's function takes, in order."""
        bound = {d for a in self.tensors if a.role != "out" for d in a.dims if isinstance(d, str) and d.isidentifier()}
        return ([(a.name, "tensor") for a in self.tensors if a.role != "out"]
                + [(s.name, "scalar") for s in self.scalars if s.name not in bound and s.value is None])

    # -- Triton ------------------------------------------------------------------------
    def py_def(self, task) -> str:
        """The Triton wrapper's def line, without the colon."""
        args = [f"{a.name}: torch.Tensor" for a in self.tensors if a.role != "out"]
        args += [f"{s.name}: {PY_SCALAR.get(s.ctype, 'int')}" + (f" = {s.default}" if s.default else "")
                 for s in self.scalars if not s.is_dim(task)]
        res = self.results
        ret = "None" if not res else "torch.Tensor" if len(res) == 1 else \
            "tuple[" + ", ".join(["torch.Tensor"] * len(res)) + "]"
        return f"def {self.py_name or self.name}({', '.join(args)}) -> {ret}"

    def shapes_note(self, task) -> str:
        """'x [T, D], weight [D] -> y [T, D]': the tensors' shapes in the task's dims."""
        def one(a):
            dt = "" if a.dtype == "task" else f" {a.dtype}"
            return f"{a.name} [{', '.join(map(str, a.dims))}]{dt}"
        ins = [one(a) for a in self.tensors if a.role != "out"]
        outs = [one(self.arg(n)) for n in self.results]
        return ", ".join(ins) + " -> " + ", ".join(outs)

    def py_signature(self, task) -> str:
        """A Triton module's signature(): the def line and the shapes of its tensors."""
        return f"{self.py_def(task)}  # {self.shapes_note(task)}"


# host-memory arguments of an entry's check adapter (gpucheck builds them into the launch)
class HostPtrs:
    """An argument that is an array of device pointers in host memory."""

    def __init__(self, tensors):
        self.tensors = list(tensors)


class HostI64:
    """An argument that is an array of int64 in host memory."""

    def __init__(self, values):
        self.values = [int(v) for v in values]
