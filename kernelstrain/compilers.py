"""Real compilers for rendered candidates: nvcc for CUDA, Triton's compiler for Triton.

Used by `verify` and the compile tests; nothing here runs during `generate`.
Results are cached on disk by sha256 of (source, target).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from dataclasses import asdict, dataclass
from pathlib import Path

from .slips.triton_slips import CHAINED

CACHE_DIR = Path(os.environ.get("KERNELSTRAIN_CACHE", Path.home() / ".cache" / "kernelstrain" / "compile"))

NVCC_GENCODE = {
    "sm_80": "arch=compute_80,code=sm_80", "sm_86": "arch=compute_86,code=sm_86",
    "sm_89": "arch=compute_89,code=sm_89", "sm_90a": "arch=compute_90a,code=sm_90a",
    # RTX 5090 candidates build for the arch-specific target, as H100's do for sm_90a: the
    # block-scaled mma (kind::mxf8f6f4 / mxf4nvf4) exists only there
    "sm_120": "arch=compute_120a,code=sm_120a",
}


@dataclass
class CompileResult:
    ok: bool
    log: str
    smem_bytes: int | None = None
    regs: int | None = None
    error_class: str | None = None   # arch | smem | resources | type | constexpr | syntax | other


class MissingCompiler(RuntimeError):
    pass


# compile errors of the slips catalogue (kernelstrain/slips) other than a misspelt name
SLIP_CLASSES = (
    ("type", r"cannot cast away const|no instance of overloaded function|Both operands must be same dtype"
             r"|too few arguments in function call|a __global__ function call must be configured"
             r"|error: cast to type \"[^\"]*\" is not allowed"
             r"|store\(\) got an unexpected keyword argument 'other'|`other` cannot be provided without `mask`"),
    ("constexpr", r"variable length array cannot have static storage|arguments must be of type tl\.constexpr"),
)


def classify(log: str) -> str:
    """Error class of a compiler log."""
    if "too much shared data" in log or "shared memory" in log and "out of resource" in log \
            or re.search(r"local memory \(\d+\) exceeds limit", log):
        return "smem"
    if "not supported on .target" in log or "requires .target" in log or "not supported in this architecture" in log \
            or "instruction not supported on this GPU" in log or re.search(r"error: .*\bin asm\b|<inline asm>", log) \
            or re.search(r"fatal error: '(cuda\.h|cuda/[^']*|cuda_fp8\.h|cute/[^']*)' file not found", log):
        return "arch"   # a missing NVIDIA-only header is an NVIDIA-only feature on ROCm
    if "too many resources" in log or "out of resource" in log:
        return "resources"
    for cls, pat in SLIP_CLASSES:
        if re.search(pat, log):
            return cls
    if re.search(r"error: |Error|CompilationError", log):
        return "syntax"
    return "other"


def normalized(log: str) -> str:
    """A compiler log with its temporary paths gone: /tmp/xyz/candidate.cu -> candidate.cu."""
    return re.sub(r"[^\s\"(]*/(candidate\.(?:cu|hip))", r"\1", log)


def tool_text(log: str) -> str:
    """A compiler log as a recorded message states it, for exact comparison: temporary paths to
    candidate.cu / candidate.hip, ptxas's temporary PTX file name to one placeholder (it varies
    per run), and the -Xptxas -v resource lines (verify asks for them; a harness does not) gone;
    clang's warnings (the HIP headers' nodiscard attributes: ROCm-version dependent, in the host
    code) are left out with their notes, and from the closing count.

    >>> tool_text("ptxas /tmp/tmpxft_00003f56_00000000-6_candidate.ptx, line 9; error   : X\\nptxas info    : Used 8 registers")
    'ptxas tmpxft_candidate.ptx, line 9; error   : X'
    """
    log = re.sub(r"/tmp/tmpxft_[0-9a-f]+_\d+-\d+_candidate\.ptx", "tmpxft_candidate.ptx", normalized(log))
    keep, in_warning = [], False
    for line in log.splitlines():
        if re.match(r"\S+:\d+:\d+: warning: ", line):
            in_warning = True       # clang's warnings depend on the installed HIP headers' attributes
        elif not (in_warning and (re.match(r"\s*\d* \| ", line) or ": note: " in line)):
            in_warning = False
            if not line.startswith("ptxas info") and not re.match(r"    \d+ bytes stack frame", line):
                keep.append(re.sub(r"^\d+ warnings? and (\d+ errors? generated)", r"\1", line))
    return "\n".join(keep).strip()


def first_error(log: str) -> str:
    """The first error of a log, as a recorded message states it: nvcc's or clang's first
    `error:` line (paths normalized), or Triton's CompilationError position and its message
    (the last line of the exception text; in a chain, the first printed: the innermost)."""
    log = normalized(log)
    if "CompilationError: at " in log:
        first = log.split(CHAINED)[0]     # an error in a @triton.jit helper: its own, printed first
        if "CompilationError: at " not in first:
            first = log
        head = re.search(r"CompilationError: at \d+:\d+:", first).group(0)
        return f"{head} {first.rstrip().splitlines()[-1]}"
    return next((line for line in log.splitlines() if re.search(r"\berror\b", line)), "")


def exception_text(e: BaseException) -> str:
    """An exception as Python prints it, tracebacks left out, with the causes of its kind first:
    a Triton error in a @triton.jit helper is re-raised at each call site on the way to the
    kernel. A cause of another kind (the ValueError a CompilationError quotes as its message)
    is left out."""
    parts = [e]
    while isinstance(parts[-1].__cause__, type(e)):
        parts.append(parts[-1].__cause__)
    return CHAINED.join(f"{type(x).__module__}.{type(x).__name__}: {x}" for x in reversed(parts))


def _head_and_tail(log: str, keep: int = 40000) -> str:
    """A long log cut to its head (the first error: a long note list or a kernel's source
    must not push it out) and its tail."""
    return log if len(log) <= 2 * keep else log[:keep] + "\n...\n" + log[-keep:]


def _cached(key: str, fn):
    path = CACHE_DIR / f"{key}.json"
    if path.exists():
        return CompileResult(**json.loads(path.read_text()))
    result = fn()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(result)))
    tmp.replace(path)
    return result


def compile_cuda(source: str, arch: str, kernel: str = "") -> CompileResult:
    """nvcc -c for one NVIDIA target; reads registers and smem from -Xptxas -v."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise MissingCompiler("nvcc not found: install the CUDA toolkit (nvcc 12.4 or newer) to compile CUDA candidates")
    key = hashlib.sha256(f"nvcc2|{arch}|{source}".encode()).hexdigest()

    def run():
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "candidate.cu"
            src.write_text(source)
            cmd = [nvcc, "-c", "-std=c++17", "-gencode", NVCC_GENCODE[arch], "-Xptxas", "-v",
                   str(src), "-o", str(Path(tmp) / "candidate.o")]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        log = proc.stdout + proc.stderr
        smem = regs = None
        target = re.escape(kernel) if kernel else r"\w+"
        m = re.search(rf"Function properties for {target}\n.*?\n.*?Used (\d+) registers.*?(?:(\d+) bytes smem)?", log)
        for m in re.finditer(rf"Compiling entry function '({target})'.*?Used (\d+) registers[^\n]*", log, re.S):
            regs = int(m.group(2))
            sm = re.search(r"(\d+) bytes smem", m.group(0))
            smem = int(sm.group(1)) if sm else 0
            if kernel:
                break
        ok = proc.returncode == 0
        return CompileResult(ok, _head_and_tail(log), smem, regs, None if ok else classify(log))
    return _cached(key, run)


