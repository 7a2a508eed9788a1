"""Every text the model sees, rendered from structured results: the system and task
prompts, compiler and runtime errors in each tool's own words (nvcc, ptxas, hipcc/clang,
Triton, the CUDA/HIP runtime), correctness reports in torch.testing.assert_close's form,
benchmark results, and the compact history of the step-level rows.

Texts report a step and the best so far, never anything later. Where a text has free
choices (which element is reported, numbers of a mismatch) they come from the `wording`
RNG stream only, so a wording change re-rolls no trajectory.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from statistics import NormalDist

from . import knobs
from .fields import as_dict
from .gpus import FEATURE_MIN_TARGET
from .ops.base import Launch, OpModule, Task, Variant
from .ops.misc import rope_spec
from .ops.unroll import NAMES as UNROLL_NAMES
from . import corpus, over_read_texts, runtime_texts
from .ops import over_read
from .slips import nvcc, scopes, triton_slips

LANG = {"cuda": "cuda", "triton": "python"}
LANG_NAME = {"cuda": "CUDA C++", "triton": "Triton"}

SYSTEM = ("You are a GPU kernel engineer. Each turn, reply with one complete kernel source file in a "
          "single fenced code block and nothing else. The harness compiles it, checks it against the "
          "PyTorch reference and benchmarks it on the target GPU (L2 flushed between runs); a candidate "
          "is kept only when it beats the best by more than the measurement noise.")


def fence(code: str, impl: str) -> str:
    """`code` in a fence that names its language: a KernelBench solution (a fused program's
    candidate, its baseline the eager program) is Python whatever language its kernels are in.

    >>> fence("import torch\\nfrom torch.utils.cpp_extension import load_inline", "cuda").split("\\n")[0]
    '```python'
    >>> fence("#include <cuda_fp16.h>", "cuda").split("\\n")[0]
    '```cuda'
    """
    return f"```{'python' if _SOLUTION_HEAD.match(code) else LANG[impl]}\n{code}\n```"


_SOLUTION_HEAD = re.compile(r"\s*(?:import|from)\s+\w")    # a Python file: no CUDA source opens so
_SOLUTION_KERNELS = {"cuda": "its CUDA kernels built with load_inline", "triton": "its Triton kernels in the file"}


def is_solution(module: OpModule, task: Task) -> bool:
    """Whether a candidate is a whole KernelBench solution (class ModelNew; a fused program's),
    not a kernel behind a fixed entry point."""
    return module.signature(task).startswith("class ModelNew")


def time_unit(baseline_ms: float) -> str:
    """The one time unit of a conversation, chosen by the magnitude of the baseline (the first
    time it reports, and the largest it needs): 'us' under 1 ms, else 'ms'."""
    return "us" if baseline_ms < 1 else "ms"


def fmt_ms(ms: float, unit: str = "ms") -> str:
    """A time in `unit` with four significant digits, in fixed point.

    >>> fmt_ms(0.24093, "us"), fmt_ms(0.0021, "us"), fmt_ms(1402.5), fmt_ms(0.051234)
    ('240.9 us', '2.100 us', '1402 ms', '0.05123 ms')
    """
    value = ms * 1000 if unit == "us" else ms
    decimals = min(8, max(0, 3 - math.floor(math.log10(value)))) if value > 0 else 0
    return f"{value:.{decimals}f} {unit}"


def clock(seconds: float) -> str:
    """H:MM:SS of a simulated elapsed time: clock(3725) == '1:02:05'."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def hms(seconds: float) -> str:
    """The stamp a feedback turn opens with: '[t+1:02:05] '."""
    return f"[t+{clock(seconds)}] "


# -- task prompts ------------------------------------------------------------------

def task_prompt(module: OpModule, task: Task, baseline_code: str, baseline_ms: float, reference: str,
                baseline_facts: str = "") -> str:
    """The first user turn: the task, the reference program and the baseline to beat, with what the
    harness measured of it (`baseline_facts`: baseline_line's, where the caller has them)."""
    return (f"{task_header(module, task, reference)}\n"
            f"{baseline_line(baseline_ms, baseline_facts)}\n{fence(baseline_code, module.impl)}\n"
            f"{reply_line(module, task)}")


def baseline_line(baseline_ms: float, facts: str = "") -> str:
    """The baseline's time and, after it, what the harness's build and profiler report of it (`facts`:
    ", R registers, S B shared memory" and the profiler's two lines, as a correct step's feedback prints
    them: episodes.baseline_facts). Before, the prompts gave the baseline's time alone while the first
    move answered its profile (the bound a first climb reads: qa's climbs_against_the_profile), which
    the model never saw.

    >>> baseline_line(0.4213)
    'Baseline: 421.3 us'
    >>> print(baseline_line(0.4213, ", 20 registers, 0 B shared memory\\nprofile: 9 CTAs"))
    Baseline: 421.3 us, 20 registers, 0 B shared memory
    profile: 9 CTAs
    """
    return f"Baseline: {fmt_ms(baseline_ms, time_unit(baseline_ms))}{facts}"


def reply_line(module: OpModule, task: Task) -> str:
    """What the answer is: the kernel's source, or a whole solution file (is_solution)."""
    if is_solution(module, task):
        return f"Reply with the complete solution file (Python: class ModelNew, {_SOLUTION_KERNELS[module.impl]}) in one fenced block."
    return f"Reply with the complete {LANG_NAME[module.impl]} source in one fenced block."


def _task_line(module: OpModule, task: Task) -> str:
    """A fused program's baseline is the PyTorch program itself, not a kernel to speed up."""
    if is_solution(module, task):
        return f"make this PyTorch program faster with custom {LANG_NAME[module.impl]} kernels"
    return f"make this {LANG_NAME[module.impl]} kernel faster"


def task_header(module: OpModule, task: Task, reference: str) -> str:
    gpu = task.gpu
    shape = ", ".join(f"{k}={v}" for k, v in task.shape)
    # a dim's meaning where it says more than its name (a fused program's dims are named by their meaning)
    dims = "; ".join(f"{k}: {v}" for k, v in module.dims.items() if v != k)
    return (
        f"Task: {_task_line(module, task)} — {module.title}.\n"
        f"GPU: {gpu.name} ({gpu.arch}, {gpu.sms} {'CUs' if gpu.vendor == 'amd' else 'SMs'}, "
        f"{gpu.bw_tbs} TB/s, {gpu.smem_per_block} B shared memory per block, warp {gpu.warp})\n"
        f"dtype: {task.dtype}; shape: {shape}{f' ({dims})' if dims else ''}\n"
        f"Semantics: {module.desc}\n"
        f"Entry point: {module.signature(task)}\n"
        f"Reference (PyTorch):\n{fence(reference.rstrip(), 'triton')}"
    )


# -- compilers ---------------------------------------------------------------------

def typo_error(typo, impl: str, hip_arch: str = "") -> str:
    """An undefined identifier as nvcc, hipcc (clang, compiling for `hip_arch`) or Triton reports
    it (slips/: nvcc echoes the preprocessed line, once per scope; clang every use, as written,
    in its order, at most 19 and the fatal one; Triton its CompilationError, re-raised at each
    call on the way from the kernel when the name is in a @triton.jit helper)."""
    lines, name = list(typo.lines), typo.name
    if impl == "triton":
        j, col = triton_slips.first_use(lines, typo.decl, name, typo.kernel_line) or typo.uses[0]
        text = triton_slips.compilation_error(lines, typo.kernel_line, j, col, f"NameError('{name} is not defined')")
        calls = [triton_slips.compilation_error(lines, d, k, c, None)
                 for d, k, c in triton_slips.use_chain(lines, typo.decl, name, typo.kernel_line)]
        return triton_slips.CHAINED.join([text, *calls])
    if hip_arch:
        uses = scopes.clang_uses(lines, typo.decl, name, typo.new)
        over = len(uses) >= HIP_ERROR_LIMIT
        msgs = [f"candidate.hip:{j + 1}:{col + 1}: error: use of undeclared identifier '{name}'\n"
                f"{j + 1:>5} | {lines[j]}\n      | {' ' * col}^" for j, col in uses[:HIP_ERROR_LIMIT - 1 if over else None]]
        if over:        # the 20th error is the fatal one
            msgs.append("fatal error: too many errors emitted, stopping now [-ferror-limit=]")
        n = HIP_ERROR_LIMIT if over else len(msgs)
        return "\n".join(msgs) + f"\n{n} error{'s' if n > 1 else ''} generated when compiling for {hip_arch}."
    uses = scopes.undefined_uses(lines, typo.decl, name, nvcc.macros(lines), typo.new)
    return nvcc.report([nvcc.error_block(j, f'identifier "{name}" is undefined', shown, col) for j, col, shown in uses])


HIP_ERROR_LIMIT = 20      # clang's -ferror-limit: 19 errors shown, the 20th is "too many errors emitted"


def _ptx_file(task: Task) -> str:
    tag = int(hashlib.sha256(task.key.encode()).hexdigest()[:4], 16)
    return f"/tmp/tmpxft_{tag:08x}_00000000-6_candidate.ptx"


# ptxas's text per feature, and the PTX mnemonics in a source that use it
_PTX_FEATURE_TEXT = {
    "wgmma": "Instruction '{insn}' not supported on .target '{arch}'",
    "tma": "Feature 'cp.async.bulk.tensor' requires .target sm_90 or higher",
    "cluster": "Feature '.shared::cluster' requires .target sm_90 or higher",
    "fp8": "Feature 'mma with FP8 floating point type' requires .target sm_89 or higher",
    "cp_async": "Feature 'cp.async' requires .target sm_80 or higher",
    "ldmatrix": "Feature 'ldmatrix' requires .target sm_75 or higher",
    "mma": "Feature 'mma with .m16n8k16' requires .target sm_80 or higher",
    "bf16": "Feature 'bf16' requires .target sm_80 or higher",
}
# an fp8 conversion is its own feature to ptxas (nvcc 13.0, fp8_quant_cuda on sm_80)
_CVT_FP8_TEXT = "Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89 or higher"
_FP4_TEXT = ("Instruction 'mma with block scale' not supported on .target '{arch}'",
             "Feature '.kind::mxf8f6f4' not supported on .target '{arch}'",
             "Feature '.block_scale' not supported on .target '{arch}'",
             "Feature '.scale_vec::1X' not supported on .target '{arch}'")
_PTX_USES = {
    "wgmma": re.compile(r"\bwgmma\.(?:fence|mma_async|commit_group|wait_group)"),
    "tma": re.compile(r"cp\.async\.bulk\.tensor"),
    "cluster": re.compile(r"\.shared::cluster"),
    "fp8": re.compile(r"mma\.sync[.\w]*e4m3|\bcvt\.rn\.satfinite\.e[45]m[23]x2"),
    "cp_async": re.compile(r"\bcp\.async\.(?:c[ag]|commit_group|wait_group)"),
    "ldmatrix": re.compile(r"\bldmatrix\."),
    "mma": re.compile(r"\bmma\.sync\."),
}


def arch_error(features, task: Task, module: OpModule, code: str | None = None) -> str:
    """The tool's text when a candidate uses features (one name or several) that the GPU lacks.
    With the candidate's source, what the real tool printed for that exact code on that target
    (kernelstrain/corpus, built by scripts/arch_corpus.py: ptxas lists every offending PTX line
    with its number, clang stops in the front end at the first CUDA-only construct, Triton
    raises as it builds the kernel's signature). Without it, or for a candidate the corpus lacks
    (a custom profile's; arch_recorded), the first offending feature as the tool words it."""
    if code is not None:
        text = corpus.lookup(module.name, task.gpu.arch, code)
        if text:
            return text.replace(corpus.PTX_FILE, _ptx_file(task))
    return _arch_rule(features, task, module, code)


def arch_recorded(module: OpModule, task: Task, code: str) -> bool:
    """Whether the corpus holds the real tool's text for this arch-failing candidate."""
    return bool(corpus.lookup(module.name, task.gpu.arch, code))


def _arch_rule(features, task: Task, module: OpModule, code: str | None) -> str:
    features = [features] if isinstance(features, str) else sorted(features)
    gpu = task.gpu
    if module.impl == "triton":
        if "fp8" in features and code:
            # Triton 3.9 on sm_80/86: the kernel's fp8e4nv pointer fails as its signature is built,
            # reported at the launched kernel's `def` (1:0)
            lines = code.split("\n")
            kernel = triton_slips.launched_kernels(lines)[0]
            return triton_slips.compilation_error(
                lines, kernel, kernel, 0, "ValueError(\"type fp8e4nv not supported in this architecture. "
                                          "The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")")
        return (f"triton.compiler.errors.CompilationError: {features[0]} requires "
                f"{FEATURE_MIN_TARGET[features[0]]}; target is {gpu.arch}")
    if gpu.vendor == "amd":
        # Any PTX-level feature reaches the AMDGPU assembler as inline asm it cannot parse.
        return ("<inline asm>:1:2: error: instruction not supported on this GPU\n"
                f"candidate.hip: error: cannot compile inline asm\n1 error generated when compiling for {gpu.arch}.")
    lines = []
    for feature in features:
        if feature == "fp4":
            lines += [(20 + _h(task.key, feature), t) for t in _FP4_TEXT]
            continue
        text = _PTX_FEATURE_TEXT.get(feature, f"Feature '{feature}' requires .target "
                                              f"{FEATURE_MIN_TARGET[feature]} or higher")
        found = _ptx_uses(feature, code) if code else []
        lines += [(ptx, (_CVT_FP8_TEXT if insn.startswith("cvt") else text).format(insn=insn, arch=gpu.arch))
                  for ptx, insn in found] or \
            [(20 + _h(task.key, feature), text.format(insn="wgmma.fence", arch=gpu.arch))]
    return "".join(f"ptxas {_ptx_file(task)}, line {n}; error   : {t.format(arch=gpu.arch)}\n"
                   for n, t in sorted(lines)[:24]) + "ptxas fatal   : Ptx assembly aborted due to errors"


def _h(*parts) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:2], 16)


