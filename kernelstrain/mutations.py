"""Typo-class compile errors: a candidate whose author renamed a variable at its
declaration but not at its uses. `find_typo` does the rename and says where the old name
is still used; messages.typo_error words it as nvcc, hipcc (clang) or Triton would.

>>> src = "__global__ void k(float* y) {\\n    const int row = blockIdx.x;\\n    y[row] = 0.f;\\n}\\n"
>>> code, err = break_identifier(src, "cuda")
>>> print(err.splitlines()[0])
candidate.cu(3): error: identifier "row" is undefined
"""
from __future__ import annotations

import builtins
import functools
import re
from collections import Counter
from dataclasses import dataclass

from . import corpus

_CUDA_DECL = re.compile(r"^(\s*(?:const\s+)?(?:int|float|unsigned|size_t|int64_t|bool)\s+)([a-z_]\w*)(\s*=)")
_ANY_DECL = re.compile(r"\b(?:int|float|unsigned|size_t|int64_t|bool|auto)\s+([a-z_]\w*)\b")
_PY_ASSIGN = re.compile(r"^(\s+)([a-z_]\w*)(\s*=[^=])")
_RENAMES = ("{}_idx", "{}0", "my_{}", "{}_val")
# names the headers (C math / stdlib: nvcc and hipcc) or Python's builtins already declare: the
# old name would then not be undeclared, and the compiler says something else
_C_LIBRARY = frozenset("div ldiv abs labs min max exp exp2 expm1 log log2 log10 log1p pow sqrt cbrt floor ceil round "
                       "rint trunc fma fabs fmod remainder sin cos tan sinh cosh tanh asin acos atan atan2 erf erfc "
                       "hypot frexp ldexp modf nan signbit isnan isinf gamma lgamma tgamma j0 j1 jn y0 y1 yn rand "
                       "time clock index select norm".split())
_PY_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Typo:
    """A rename at line `decl` (0-based) of `name` to `new`; `uses` are (line, column) of
    the old name after it; `kernel_line` is the Triton kernel's `def` line."""
    name: str
    new: str
    decl: int
    uses: tuple
    kernel_line: int
    lines: tuple          # the broken source, split into lines


def _uses(lines, start, name):
    pat = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
    for i in range(start + 1, len(lines)):
        m = pat.search(lines[i])
        if m:
            yield i, m.start()


def typo_sites(code: str, impl: str) -> list:
    """(line, declaration match, Triton def line) of each declaration a rename can break."""
    lines = code.split("\n")
    pattern = _CUDA_DECL if impl == "cuda" else _PY_ASSIGN
    in_kernel, def_line = False, 0
    candidates, declared = [], Counter()
    for i, line in enumerate(lines):
        if impl == "cuda" and "__global__" in line:
            in_kernel = True
        jit = i > 0 and lines[i - 1].startswith("@triton.jit")
        if impl == "triton" and line.startswith("def "):
            in_kernel, def_line = jit, (i if jit else def_line)
        m = pattern.match(line) if in_kernel else None
        if m:
            declared[m.group(2)] += 1
            if next(_uses(lines, i, m.group(2)), None):
                candidates.append((i, m, def_line if impl == "triton" else 0))
    # only names declared once, and no function parameter: every later use is then undefined
    if impl == "cuda":
        declared.update(_ANY_DECL.findall(code))   # loop variables and other scopes count too
        params = set()
    else:
        signatures = " ".join(re.findall(r"def \w+\((.*?)\)", code, flags=re.S))
        params = set(re.findall(r"[A-Za-z_]\w*", signatures))
    limit = 2 if impl == "cuda" else 1             # a CUDA declaration is seen by both scans
    taken = params | (_C_LIBRARY if impl == "cuda" else _PY_BUILTINS | set(re.findall(r"^(\w+)\s*=", code, re.M))
                      | set(re.findall(r"^def (\w+)", code, re.M)))
    out = [c for c in candidates if declared[c[1].group(2)] <= limit and c[1].group(2) not in taken]
    if impl == "cuda" and _HIP in code:
        words, functions = set(re.findall(r"\w+", code)), functions_of(lines)
        out = [c for c in out if _hip_renames(c[1].group(2), words, _tried(lines, c[0], c[1].group(2), functions))]
    return out


_HIP = "#include <hip/hip_runtime.h>"     # a CUDA module's render for an AMD GPU: hipcc (clang) compiles it


def _hip_renames(name: str, words: set, tried: frozenset = frozenset()) -> list:
    """The renames of `name` after which clang has no correction to offer for it (its text then
    depends on the code alone: no "did you mean 'pow'?" naming a header's declaration, and no
    note pointing into the installed headers): none where a name of the headers or of the code
    is within clang's correction distance of it, nor where one of the host functions `tried`
    (_tried) is among the candidates clang tries."""
    if _header_corrects(name) or correction_offered(name, words - {name}) or correction_tried(name, tried):
        return []
    return [r for r in _RENAMES if r.format(name) not in words and not correction_offered(name, [r.format(name)])]


@functools.lru_cache(maxsize=4096)
def _header_corrects(name: str) -> bool:
    return correction_offered(name, corpus.hip_names())


def find_typo(code: str, impl: str, pick: int = 0) -> Typo | None:
    """Rename the `pick`-th usable declaration, or None when the code has none."""
    candidates = typo_sites(code, impl)
    if not candidates:
        return None
    lines = code.split("\n")
    i, m, def_line = candidates[pick % len(candidates)]
    name = m.group(2)
    words = set(re.findall(r"\w+", code))
    renames = [_RENAMES[(pick + k) % len(_RENAMES)].format(name) for k in range(len(_RENAMES))]
    if impl == "cuda" and _HIP in code:       # a rename clang offers no correction for
        tried = _tried(lines, i, name, functions_of(lines))
        renames = [r for r in renames if r in {f.format(name) for f in _hip_renames(name, words, tried)}]
    new = next((r for r in renames if r not in words), renames[0])   # not a name the code has: no redeclaration
    lines[i] = m.group(1) + new + m.group(3) + lines[i][m.end():]
    return Typo(name, new, i, tuple(_uses(lines, i, name)), def_line, tuple(lines))