HIP_SHIM = """#pragma once
// ROCm 6 spells the bf16 header and types hip_bf16.h / __hip_bfloat16 / __hip_bfloat162; older
// headers (Debian's ROCm 5.2) have hip_bfloat16.h / hip_bfloat16. This maps the ROCm 6 names
// candidates use onto them, for compile checks only.
#include <hip/hip_bfloat16.h>
typedef hip_bfloat16 __hip_bfloat16;
struct __hip_bfloat162 { __hip_bfloat16 x, y; };
__host__ __device__ inline float __bfloat162float(__hip_bfloat16 v) { return float(v); }
__host__ __device__ inline __hip_bfloat16 __float2bfloat16(float f) { return __hip_bfloat16(f); }
__host__ __device__ inline float2 __bfloat1622float2(__hip_bfloat162 v) { return make_float2(float(v.x), float(v.y)); }
__host__ __device__ inline __hip_bfloat162 __float22bfloat162_rn(float2 f) {
    __hip_bfloat162 r; r.x = __hip_bfloat16(f.x); r.y = __hip_bfloat16(f.y); return r;
}
"""


def find_hip_compiler() -> str | None:
    """A clang that targets gfx942 with HIP headers: hipcc (ROCm 6+) or clang++-17..22."""
    if shutil.which("hipcc") and Path("/opt/rocm").exists():
        return shutil.which("hipcc")
    if not Path("/usr/include/hip/hip_runtime.h").exists():
        return None
    for version in range(22, 16, -1):
        path = shutil.which(f"clang++-{version}")
        if path:
            return path
    return None


