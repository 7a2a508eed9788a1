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


@functools.lru_cache(maxsize=16)     # a slip draw asks it of one code for the slip memory, the pick and the typo
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
        words = set(re.findall(r"\w+", code))
        out = [c for c in out if _hip_renames(c[1].group(2), words)]
    return out


_HIP = "#include <hip/hip_runtime.h>"     # a CUDA module's render for an AMD GPU: hipcc (clang) compiles it


def _hip_renames(name: str, words: set) -> list:
    """The renames of `name` after which clang's typo correction has no candidate to try for it
    (correction_tried), so its text depends on the code alone: no "did you mean 'div'?" naming a
    header's declaration, and no error its trial leaves behind pointing into the installed
    headers: none where a name of the headers or of the code is within reach of it."""
    if _header_tried(name) or correction_tried(name, words - {name}):
        return []
    return [r for r in _RENAMES if r.format(name) not in words and not correction_tried(name, [r.format(name)])]


@functools.lru_cache(maxsize=4096)
def _header_tried(name: str) -> bool:
    return correction_tried(name, corpus.hip_names())


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
        renames = [r for r in renames if r in {f.format(name) for f in _hip_renames(name, words)}]
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


def correction_tried(name: str, candidates) -> bool:
    """Whether clang's typo correction may try one of `candidates` (names declared where the use
    is) for the undeclared `name`. Its TypoCorrectionConsumer keeps a name within edit distance
    (len(name) + 2) // 3 whose length differs by at most a third of len(name) (a name under
    three characters keeps none); it goes on when any identifier the translation unit lexed is
    within len(name) // 3 (the headers' parameter and member names count, so nearly always),
    then builds the expression with each kept candidate in turn. One that makes it valid is
    offered ("did you mean 'div'?" for `!live`: distance 2 from a 4-letter name); a host
    function tried in an inline device function leaves `reference to __host__ function 'rand' in
    __device__ function` behind (`lane`), even where it is then rejected. Measured with clang-19
    (HIP, gfx942): lane, band, range, rnd and rands try rand; sxstm, sxstxmm and systemxxx try
    system; sxxtxm (distance 3, length 6) tries nothing; clang offers `y` for no undeclared `q`.

    >>> correction_tried("lane", ["rand"]), correction_tried("live", ["div"]), correction_tried("sxstxmm", ["system"])
    (True, True, True)
    >>> correction_tried("sxxtxm", ["system"]), correction_tried("systemxxxx", ["system"]), correction_tried("q", ["y"])
    (False, False, False)
    >>> correction_tried("kept", ["kept0"]), correction_tried("row", ["my_row"])
    (True, False)
    """
    limit = (len(name) + 2) // 3
    return len(name) >= 3 and any(c != name and (apart := abs(len(c) - len(name))) <= limit
                                  and (apart == 0 or len(name) // apart >= 3) and _within(name, c, limit)
                                  for c in candidates)


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