def _ptx_uses(feature: str, code: str) -> list[tuple[int, str]]:
    """(PTX line, mnemonic) of each use of `feature` in the source, in order. The PTX line
    grows with the source line (each C++ line lowers to a few PTX lines)."""
    pat = _PTX_USES.get(feature)
    out = []
    if pat is None:
        return out
    for i, line in enumerate(code.split("\n")):
        for m in pat.finditer(line):
            out.append((40 + 3 * i + len(out), m.group(0)))
    return out[:24]


def smem_error(smem: int, cap: int, variant: Variant, module: OpModule, task: Task, code: str = "") -> str:
    """Shared memory over `cap`: Triton's launcher refuses the kernel (OutOfResources, quoting
    its metadata.shared: `smem` is Triton's own figure where kernelstrain/corpus holds it, see
    sim.simulate); ptxas or the AMDGPU backend rejects static __shared__ over the target's
    limit (sim.static_smem_cap); a dynamic request over the device's limit builds, and the
    launch fails (the candidate's cudaFuncSetAttribute is not checked: the launch's error is)."""
    if module.impl == "triton":
        return (f"triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {smem}, "
                f"Hardware limit: {cap}. Reducing block sizes or `num_stages` may help.")
    kernel = f"{module.op}_kernel"
    if variant.smem == "static" and task.is_hip:     # the AMDGPU backend, at the kernel's name
        j, col = _definition(code.split("\n"), kernel)
        return (f"candidate.hip:{j + 1}:{col + 1}: error: local memory ({smem}) exceeds limit ({cap}) in '{kernel}'\n"
                f"{j + 1:>5} | {code.split(chr(10))[j]}\n      | {' ' * col}^\n"
                f"1 error generated when compiling for {task.gpu.arch}.")
    if variant.smem == "static":
        return f"ptxas error   : Entry function '{kernel}' uses too much shared data (0x{smem:x} bytes, 0x{cap:x} max)"
    return runtime_texts.accelerator_error("invalid argument", task.is_hip)