def compile_hip(source: str, arch: str = "gfx942", kernel: str = "") -> CompileResult:
    """Device-only HIP compile for an AMD target; LDS and VGPRs from clang's resource remarks."""
    clang = find_hip_compiler()
    if clang is None:
        raise MissingCompiler("no HIP compiler: install ROCm 6 (hipcc) or Debian's clang-19 and libamdhip64-dev")
    key = hashlib.sha256(f"hip5|{arch}|{clang}|{HIP_SHIM}|{source}".encode()).hexdigest()

    def run():
        with tempfile.TemporaryDirectory() as tmp:
            inc = Path(tmp) / "include"
            if not Path("/usr/include/hip/hip_bf16.h").exists() and "/opt/rocm" not in clang:
                (inc / "hip").mkdir(parents=True)
                (inc / "hip" / "hip_bf16.h").write_text(HIP_SHIM)
            src = Path(tmp) / "candidate.hip"
            src.write_text(source)
            cmd = [clang, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-nogpulib", "-S", "-O2",
                   "-std=c++17", f"-I{inc}", "-Rpass-analysis=kernel-resource-usage", str(src), "-o", os.devnull]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        log = proc.stdout + proc.stderr
        # clang prints one remark block per kernel, headed "Function Name: NAME"
        blocks = re.split(r"remark: Function Name: ", log)[1:]
        mine = [b for b in blocks if not kernel or b.startswith(kernel)] or blocks
        lds = [int(x) for b in mine for x in re.findall(r"LDS Size \[bytes/block\]: (\d+)", b)]
        vgprs = [int(x) for b in mine for x in re.findall(r"VGPRs: (\d+)", b)]
        ok = proc.returncode == 0
        errors = without_remarks(log)
        return CompileResult(ok, _head_and_tail(errors), max(lds) if lds else None, max(vgprs) if vgprs else None,
                             None if ok else classify(errors))
    return _cached(key, run)


def without_remarks(log: str) -> str:
    """clang's log less its remarks (-Rpass-analysis), each with the source excerpt under it.

    >>> without_remarks("a.hip:3:1: remark: Function Name: k\\n    3 | void k() {\\n      | ^\\na.hip:4:2: error: x")
    'a.hip:4:2: error: x'
    """
    out, in_remark = [], False
    for line in log.splitlines():
        if "remark:" in line:
            in_remark = True
        elif not (in_remark and re.match(r"\s*\d* \| ", line)):
            in_remark = False
            out.append(line)
    return "\n".join(out)


def _import_triton():
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")   # Triton's current default, stated: no warning
    if os.environ.get("TRITON_INTERPRET") == "1":
        # @triton.jit then makes interpreter functions, which compile for no GPU target: every candidate would
        # "fail" with the interpreter's AttributeError, and that answer would be cached as the compiler's
        raise MissingCompiler("TRITON_INTERPRET=1 is set: Triton's interpreter compiles for no GPU target; "
                              "unset it to compile Triton candidates")
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        raise MissingCompiler("triton is not installed: pip install 'kernelstrain[verify]' (triton>=3.3)") from None
    return triton, GPUTarget, ASTSource


def triton_target(arch: str):
    _, GPUTarget, _ = _import_triton()
    if arch.startswith("gfx"):
        return GPUTarget("hip", arch, 64)
    return GPUTarget("cuda", int(re.sub(r"\D", "", arch)), 32)