def break_identifier(code: str, impl: str, pick: int = 0, hip_arch: str = "") -> tuple[str, str] | None:
    """(broken code, the compiler's text) for the `pick`-th rename, or None; `hip_arch`: the
    AMD target a HIP candidate compiles for ("" for CUDA)."""
    from .messages import typo_error
    typo = find_typo(code, impl, pick)
    if typo is None:
        return None
    return "\n".join(typo.lines), typo_error(typo, impl, hip_arch)


def correction_offered(name: str, candidates) -> bool:
    """Whether clang's typo correction may offer one of `candidates` for the undeclared `name`:
    Sema::CorrectTypo keeps a correction whose edit distance (replacements allowed) d has
    len(name) // d >= 3, so at most len(name) // 3 (a name of one or two characters is never
    corrected: clang-19 offers `y` for no undeclared `q`).

    >>> correction_offered("row", ["pow"]), correction_offered("kept", ["kept0"]), correction_offered("row", ["my_row"])
    (True, True, False)
    >>> correction_offered("q", ["y"]), correction_offered("kept", ["exp"])
    (False, False)
    """
    limit = len(name) // 3
    return limit > 0 and any(c != name and abs(len(c) - len(name)) <= limit and _within(name, c, limit)
                             for c in candidates)


def correction_tried(name: str, candidates) -> bool:
    """Whether clang's typo correction tries one of `candidates` for the undeclared `name`: its
    TypoCorrectionConsumer keeps a name of the translation unit within edit distance
    (len(name) + 2) // 3 whose length differs by at most a third of len(name), and the trial
    builds the expression with it (a name under three characters keeps none). A candidate tried
    and rejected leaves no "did you mean", but a host function tried in a device function whose
    diagnostics clang defers leaves `reference to __host__ function 'rand' in __device__
    function`. Measured with clang-19 (`v = NAME;` in an inline __device__ function): lane,
    band, range, rnd and rands try rand; sxstm, sxstxmm and systemxxx try system; sxxtxm
    (distance 3, length 6) tries nothing.

    >>> correction_tried("lane", ["rand"]), correction_tried("sxstxmm", ["system"]), correction_tried("sxxtxm", ["system"])
    (True, True, False)
    >>> correction_tried("systemxxxx", ["system"]), correction_tried("ra", ["rand"])
    (False, False)
    """
    limit = (len(name) + 2) // 3
    return len(name) >= 3 and any(c != name and (c_len := abs(len(c) - len(name))) <= limit
                                  and (c_len == 0 or len(name) // c_len >= 3) and _within(name, c, limit)
                                  for c in candidates)


_FUNCTION = re.compile(r"^(?!\s|#|//|}|typedef\b|struct\b|using\b)([^;{}()=]*?)\b(\w+)\s*\(")


def functions_of(lines) -> list:
    """(first line, last line, qualifiers, name) of each function defined at file scope: a
    header starting at column 0 (the renders' layout), its body up to the next `}` at column 0."""
    out, k = [], 0
    while k < len(lines):
        m = _FUNCTION.match(lines[k])
        if m is None:
            k += 1
            continue
        start, head = k, ""
        while k < len(lines) and "{" not in lines[k] and not lines[k].rstrip().endswith(";"):
            head += lines[k] + " "
            k += 1
        if k == len(lines) or "{" not in lines[k]:
            k += 1
            continue            # a declaration, no body
        head += lines[k].split("{")[0]
        end = k if lines[k].rstrip().endswith("}") and lines[k].count("{") == lines[k].count("}") else \
            next((e for e in range(k + 1, len(lines)) if lines[e].startswith("}")), len(lines) - 1)
        out.append((start, end, frozenset(re.findall(r"\w+", m.group(1))) | frozenset(re.findall(r"\w+", head)), m.group(2)))
        k = end + 1
    return out


def _deferred(words: frozenset) -> bool:
    """A device function whose diagnostics clang defers until a kernel is seen to call it (not
    known to be emitted: inline or internal linkage), as measured with clang-19: __forceinline__,
    inline and static __device__ functions defer; plain __device__, __noinline__, template and
    __global__ functions do not."""
    return "__device__" in words and not words & {"__global__", "template", "__noinline__"} \
        and bool(words & {"inline", "__forceinline__", "static"})


def _tried(lines, decl: int, name: str, functions: list) -> frozenset:
    """The host functions whose trial by clang's typo correction would be left behind as an
    error: the headers' and the code's host functions where a use of `name` after line `decl`
    lies in a deferred device function (_deferred); none otherwise."""
    spans = [(a, b) for a, b, words, _ in functions if _deferred(words)]
    if not any(a <= i <= b for i, _ in _uses(lines, decl, name) for a, b in spans):
        return frozenset()
    own = {fname for _, _, words, fname in functions if not words & {"__device__", "__global__"}}
    return corpus.hip_host_functions() | own


def _within(a: str, b: str, limit: int) -> bool:
    """Levenshtein distance of a and b at most `limit` (rows stop early once all exceed it)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        new = [i]
        for j, y in enumerate(b, 1):
            new.append(min(row[j] + 1, new[j - 1] + 1, row[j - 1] + (x != y)))
        if min(new) > limit:
            return False
        row = new
    return row[-1] <= limit