def _definition(lines: list, name: str) -> tuple[int, int]:
    """(line, column) of the name in the definition of kernel `name` (its first `name(`)."""
    for j, line in enumerate(lines):
        m = re.search(rf"\b{name}\s*\(", line)
        if m:
            return j, m.start()
    return 0, 0


def resources_error(launch: Launch, module: OpModule, task: Task) -> str:
    """A launch the hardware cannot hold (block too big, or registers x threads over the
    register file): it compiles, and the runtime refuses the launch."""
    what = "invalid configuration argument" if launch.threads > 1024 else "too many resources requested for launch"
    if launch.threads > 1024 and module.impl == "cuda" and not task.is_hip:
        # a block past 1024 threads of a kernel whose __launch_bounds__ says so (every such candidate
        # here): the runtime refuses it as an invalid value (device job reader/j2, an H100, CUDA 13)
        what = "invalid argument"
    if module.impl == "triton":
        return f"RuntimeError: Triton Error [{'HIP' if task.is_hip else 'CUDA'}]: {what}"
    return runtime_texts.accelerator_error(what, task.is_hip)


def optin_error(task: Task) -> str:
    """A launch asking for more than 48 KB of dynamic shared memory without the opt-in."""
    return runtime_texts.accelerator_error("invalid argument", task.is_hip)


# -- a KernelBench solution's CUDA, built by load_inline -------------------------------
# A fused candidate is a Python file: load_inline writes its CUDA string to cuda.cu in torch's
# extension cache (three #include lines first, so nvcc's line numbers are the file's) and builds
# it with ninja beside the binding's main.cpp. A build error reaches the harness as the
# RuntimeError load_inline raises with ninja's log: the failed nvcc edge, its command again under
# FAILED (ninja 1.13 writes the exit code: `FAILED: [code=2] cuda.cuda.o `), nvcc's (or ptxas's)
# text with the cache path, the main.cpp edge that was running beside it, ninja's last line. Every
# line as torch 2.11.0+cu130 printed it on the measured H100 (device job reader/j1, 2026-12-07:
# tests/fixtures/load_inline_h100/): its Python 3.12 venv in /opt/torch/.venv, CC / CXX set to
# /opt/gcc/bin/gcc and g++ (nvcc gets -ccbin, main.cpp is built by g++), nvcc's dependencies as
# -MD -MF, and one -gencode, the card's own arch (TORCH_CUDA_ARCH_LIST set to it: sm_90a there).
_LOAD_INLINE = re.compile(r'load_inline\(\s*name="(\w+)"')
TORCH_EXTENSIONS = "/root/.cache/torch_extensions/py312_cu130"
_SYSTEM_INCLUDES = ("/opt/torch/.venv/lib/python3.12/site-packages/torch/include",
                    "/opt/torch/.venv/lib/python3.12/site-packages/torch/include/torch/csrc/api/include",
                    "/usr/local/cuda/include", "/usr/include/python3.12")
_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ "
               "-D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr")


def load_inline_error(text: str, code: str, arch: str) -> str:
    """`text`, a build error of nvcc or ptxas for `code`, as the harness sees it when `code` is
    a solution that builds its CUDA with load_inline on a card of `arch` (sm_90a: cc 9.0); any
    other text or code as it is (a launch's error is raised by the launch, not the build).

    >>> code = 'fused_ops = load_inline(\\n    name="fused_demo_0a1b",\\n    cpp_sources=cpp_source,'
    >>> text = 'candidate.cu(8): error: expected a ";"\\n  }\\n  ^\\n\\n1 error detected in the compilation of "candidate.cu".'
    >>> out = load_inline_error(text, code, "sm_80").splitlines()
    >>> out[0][:91], out[1], out[2].endswith("-c /root/.cache/torch_extensions/py312_cu130/fused_demo_0a1b/cuda.cu -o cuda.cuda.o ")
    ("RuntimeError: Error building extension 'fused_demo_0a1b': [1/3] /usr/local/cuda/bin/nvcc -M", 'FAILED: [code=2] cuda.cuda.o ', True)
    >>> out[3], out[-1]
    ('/root/.cache/torch_extensions/py312_cu130/fused_demo_0a1b/cuda.cu(8): error: expected a ";"', 'ninja: build stopped: subcommand failed.')
    """
    m = _LOAD_INLINE.search(code or "")
    if m is None or not isinstance(text, str) or not text.startswith((f"{nvcc.FILE}(", "ptxas")):
        return text
    name = m.group(1)
    where = f"{TORCH_EXTENSIONS}/{name}"
    cc = arch.removeprefix("sm_")                  # 90a: the arch-specific target keeps its suffix
    common = f"-DTORCH_EXTENSION_NAME={name} -DTORCH_API_INCLUDE_EXTENSION_H " + \
        " ".join(f"-isystem {p}" for p in _SYSTEM_INCLUDES)
    nvcc_cmd = (f"/usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d -ccbin /opt/gcc/bin/gcc {common} {_NVCC_FLAGS} "
                f"-gencode=arch=compute_{cc},code=sm_{cc} --compiler-options '-fPIC' -O3 -std=c++17 "
                f"-c {where}/cuda.cu -o cuda.cuda.o ")
    cxx_cmd = f"/opt/gcc/bin/g++ -MMD -MF main.o.d {common} -fPIC -std=c++17 -c {where}/main.cpp -o main.o "
    log = text.replace(nvcc.FILE, f"{where}/cuda.cu").rstrip("\n")
    return (f"RuntimeError: Error building extension '{name}': [1/3] {nvcc_cmd}\nFAILED: [code=2] cuda.cuda.o \n"
            f"{nvcc_cmd}\n{log}\n[2/3] {cxx_cmd}\nninja: build stopped: subcommand failed.")


def fails_at_launch(failure: str | None, error: str | None) -> bool:
    """Whether a compile_error step's tool accepted the code and the launch failed: a block the
    hardware cannot hold (`resources`), or a shared-memory request the runtime refuses (`smem`
    whose text is the runtime's, above: a dynamic request over the cap, a missing opt-in);
    ptxas, the AMDGPU backend and Triton report their shared-memory overflows, and every
    arch and syntax failure, at build time. The one test for feedback and verify alike.

    >>> fails_at_launch("smem", "torch.AcceleratorError: CUDA error: invalid argument")
    True
    >>> fails_at_launch("smem", "RuntimeError: Error building extension 'k': [1/3] /usr/local/cuda/bin/nvcc ...")
    False
    >>> fails_at_launch("syntax", 'x.cu(9): error: identifier "n" is undefined\\n  cudaFuncSetAttribute(k, '
    ...                 'cudaFuncAttributeMaxDynamicSharedMemorySize, smem) failed')
    False
    """
    if failure == "resources":
        return True
    first = (error or "").split("\n", 1)[0]
    # (datasets written before the runtime's own text recorded "cudaFuncSetAttribute(...) failed: ...")
    return failure == "smem" and (first.startswith(("torch.AcceleratorError: ", "RuntimeError: "))
                                  and not first.startswith(_BUILD_FAILED)          # load_inline's build
                                  or "MaxDynamicSharedMemorySize" in first and ") failed: " in first)


_BUILD_FAILED = "RuntimeError: Error building extension '"


# -- runtime faults and correctness reports ------------------------------------------

def fault_text(bug: str, module: OpModule, task: Task, rng) -> str:
    """A kernel that crashes, as the CUDA or HIP runtime (through PyTorch) reports it."""
    return runtime_texts.fault_text(bug, task.is_hip, rng)


def _output_shape(module: OpModule, task: Task) -> tuple[tuple, str]:
    """(shape, dtype) of the output the correctness check compares first: the entry point's
    first result (ops/contract.py)."""
    _, shape, dtype = module.entry.outputs(task)[0]
    return tuple(shape), dtype