def load_triton_source(source: str) -> dict:
    """Exec a rendered Triton candidate and return its namespace. Without torch its `import
    torch` gets a stand-in for the exec only: the wrapper code is defined, never run, and the
    stand-in never stays in sys.modules (a later `import torch` must still fail)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, dir=tempfile.gettempdir()) as f:
        f.write(source)
        path = f.name
    # triton.jit reads the function source through inspect, so it must live in a file
    ns: dict = {"__name__": f"candidate_{hashlib.sha256(source.encode()).hexdigest()[:12]}", "__file__": path}
    with _torch_or_stand_in():
        exec(compile(source, path, "exec"), ns)
    return ns


@contextlib.contextmanager
def _torch_or_stand_in():
    """torch importable for the block: the real one, or a stand-in removed afterwards."""
    stub = None
    if "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except Exception:  # absent or broken
            stub = types.ModuleType("torch")
            stub.Tensor = object
            sys.modules["torch"] = stub
    try:
        yield
    finally:
        if stub is not None and sys.modules.get("torch") is stub:
            del sys.modules["torch"]


def launch_specialization(spec) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) as Triton's launcher specializes a call: pointers from
    torch are 16-byte aligned, an integer argument equal to 1 becomes a constant, and one that
    is a multiple of 16 carries tt.divisibility 16 (spec.ints holds the launch values)."""
    signature, constexprs, attrs = dict(spec.signature), dict(spec.constexprs), {}
    for i, (name, ty) in enumerate(spec.signature.items()):
        value = spec.ints.get(name)
        if ty.startswith("*") or (ty in ("i32", "i64") and value is not None and value % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif ty in ("i32", "i64") and value == 1:
            signature[name], constexprs[name] = "constexpr", 1
    return signature, constexprs, attrs


def specialization_key(specs: list) -> str:
    """8 hex digits naming what Triton compiles a candidate's kernels at, beyond their source:
    each kernel's launch_specialization (argument types, constexprs such as a HEAD_DIM the
    wrapper reads off the tensors, integers equal to 1, multiples of 16), warps and stages. The
    same source compiles to other tiles and buffers at another specialization (flash_prefill on
    MI300X: 163,840 B of shared memory at HEAD_DIM 128, 98,304 B at 64). fp16 and bf16
    pointers count as one: their element is the same size, and every pair of the corpus
    compiled both ways gave the same shared memory (tests/test_triton_smem.py).

    >>> from kernelstrain.ops.base import KernelSpec
    >>> spec = KernelSpec("k", {"x_ptr": "*fp16", "n": "i32"}, ints={"n": 4096})
    >>> specialization_key([spec]) == specialization_key([KernelSpec("k", {"x_ptr": "*bf16", "n": "i32"}, ints={"n": 64})])
    True
    >>> specialization_key([spec]) == specialization_key([KernelSpec("k", {"x_ptr": "*fp16", "n": "i32"}, ints={"n": 100})])
    False
    """
    def canonical(spec) -> list:
        signature, constexprs, attrs = launch_specialization(spec)
        signature = {k: re.sub(r"^\*bf16$", "*fp16", t) for k, t in signature.items()}
        return [spec.name, signature, constexprs, sorted(str(a) for a in attrs), spec.num_warps, spec.num_stages]
    text = json.dumps([canonical(s) for s in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def compile_triton(source: str, specs: list, arch: str) -> CompileResult:
    """Compile every kernel spec of a rendered Triton candidate for one target."""
    spec_text = json.dumps([[s.name, s.signature, s.constexprs, s.num_warps, s.num_stages, s.ints] for s in specs])
    key = hashlib.sha256(f"triton4|{arch}|{spec_text}|{source}".encode()).hexdigest()

    def run():
        triton, _, ASTSource = _import_triton()
        smem = 0
        try:
            ns = load_triton_source(source)
            for s in specs:
                signature, constexprs, aligned = launch_specialization(s)
                src = ASTSource(fn=ns[s.name], signature=signature, constexprs=constexprs, attrs=aligned)
                out = triton.compile(src, target=triton_target(arch),
                                     options={"num_warps": s.num_warps, "num_stages": s.num_stages})
                smem = max(smem, int(out.metadata.shared))
        except Exception as e:  # the compiler's own exception text is the log
            log = exception_text(e)
            return CompileResult(False, _head_and_tail(log), None, None, classify(log))
        return CompileResult(True, "", smem, None, None)
    return _cached(key, run)
