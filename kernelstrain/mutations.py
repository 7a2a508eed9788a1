"""Typo-class compile errors: a candidate whose author renamed a variable at its
declaration but not at its uses. The compiler's message is worded as nvcc's or Triton's.

>>> src = "__global__ void k(float* y) {\\n    const int row = blockIdx.x;\\n    y[row] = 0.f;\\n}\\n"
>>> code, err = break_identifier(src, "cuda")
>>> print(err.splitlines()[0])
candidate.cu(3): error: identifier "row" is undefined
"""
from __future__ import annotations

import re
from collections import Counter

_CUDA_DECL = re.compile(r"^(\s*(?:const\s+)?(?:int|float|unsigned|size_t|int64_t|bool)\s+)([a-z_]\w*)(\s*=)")
_ANY_DECL = re.compile(r"\b(?:int|float|unsigned|size_t|int64_t|bool|auto)\s+([a-z_]\w*)\b")
_PY_ASSIGN = re.compile(r"^(\s+)([a-z_]\w*)(\s*=[^=])")
_RENAMES = ("{}_idx", "{}0", "my_{}", "{}_val")


def _uses(lines, start, name):
    pat = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
    for i in range(start + 1, len(lines)):
        m = pat.search(lines[i])
        if m:
            yield i, m.start()


def break_identifier(code: str, impl: str, pick: int = 0) -> tuple[str, str] | None:
    """Rename the `pick`-th usable declaration; return (broken code, compiler text) or None."""
    lines = code.split("\n")
    pattern = _CUDA_DECL if impl == "cuda" else _PY_ASSIGN
    in_kernel = False
    candidates, declared = [], Counter()
    for i, line in enumerate(lines):
        if impl == "cuda" and "__global__" in line:
            in_kernel = True
        if impl == "triton" and line.startswith("def ") and i > 0 and lines[i - 1].startswith("@triton.jit"):
            in_kernel, def_line = True, i
        if impl == "triton" and line.startswith("def ") and not (i > 0 and lines[i - 1].startswith("@triton.jit")):
            in_kernel = False
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
    candidates = [c for c in candidates if declared[c[1].group(2)] <= limit and c[1].group(2) not in params]
    if not candidates:
        return None
    i, m, def_line = candidates[pick % len(candidates)]
    name = m.group(2)
    new = _RENAMES[pick % len(_RENAMES)].format(name)
    lines[i] = m.group(1) + new + m.group(3) + lines[i][m.end():]
    uses = list(_uses(lines, i, name))
    if impl == "cuda":
        msgs = [f"candidate.cu({j + 1}): error: identifier \"{name}\" is undefined\n  {lines[j].strip()}\n"
                f"  {' ' * (col - (len(lines[j]) - len(lines[j].lstrip())))}^\n" for j, col in uses[:8]]
        n = len(uses[:8])
        text = "\n".join(msgs) + f"\n{n} error{'s' if n > 1 else ''} detected in the compilation of \"candidate.cu\"."
    else:
        j, col = uses[0]
        shown = "\n".join(lines[def_line:j + 1])
        text = (f"triton.compiler.errors.CompilationError: at {j - def_line + 1}:{col}:\n{shown}\n"
                f"{' ' * col}^\nNameError('{name} is not defined')")
    return "\n".join(lines), text