# The RMS of a GEMM-like output on the harness's inputs (each spec's `inputs`/`init`), over
# sqrt(reduction length) where the weights are raw randn, else absolute: gemm_fp16 / split-K /
# conv2d / fused_qkv_rope divide their weight by sqrt(reduction) (RMS 1), fp8_blockwise's scales
# are written for RMS ~1, fp8's std-2 operands times 0.5 and K^-1/2 give 2, int8's uniform
# operands (mean square 5461.5) times rand/64 and rand/(64 sqrt K) give 5461.5 / 12288.
_SCALED = {"gemm_fp16": 1.0, "gemm_splitk": 1.0, "gemm_fp8_blockwise": 1.0, "gemm_fp8": 2.0,
           "gemm_int8": 5461.5 / 12288, "moe_scatter": 1.0, "moe_combine": 1.0}
E2M1_MS = 137 / 16                     # mean square of the 16 e2m1 codes (uniform random bytes)


def _fp4_scales(task: Task) -> tuple[float, float]:
    """(E s, E s^2) of gemm_fp4's block scales: U(1/16, 5/16) e4m3 bytes (nvfp4, G = 16), else the
    E8M0 powers 2^-1 .. 2^-4 alike."""
    if task.dims.get("G") == 16:
        return 0.1875, (0.3125 ** 3 - 0.0625 ** 3) / 3 / 0.25
    return sum(2.0 ** -e for e in range(1, 5)) / 4, sum(4.0 ** -e for e in range(1, 5)) / 4


def _fp4_unscaled(task: Task) -> float:
    """gemm_fp4's missing_scale dequantizes both operands without their block scales: the error
    sum a_k b_k (1 - s_a s_b) over the reference's RMS, sqrt(E (1 - s_a s_b)^2) / E s^2 (every
    rung drops both: a shared dequant, or sa and sb set to 1)."""
    mean, square = _fp4_scales(task)
    return math.sqrt(1 - 2 * mean * mean + square * square) / square


def _output_scale(module: OpModule, task: Task) -> float:
    """Typical magnitude (RMS) of the reference output on the harness's inputs."""
    dims = task.dims
    if module.op in ("reduction", "grad_clip"):
        return math.sqrt(dims.get("N", 1))
    if module.op in _SCALED:
        return _SCALED[module.op]
    if module.op == "gemm_int4":           # (q - 8) * s: q uniform 0..15 (ms 21.5), s ~ U(0.005, 0.015)
        return math.sqrt(dims["K"] * 21.5 * (0.01 ** 2 + 0.01 ** 2 / 12))
    if module.op == "gemm_fp4":            # e2m1 codes times a block scale: U(1/16, 5/16) or 2^-4..2^-1
        return math.sqrt(dims["K"]) * E2M1_MS * _fp4_scales(task)[1]
    if "K" in dims and module.family in ("matmul", "moe"):    # gemv, grouped_gemm: randn weights
        return math.sqrt(dims["K"])
    if module.op == "softmax":
        return 1.0 / dims["C"]
    if module.op == "prefix_scan":          # cumsum of U(0, 1): 0.5 j at column j, RMS 0.5 C / sqrt(3)
        return 0.5 * dims["C"] / math.sqrt(3)
    if module.family == "sampling":
        return dims.get("V", 32000) / 2
    return 1.0


def _reference_above(module: OpModule, task: Task):
    """Where the reference is far from N(0, scale): the share of its elements above t. Softmax of
    4 * randn rows: y = exp(4z) / S with S ~ C e^8 (E[e^(4z)] = e^8), above t where
    z > ln(t C e^8) / 4 (bf16: ~11 of a 32000 row above 2e-2; softmax_cuda's ABOVE_TOLERANCE_A_ROW);
    none above 1."""
    if module.op != "softmax":
        return None
    c = task.dims["C"]
    return lambda t: 0.0 if t >= 1 else 0.5 * math.erfc(math.log(max(t * c * math.exp(8), 1.0)) / 4 / math.sqrt(2))


# a norm reference's weight and bias (rmsnorm_spec, add_rmsnorm_spec, layernorm_spec): 1 + 0.1 z and 0.1 z a column
WEIGHT_SPREAD = BIAS_SPREAD = 0.1
_WEIGHT_NEAR_ONE = f"self.weight = nn.Parameter(1 + {WEIGHT_SPREAD} * torch.randn(D)"
_SMALL_BIAS = f"self.bias = nn.Parameter({BIAS_SPREAD} * torch.randn(D)"
_NORMS_FORWARD = ("rmsnorm", "add_rmsnorm", "layernorm")      # whose first output is weight * the normalized x


def _dropped_weight(module: OpModule, variant: Variant, task: Task) -> tuple | None:
    """(weight spread, bias spread) of a norm whose missing_scale blanks the weight multiply
    (`{"scale": ""}`): its output is the normalized value (plus the bias), runtime_texts.weight_mismatch_text;
    None for any other bug site or reference."""
    if dict(variant.edits).get("missing_scale") != {"scale": ""} or module.op not in _NORMS_FORWARD:
        return None
    ref = module.reference(task)
    if _WEIGHT_NEAR_ONE not in ref:
        return None
    return (WEIGHT_SPREAD, BIAS_SPREAD if _SMALL_BIAS in ref else 0.0) if "self.bias" not in ref or _SMALL_BIAS in ref \
        else None


# wrong_init sites whose every output element comes out too large by the accumulators that started
# at 1 instead of 0 and were summed into it: reduction_cuda's every thread's partial (all into the one
# sum: grid x THREADS), gemv_cuda's lanes of the row's warp (warp_sum), conv2d_nhwc's and moe_combine's
# one accumulator an output element (runtime_texts.offset_mismatch_text)
_INIT_OFFSET = {"reduction": lambda launch, task: launch.grid * launch.threads,
                "gemv": lambda launch, task: task.gpu.warp,
                "conv2d_nhwc": lambda launch, task: 1,
                "moe_combine": lambda launch, task: 1}
_SUM_SQ_AT_D = {"init": "(float)D"}     # rmsnorm_cuda's wrong_init: each partial sum of squares starts at D


def _sum_sq_at_d(task: Task, threads: int) -> tuple[float, float]:
    """(typical, smallest) factor of a row's output when each of its `threads` partial sums of
    squares starts at D: the mean square m (chi-square over D, ~1) reads m + threads, the output
    shrinks by sqrt(m / (m + threads)); least on the row of the smallest m of the T rows."""
    d, rows = task.dims["D"], task.dims.get("T", 1)
    low = max(1e-3, 1 - math.sqrt(2 / d) * runtime_texts.NormalDist().inv_cdf(1 - 0.5 / max(rows, 1)))
    return math.sqrt(1 / (1 + threads)), math.sqrt(low / (low + threads))


# gemm_int4's missing_scale (every rung) dequantizes q - 8 without its group's scale s ~ U(0.005, 0.015)
# (gemm_int4 reference: torch.rand * 0.01 + 0.005): the output is sum_g P_g against the reference's
# sum_g s_g P_g, off by sum_g (1 - s_g) P_g, an error of its own of sqrt(E[(1 - s)^2] / E[s^2]) (95.1)
# times the reference's RMS (torch on the CPU, M=512 N=K=4096 bf16: 100.0% mismatched (2096967 of 2097152),
# greatest absolute 1440.0, relative 4.4e7; the generic table said e.g. 99.9%, 34.5 and 2.23)
_INT4_S, _INT4_S2 = 0.01, 0.01 ** 2 + 0.01 ** 2 / 12
INT4_UNSCALED = math.sqrt((1 - 2 * _INT4_S + _INT4_S2) / _INT4_S2)


# bias_gelu's missing_scale drops gelu's 0.5: every output twice the reference's. Its reference is
# gelu(x + b), x and b randn (bias_gelu_spec): v ~ N(0, sqrt 2)
_GELU_WITHOUT_HALF = {"half": ""}
_UNWEIGHTED = {"w": ""}             # moe_combine: each expert's row added without its router weight

# -- a split-K combine that reads the wrong partials ----------------------------------------------
# A combine loop that stops one split short ('SPLITS - 1' for its end: gemm_*_cuda wgmma_split_k,
# gemm_splitk_*) drops the last split's K range: every output is short a 1 / SPLITS share of its
# sum, runtime_texts' 'reduction' site. gemv_cuda split_k_combine reads output i's partials at
# i * SPLITS + s, partials of other outputs laid out [split][m][n]: each output is a sum of SPLITS
# partials of others, a value of the reference's size and its own sign (an error sqrt 2 the scale).
_SHORT_COMBINE = re.compile(r"^(\w+) - 1$")
_FOREIGN_PARTIALS = "(size_t)(m * N + n) * SPLITS + s"


# A split-KV decode whose merge indexes the partials by head + split, not head * splits + split
# (flash / paged decode Triton, paged / swa decode CUDA, swa decode Triton): each head merges other
# heads' partial outputs, attention outputs of the reference's size (sqrt(sum w^2) over its keys,
# softmax_spread) and their own sign: 'unscaled' at sqrt 2 of that size.
_FOREIGN_SPLITS = {"((size_t)pair + p)", "(bh + offs_s)", "(kvh + offs_s) * GROUP_PAD + g"}


def _combine_site(edit, params: dict) -> tuple | None:
    """runtime_texts' site of a bad_combine_index edit whose effect has a closed form (above)."""
    if not isinstance(edit, dict):
        return None
    short = _SHORT_COMBINE.match(edit.get("combine_end", ""))
    if short and params.get(short.group(1), 0) > 1:
        return "reduction", 1 / params[short.group(1)]
    if edit.get("idx") == _FOREIGN_PARTIALS:
        return "unscaled", math.sqrt(2)
    return None


# -- a softmax whose partial sums are added without their rescale --------------------------------
# softmax_triton's online_softmax (BLOCK lanes, each over every BLOCK-th column) and
# split_row_online (SPLITS programs, each over C / SPLITS columns) keep each partial sum relative
# to its own max; the missing_scale edit ({'rescale': ''}) adds them without e^(m_k - m): every
# output of a row shrinks by one factor (runtime_texts.unrescaled_factor), on 4 * randn rows.
_UNRESCALED = {"online_softmax": "BLOCK", "split_row_online": "SPLITS"}


def _softmax_top(c: int, numel: int) -> float:
    """The largest output of softmax over rows of 4 * randn: e^(4z) / (C e^8 + e^(4z)) at the largest
    z of `numel` (its own term in the row's sum: the top of a row is below 1, ~0.7 at 32 x 32000)."""
    share = math.exp(4 * NormalDist().inv_cdf(1 - 1 / max(numel, 2))) / (c * math.exp(8))
    return share / (1 + share)


def _unrescaled_parts(module: OpModule, variant: Variant, task: Task, params: dict | None) -> tuple | None:
    """(partials, columns each) of a softmax_triton rung whose missing_scale drops the rescale."""
    if module.name != "softmax_triton" or variant.tag not in _UNRESCALED \
            or dict(variant.edits).get("missing_scale") != {"rescale": ""}:
        return None
    parts = {**variant.defaults(), **(params or {})}[_UNRESCALED[variant.tag]]
    return parts, -(-task["C"] // parts)


# -- attention whose softmax scale is dropped: scores at another temperature ----------------------
# A rung's missing_scale edits the softmax's scale: '' drops the whole factor the scores are
# multiplied by (the natural scale s, D ** -0.5, or s log2 e where the kernel's softmax is exp2:
# then exp2 of the raw score is exp of ln 2 times it), '1.0' passes 1 for s, and 'D ** -0.5' /
# 'SM_SCALE' passes s without the log2 e its exp2 needs. The reference's scores are N(0, sigma)
# (q, k ~ randn: sigma = s sqrt(d), 1 for s = D ** -0.5); the candidate's are c times them.
_LN2 = math.log(2)
_KEYS = {"flash_decode": lambda d: d["S"], "paged_decode": lambda d: d["S"], "mla_decode": lambda d: d["S"],
         "swa_decode": lambda d: d["W"], "cross_attention": lambda d: d["Skv"], "tree_attention": lambda d: d["P"],
         # causal rows see 1..S keys (a window: up to W; a chunk: P + 1..P + C): the median row's
         "chunked_prefill": lambda d: d["P"] + d["C"] // 2, "flash_prefill": lambda d: max(1, d["S"] // 2),
         "sliding_window_attn": lambda d: min(d["W"], max(1, d["S"] // 2))}
_MLA = (0.07216878364870322, 576)       # mla_decode's SM_SCALE (1 / sqrt(128 + 64)) and its q . k width


def _softmax_temperature(module: OpModule, variant: Variant, task: Task) -> tuple | None:
    """(c, sigma, keys) of an attention rung whose missing_scale edits its softmax scale (above):
    the candidate's scores are c times the reference's N(0, sigma) ones over `keys` keys a row."""
    edit = dict(variant.edits).get("missing_scale")
    if module.op not in _KEYS or not isinstance(edit, dict) or set(edit) != {"scale"}:
        return None
    natural, width = _MLA if module.op == "mla_decode" else (task["D"] ** -0.5, task["D"])
    if edit["scale"] in ("D ** -0.5", "SM_SCALE"):
        c = _LN2
    elif edit["scale"] == "1.0":
        c = 1 / natural
    elif edit["scale"] == "":
        code = module.render(variant, variant.defaults(), task)
        c = (_LN2 if "exp2" in code else 1.0) / natural
    else:
        return None
    return c, natural * math.sqrt(width), _KEYS[module.op](task.dims)
_GELU_V = math.sqrt(2)


def _gelu(v: float) -> float:
    return 0.5 * v * math.erfc(-v / math.sqrt(2))


def _gelu_above(t: float) -> float:
    """The share of gelu(v), v ~ N(0, sqrt 2), whose magnitude passes t (midpoint rule on +-8 sigma)."""
    n = 1600
    return sum(math.exp(-z * z / 2) for z in (-8 + 16 * (i + 0.5) / n for i in range(n))
               if abs(_gelu(_GELU_V * z)) > t) * (16 / n) / math.sqrt(2 * math.pi)


def _gelu_top(numel: int, rng) -> float:
    """The largest gelu(v) of `numel` elements: gelu of the largest v (one-sided: the largest |v|
    of half as many)."""
    return _gelu(_GELU_V * runtime_texts._extreme(max(1, numel // 2), rng.random()))


def mismatch_text(bug: str, module: OpModule, task: Task, rng, variant=None, params: dict | None = None) -> str:
    """What the correctness check prints for a candidate carrying `bug`: torch.testing.assert_close's
    AssertionError for the output's real shape, dtype tolerance and scale (runtime_texts), and, for
    a race, the harness's note that two runs disagree. An off_by_one spoils what its bound bounds
    (runtime_texts.off_by_one_site, read from `variant`'s edit at `params`)."""
    shape, dtype = _output_shape(module, task)
    edit = dict(variant.edits).get(bug) if variant is not None else None
    if bug == "no_bounds_check" and module.op == "fp8_quant" and edit == over_read_texts.UNBOUNDED:
        past = over_read.past_row(task["D"], knobs.own(params or variant.defaults())["threads"])
        return over_read_texts.fp8_text(shape, task["D"], past, task["T"] * task["D"] * 2 >= over_read_texts.GARBAGE_PAST_X, rng)
    spreads = _dropped_weight(module, variant, task) if bug == "missing_scale" and variant is not None else None
    if spreads:
        return runtime_texts.weight_mismatch_text(shape, dtype, spreads[0], rng, bias=spreads[1])
    if bug == "wrong_init" and variant is not None and module.op in _INIT_OFFSET:
        launch = module.launch(variant, knobs.own(params or variant.defaults()), task)
        return runtime_texts.offset_mismatch_text(shape or (1,), dtype, _INIT_OFFSET[module.op](launch, task),
                                                  _output_scale(module, task), rng)
    if bug == "wrong_init" and variant is not None and dict(variant.edits).get(bug) == _SUM_SQ_AT_D:
        return runtime_texts.scaled_mismatch_text(shape, dtype, *_sum_sq_at_d(task, knobs.own(params or variant.defaults())["threads"]),
                                                  WEIGHT_SPREAD, rng)
    site = runtime_texts.off_by_one_site(dict(variant.edits).get(bug), task.dims, params or {},
                                         module.op, variant.tag, task.gpu.warp) \
        if bug == "off_by_one" and variant is not None else None
    if bug == "no_bounds_check" and variant is not None:
        site = over_read_texts.site(module.op, variant.tag, edit, task, knobs.own(params or variant.defaults()))
    if bug == "missing_scale" and module.op == "gemm_int4":
        site = ("unscaled", INT4_UNSCALED)
    if bug == "missing_scale" and module.op == "gemm_fp4":
        site = ("unscaled", _fp4_unscaled(task))
    if bug == "broadcast_index" and module.op == "rope":      # most rows turned by another token's position
        site = ("unscaled", rope_spec.wrong_position_error(task["D"], rope_spec.MAX_POS))
    if bug == "bad_combine_index" and variant is not None:
        site = _combine_site(dict(variant.edits).get(bug), {**variant.defaults(), **(params or {})}) or site
    if bug == "missing_scale" and variant is not None and module.op == "moe_combine" \
            and dict(variant.edits).get(bug) == _UNWEIGHTED:
        ref, err = runtime_texts.unweighted_spread(task["topk"])
        return runtime_texts.mismatch_text(bug, shape or (1,), dtype, ref, rng, ("unscaled", err / ref))
    parts = _unrescaled_parts(module, variant, task, params) if bug == "missing_scale" and variant else None
    if parts:
        return runtime_texts.power_of_two_mismatch_text(
            shape, dtype, runtime_texts.unrescaled_factor(*parts, 4.0), _reference_above(module, task),
            _softmax_top(task["C"], math.prod(shape)), rng, exact=False)
    if bug == "bad_combine_index" and variant is not None and module.op in _KEYS \
            and _FOREIGN_SPLITS.intersection(map(str, dict(dict(variant.edits).get(bug) or {}).values())):
        ref = runtime_texts.softmax_spread(1.0, 1.0, _KEYS[module.op](task.dims))[0]
        return runtime_texts.mismatch_text(bug, shape or (1,), dtype, ref, rng, ("unscaled", math.sqrt(2)))
    temperature = _softmax_temperature(module, variant, task) if bug == "missing_scale" and variant else None
    if temperature:
        ref, err = runtime_texts.softmax_spread(*temperature)
        return runtime_texts.mismatch_text(bug, shape or (1,), dtype, ref, rng, ("unscaled", err / ref))
    if bug == "missing_scale" and variant is not None and dict(variant.edits).get(bug) == _GELU_WITHOUT_HALF:
        return runtime_texts.power_of_two_mismatch_text(shape, dtype, 2.0, _gelu_above,
                                                        _gelu_top(math.prod(shape), rng), rng)
    text = runtime_texts.mismatch_text(bug, shape or (1,), dtype, _output_scale(module, task), rng, site,
                                       _reference_above(module, task))
    if bug in ("missing_barrier", "racy_update"):
        text += "\nTwo runs on the same input disagree (the output is not deterministic)."
    return text


# -- benchmark results ---------------------------------------------------------------
# One layout for every step's result, as a harness log prints it: a head line (step number
# and outcome), the tool's text or the measurement, the comparison with the best, the
# decision, the best after the step. Times in the conversation's one unit (time_unit).

def best_line(best_ms: float, baseline_ms: float, best_step: int) -> str:
    """The best so far and its speedup over the baseline's first timing (the one the prompt
    shows); while the best is the baseline itself (re-measured: its time the mean of its runs)
    the speedup is 1.00x, never a baseline slower than itself.

    >>> best_line(1.02, 1.0, 0)
    'best: 1.020 ms, 1.00x over baseline (the baseline)'
    """
    origin = "the baseline" if best_step == 0 else f"step {best_step}"
    speedup = 1.0 if best_step == 0 else baseline_ms / best_ms
    return f"best: {fmt_ms(best_ms, time_unit(baseline_ms))}, {speedup:.2f}x over baseline ({origin})"


def outcome(step: dict) -> str:
    """What the harness saw of a step, in its words: 'correct', 'compile error', 'launch
    failed', 'wrong result' or 'crashed in the correctness run'."""
    if step["status"] == "compile_error":
        return "launch failed" if fails_at_launch(step["failure"], step["error"]) else "compile error"
    if step["status"] == "wrong_result":
        return "crashed in the correctness run" if step["failure"] == "fault" else "wrong result"
    return "correct"


def step_feedback(step: dict, verdict, baseline_ms: float, stamp: str = "", profile: str = "") -> str:
    """Feedback for one step, from its record and the ledger's verdict on it (see
    episodes.replay): best before and after, runs of this code, noise. Only what a harness
    knows: the outcome, the tool's text or the times, the profiler's report of a new correct
    candidate (`profile`: profiler.text at this step's time; a re-measure of the best's code
    repeats none), and whether the code is the best's."""
    unit = time_unit(baseline_ms)
    head = f"{stamp}Step {step['step']}: {outcome(step)}."
    best = best_line(step["best_ms"], baseline_ms, verdict.best_step)
    if step["status"] != "ok":
        return f"{head}\n{step['error']}\ndecision: not kept\n{best}"
    res = f"time: {fmt_ms(step['time_ms'], unit)}, {step['regs']} registers, {step['smem_bytes']} B shared memory"
    if verdict.remeasure:
        spread = (step["time_ms"] / verdict.prev_best_ms - 1) * 100
        return (f"{head}\n{res}\nsame code as the best: {spread:+.1f}% vs its recorded time; its recorded time is "
                f"now the mean of {verdict.runs} runs, {fmt_ms(step['best_ms'], unit)}\n"
                f"decision: best re-measured\n{best}")
    runs = f" (mean of {verdict.runs} runs: {fmt_ms(verdict.mean_ms, unit)})" if verdict.runs > 1 else ""
    delta = (verdict.mean_ms / verdict.prev_best_ms - 1) * 100
    places = decision_places(delta, 100 * verdict.needed, step["kept"])
    noise = f"noise ±{100 * verdict.noise:.1f}% per run; a keep needs -{100 * verdict.needed:.{places}f}%"
    prof = f"\n{profile}" if profile else ""
    return (f"{head}\n{res}{runs}{prof}\nvs best {fmt_ms(verdict.prev_best_ms, unit)}: {delta:+.{places}f}% ({noise})\n"
            f"decision: {'kept' if step['kept'] else 'not kept'}\n{best}")


def decision_places(delta_pct: float, needed_pct: float, kept: bool) -> int:
    """Decimals that print the change and the keep threshold so they read as the decision does: one,
    or more where one rounds them to the same figure (`-2.8% ... a keep needs -2.8%`, then `not kept`:
    8 of 2,315 decisions of kernelinfer seed 16262, 6 of 3,063 of default 16161, main 90dadf3; one of those still
    tied at three: -2.828% against -2.828%), at most six.

    >>> decision_places(-2.86, 2.78, True), decision_places(-2.36, 2.44, False), decision_places(-2.364, 2.3641, False)
    (1, 2, 4)
    """
    for places in range(1, 7):
        gain, needed = round(-delta_pct, places), round(needed_pct, places)
        if (gain > needed) if kept else (gain < needed):
            return places
    return 6


_DEFINE = r"#define\s+({name})\s+\(?{value}(?![\w.])"
_ASSIGN = r"\b({name})\s*=\s*{value}(?![\w.])"          # a keyword argument, an assignment, a constexpr
_TUPLE = re.compile(r"^[ \t]*(\w+(?:\s*,\s*\w+)+)\s*=\s*(\d+(?:\s*,\s*\d+)+)[ \t]*$", re.M)
_TUPLE_VALUES = re.compile(r"=\s*\d+(?:\s*,\s*\d+)+[ \t]*$", re.M)     # what every _TUPLE match holds
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\((?:[^()\n]|\([^()\n]*\))*\)")
# integer values a candidate states whatever its parameters: macros, constexprs, Triton
# meta-parameters (upper-case constexprs, num_warps/num_stages/num_ctas) passed at launch
_STATED = (re.compile(r"^[ \t]*#define[ \t]+([A-Z][A-Z0-9_]*)[ \t]+\(?(\d+)\)?[uU]?(?=[ \t]*(?://.*)?$)", re.M),
           # \bconstexpr, its boundary checked behind the word: a pattern that starts with a literal is
           # searched for that literal, one that starts with \b tries every position (25x slower)
           re.compile(r"constexpr(?<!\wconstexpr)[ \t]+(?:int|unsigned|int64_t|size_t)[ \t]+(\w+)[ \t]*=[ \t]*(\d+)[ \t]*;"),
           re.compile(r"[(,][ \t]*([A-Z][A-Z0-9_]*|num_warps|num_stages|num_ctas)=(\d+)(?=[ \t]*[,)\n])"))
_HARDWARE = ("WARP_SIZE",)      # the target's, not a choice
# _STATED's first and last patterns, found from a literal: each of those tries every position of the code
# (a line start, an opening bracket or comma), ~0.1 ms a step's code, asked for every step's history line
# (code_values was ~3/4 of the step rows' text cost). _stated gives the same matches (tests/test_caches.py).
_DEFINE_FROM = re.compile(r"#define[ \t]+([A-Z][A-Z0-9_]*)[ \t]+\(?(\d+)\)?[uU]?(?=[ \t]*(?://.*)?$)", re.M)
_KWARG_VALUE = re.compile(r"=(\d+)(?=[ \t]*[,)\n])")
_KWARG_NAME = re.compile(r"[A-Z][A-Z0-9_]*|num_warps|num_stages|num_ctas")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _stated(code: str) -> tuple[list, list]:
    """_STATED's matches in `code` as (start, name, value): (those of the `#define`s and constexprs,
    those of the launch keywords), each list in the code's order."""
    return _defines(code) + [(m.start(), m.group(1), m.group(2)) for m in _STATED[1].finditer(code)], \
        _kwargs(code)


def _defines(code: str) -> list:
    """_STATED[0]'s matches: a `#define` found by its literal, kept where only blanks precede it on
    its line, at its line's start (where `^[ \t]*` starts the match). A match holds no newline, so a
    rejected one hides no match of a later line, and a line's later `#define`s follow a non-blank."""
    if "#define" not in code:
        return []
    out = []
    for m in _DEFINE_FROM.finditer(code):
        line = code.rfind("\n", 0, m.start()) + 1
        if not code[line:m.start()].strip(" \t"):
            out.append((line, m.group(1), m.group(2)))
    return out


def _kwargs(code: str) -> list:
    """_STATED[2]'s matches: each `=digits` before a closing comma, bracket or newline, kept where the
    name written just before it (the run of name characters) is one of the pattern's names and an
    opening bracket or a comma precedes it, blanks apart; the match starts at that bracket or comma."""
    out = []
    for m in _KWARG_VALUE.finditer(code):
        start = end = m.start()
        while start and code[start - 1] in _NAME_CHARS:
            start -= 1
        if not _KWARG_NAME.fullmatch(code, start, end):
            continue
        at = start
        while at and code[at - 1] in " \t":
            at -= 1
        if at and code[at - 1] in "(,":
            out.append((at - 1, code[start:end], m.group(1)))
    return out


def code_values(code: str, params: dict, fixed: frozenset = frozenset()) -> list[str]:
    """A candidate's tunable values as its code states them: each parameter where the code
    writes it (a `#define`, an assignment or a launch keyword, spelled as in the code;
    `__launch_bounds__(...)`, `#pragma unroll N`), then the other integer macros, constexprs
    and launch meta-parameters the code states. A value the code does not state is left out,
    and so is a name of `fixed` (task_constants: the task's, not a choice).

    >>> code_values("#define THREADS 256\\n#define VEC 8\\nk[grid](x, BLOCK=1024, num_warps=4)", {"threads": 256})
    ['THREADS=256', 'VEC=8', 'BLOCK=1024', 'num_warps=4']
    >>> code_values("__global__ void __launch_bounds__(THREADS, 2) k() {}", {"min_blocks": 2, "main_unroll": 0})
    ['__launch_bounds__(THREADS, 2)']
    >>> code_values("    for off in tl.range(0, C, BLOCK, loop_unroll_factor=4):", {"loop_unroll": 4})
    ['loop_unroll_factor=4']
    >>> code_values('    v = tl.load(x_ptr + i, mask=m, eviction_policy="evict_last")', {"evict": 2})
    ['eviction_policy="evict_last"']
    >>> code_values("#define HEAD_DIM 128\\n#define THREADS 256", {"threads": 256}, frozenset({"HEAD_DIM"}))
    ['THREADS=256']
    """
    lower = code.lower() if code.isascii() else None
    tuples = []          # _TUPLE's matches, found at the first parameter that needs them
    out = [t for t in (_knob_text(code, name, value) if name in knobs.KNOBS or name in UNROLL_NAMES
                       else _spelled(code, name, value, lower, tuples)
                       for name, value in params.items()) if t and t.split("=")[0] not in fixed]
    named = {t.split("=")[0] for t in out}
    values, kwargs = _stated(code)
    stated = sorted((at, f"{name}={value}") for at, name, value in values + kwargs
                    if name not in named and name not in _HARDWARE and name not in fixed)
    return _per_launch(code, list(dict.fromkeys(out + [t for _, t in stated])), kwargs)


def task_constants(module: OpModule, task: Task, tags) -> frozenset:
    """The names every candidate of `task` on the rungs `tags` (an episode's) states with one value:
    a task dimension written into the code (paged decode's HEAD_DIM, PAGE_SIZE), a spec constant
    (int4's GROUP, grad clip's MAX_GRID), a value no parameter moves (a rung's VEC of 16 bytes).
    They describe the task, not a choice, so a history line leaves them off (code_values' `fixed`).
    The candidates: each rung at its defaults and with each parameter at each of its values (the
    others at defaults) -- a name derived from a parameter (a tile from a block size) moves with
    it; generic knobs write no stated name. The episode's rungs, not the whole ladder: a rung it
    never wrote cannot show the model another value, and the ladder's renders cost ~1 ms an
    episode (6% of generate's CPU); the episode's rungs, ~half of that.

    >>> from kernelstrain.ops import REGISTRY
    >>> from kernelstrain.tasks import make_task
    >>> m = REGISTRY["paged_decode_cuda"]
    >>> t = make_task(m, "H100", "bf16", dict(m.shapes[0]))
    >>> sorted(task_constants(m, t, [v.tag for v in m.variants]))[:4]
    ['HEAD_DIM', 'NUM_HEADS', 'NUM_KV_HEADS', 'PAGE_SIZE']
    """
    seen = {}
    for code in _candidates(module, task, tags):
        values, kwargs = _stated(code)
        for _, name, value in values + kwargs:
            seen.setdefault(name, set()).add(value)
    return frozenset(name for name, values in seen.items() if len(values) == 1)


def _candidates(module: OpModule, task: Task, tags):
    """The codes of task_constants' candidates."""
    for tag in dict.fromkeys(tags):
        v = module.variant(tag)
        base = v.defaults()
        yield module.render(v, base, task)
        for p in v.params:
            for value in p.values:
                if value != p.default:
                    yield module.render(v, {**base, p.name: value}, task)


def _per_launch(code: str, values: list[str], kwargs: list | None = None) -> list[str]:
    """`values` with each launch meta-parameter that the code's launches set to different values
    (a fused program's row kernel at num_warps=2 beside its elementwise kernels at 4) written once a
    launch, named by its kernel: `num_warps=2 (k1_row_kernel)`. Without it the line shows the first
    launch's value alone, and two candidates that differ only in another launch read the same.

    >>> _per_launch("a[g](x, num_warps=2)\\nb[g](y, BLOCK=64, num_warps=4)", ["BLOCK=64", "num_warps=4"])
    ['BLOCK=64', 'num_warps=2 (a)', 'num_warps=4 (b)']

    `kwargs`: the code's launch keywords (_kwargs), where the caller has them.
    """
    kwargs = _kwargs(code) if kwargs is None else kwargs
    spread = {name for _, name, _ in kwargs if len({v for _, n, v in kwargs if n == name}) > 1}
    if not spread:
        return values
    out = []
    for value in values:
        name = value.split("=")[0]
        if name not in spread:
            out.append(value)
        elif not any(v.startswith(f"{name}=") and v.endswith(")") for v in out):
            out += dict.fromkeys(f"{n}={v} ({_callee(code, at + 1)})" for at, n, v in kwargs if n == name)
    return out


def _callee(code: str, at: int) -> str:
    """The name of the call whose argument list holds offset `at` (a Triton launch `k[grid](...)`:
    `k`), read back over balanced brackets."""
    depth = 0
    for i in range(at - 1, -1, -1):
        if code[i] in ")]":
            depth += 1
        elif code[i] in "([" and depth:
            depth -= 1
        elif code[i] == "(":
            end = i
            if code[end - 1:end] == "]":           # the launch grid's subscript: its name is before it
                end = _opening(code, end - 1)
            return re.search(r"[\w.]*$", code[:end]).group(0) or "?"
    return "?"


def _opening(code: str, close: int) -> int:
    """Offset of the `[` that the `]` at `close` closes."""
    depth = 0
    for i in range(close, -1, -1):
        depth += {"]": 1, "[": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return 0


def _knob_text(code: str, name: str, value: int) -> str | None:
    if not value:
        return None
    if name in ("min_blocks", "bound"):
        found = _LAUNCH_BOUNDS.search(code)
        return found.group(0) if found else None
    if name in ("main_unroll", "pragma_unroll") and f"#pragma unroll {value}\n" in code:
        return f"#pragma unroll {value}"
    if name == "loop_unroll" and f"loop_unroll_factor={value}" in code:
        return f"loop_unroll_factor={value}"
    if name == "evict" and f'eviction_policy="{knobs.knobs_triton.POLICIES[value]}"' in code:
        return f'eviction_policy="{knobs.knobs_triton.POLICIES[value]}"'
    return None          # the opt-in slip is a line the code lacks, not a value


def _spelled(code: str, name: str, value, lower: str | None, tuples: list) -> str | None:
    """`lower`: code.lower() of an ASCII code (else None); `tuples`: _TUPLE's matches in the code, or
    empty where not yet found (filled here)."""
    for pattern, start in ((_DEFINE, "#define"), (_ASSIGN, name.lower())):
        found = _search_at(pattern.format(name=re.escape(name), value=value), code,
                           lower if name.isascii() else None, start)
        if found:
            return f"{found.group(1)}={value}"
    if not tuples:      # (a code without _TUPLE_VALUES holds no _TUPLE: the full pattern tries every line)
        tuples.append(_TUPLE.findall(code) if _TUPLE_VALUES.search(code) else [])
    for names, values in tuples[0]:
        for n, v in zip(re.split(r"\s*,\s*", names), re.split(r"\s*,\s*", values)):
            if n.lower() == name.lower() and v == str(value):
                return f"{n}={value}"
    return None


def _search_at(pattern: str, code: str, lower: str | None, start: str):
    """re.search(pattern, code, re.I), where every match begins with `start` (lower case) and
    `lower` is code.lower() of an ASCII code (None: searched plainly): the pattern is tried only
    where `start` occurs. A case-blind pattern is searched by trying every position of the code
    (~0.1 ms a step's code, asked for each parameter of every step); the same first match."""
    if lower is None:
        return re.search(pattern, code, re.I)
    compiled = re.compile(pattern, re.I)      # (re's own cache: one compile a pattern)
    at = lower.find(start)
    while at >= 0:
        found = compiled.match(code, at)      # (a \b at `at` sees the character before it)
        if found:
            return found
        at = lower.find(start, at + 1)
    return None


def history_line(step: dict, unit: str, same_as: int | None = None, fixed: frozenset = frozenset(),
                 remeasure: bool = False) -> str:
    """One line of the compact history in a step-level row or a window's first turn: the
    step's outcome, its time and profile (registers, shared memory), whether its code is one
    submitted before (`same_as`: that step, 0 the baseline), its values as the code states them
    but the task's constants (`fixed`: task_constants). A run of the best's own code
    (`remeasure`, Verdict.remeasure) reads as its feedback did, `best re-measured`: `not kept`
    said the best's code was turned down (main 90dadf3: every such line of seeds 16161 / 16262)."""
    if step["status"] == "ok":
        decision = "best re-measured" if remeasure else "kept" if step["kept"] else "not kept"
        res = f"{fmt_ms(step['time_ms'], unit)}, {decision}, {step['regs']} regs, {step['smem_bytes']} B smem"
    else:
        res = outcome(step)
    if same_as is not None:
        res += f", same code as {'the baseline' if same_as == 0 else f'step {same_as}'}"
    values = ", ".join(code_values(step["code"], as_dict(step["params"]), fixed))
    return f"- step {step['step']}: {res}" + (f"; {values}" if values else "")


def step_prompt(header: str, history: list[str], best_code: str, impl: str, best_ms: float,
                baseline_ms: float, best_step: int, last_feedback: str | None, baseline_facts: str = "") -> str:
    """A step-level prompt, or a window's first turn: task, the baseline (baseline_line), compact
    history, the last result in full (it ends on the best after it), and the current best code."""
    hist = "\n".join(history) if history else "(none yet)"
    last = f"Last result:\n{last_feedback}" if last_feedback else best_line(best_ms, baseline_ms, best_step)
    origin = "the baseline" if best_step == 0 else f"step {best_step}"
    return (f"{header}\n{baseline_line(baseline_ms, baseline_facts)}\n\nHistory:\n{hist}\n\n{last}\n\n"
            f"Current best ({origin}):\n{fence(best_code, impl)}\nPropose the next candidate.")


# The token rule of the context budgets (README "Context windows"): 0.35 a character plus
# 0.8 a digit (Qwen's vocabulary has one token a digit, cl100k one per three). Fitted on
# generated rows to lie above cl100k's and Qwen2.5-Coder's counts on every chat row while
# staying close to them; scripts/token_table.py measures it. Plain counts (no regex pass):
# the windows of every episode are counted at generation speed.
PER_CHAR, PER_DIGIT = 0.35, 0.8
_DIGITS = b"0123456789"     # tokens' digits, counted on the UTF-8 bytes
MESSAGE_OVERHEAD = 5        # a chat template's tokens around one message (ChatML: <|im_start|>role\n ... <|im_end|>\n)


# kept for the last texts counted: an episode's messages are counted where its windows are cut, again for
# each chat row's figures (training.chat_figure: a step's prompt and answer are in its step row and its
# prompt/completion row) and again by qa's token buckets; the same string objects, so a hit is a lookup by
# identity (a str keeps its hash). An episode holds ~3 texts a step: 256 keep a long one's.
@functools.lru_cache(maxsize=256)
def tokens(text: str) -> int:
    """Tokens of a text under the budget rule (above): an upper estimate of BPE counts.

    >>> tokens("__global__ void k(float* x) { x[0] = 1.0f; }")
    18
    """
    # the digits counted on the UTF-8 bytes: bytes 0x30-0x39 are the ASCII digits alone there (a
    # character of several bytes has every byte >= 0x80), the count str.count gives for "0".."9";
    # one translate instead of ten scans (~3x faster: a text's tokens are counted for every window)
    raw = text.encode("utf-8", "surrogatepass")
    return math.ceil(len(text) * PER_CHAR + (len(raw) - len(raw.translate(None, _DIGITS))) * PER_DIGIT)


def message_tokens(message: dict) -> int:
    """Tokens of one chat message under the budget rule, its template's framing included."""
    return tokens(message["content"]) + MESSAGE_OVERHEAD
