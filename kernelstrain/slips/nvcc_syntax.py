"""A plain syntax slip nvcc rejects: a declaration's `;` left off. EDG reports it at the next
token, `expected a ";"`, echoing that token's line, and skips the next statement to recover:
a statement that declares names leaves them undefined further on, one spanning lines makes it
warn where parsing restarts. So a site is a declaration followed by a statement that starts with
a name, declares nothing and is complete on its line (nvcc 13.0, scripts/slip_audit.py: one error,
the whole text, in every module with a site).

>>> src = ("__global__ void k(float* y, int n) {\\n    const int row = blockIdx.x * blockDim.x + threadIdx.x;\\n"
...        "    if (row < n) y[row] = 0.f;\\n}\\n")
>>> semicolon_sites(src)
[1]
>>> print(semicolon(src, 0)[1])
candidate.cu(3): error: expected a ";"
      if (row < n) y[row] = 0.f;
      ^
<BLANKLINE>
1 error detected in the compilation of "candidate.cu".
"""
from __future__ import annotations

import re

from .cpp import echo_at, follows_system_macro, macros, printed_col
from .nvcc import _kernel_lines, error_block, report

# one declaration with its initializer on one line: `[const] type name = value;`
_DECL = re.compile(r"^\s+(?:const\s+)?[A-Za-z_][\w:]*\s+\**\s*[A-Za-z_]\w*\s*=[^;{}]*;\s*$")
_NOT_TYPES = {"else", "return", "case", "goto", "do", "throw", "delete", "new", "typedef", "using"}
# a statement that declares: a type (qualified, templated) then a name; `extern __shared__ uint8_t smem[];` too
# (its name left undefined further on: nvcc 13.0 reported both errors, verify --text on kernelinfer seed 12727)
_DECLARES = re.compile(r"^\s*(?:(?:const|volatile|unsigned|signed|static|long|short|extern|__shared__|constexpr|"
                       r"register)\s+|(?:__align__|alignas)\(\w+\)\s*)*[A-Za-z_][\w:]*"
                       r"(?:<[^;]*?>)?[\s*&]+[A-Za-z_]\w*\s*(?:[=\[;,({]|$)")


def _skippable(line: str) -> bool:
    """The statement EDG skips after the error is harmless: starts with a name, declares
    nothing, and ends on this line with its `;` (EDG skips to the next `;` outside brackets:
    past a statement that ends with a block, into the one after it, nvcc 13.0)."""
    text = line.strip()
    return (bool(re.match(r"[A-Za-z_]\w*\b(?!\s*(?:::|<))", text)) and not _DECLARES.match(line)
            and text.endswith(";") and text.count("{") == text.count("}"))


def _next_code_line(lines, i: int) -> int | None:
    """The next line after i that holds code (no blank or comment-only line)."""
    for k in range(i + 1, len(lines)):
        text = lines[k].strip()
        if text and not text.startswith("//"):
            return k
    return None


def _first_store(lines, k: int) -> bool:
    """Line k assigns a local declared above it without an initializer (`uint32_t out[4];`)."""
    m = re.match(r"\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\])*\s*[-+*/%&|^]?=(?!=)", lines[k])
    return bool(m) and any(re.search(rf"[\w>*&]\s+\**{m.group(1)}\s*(?:\[[^\]]*\])*\s*[;,]", line) for line in lines[:k])


def semicolon_sites(code: str) -> list:
    """Lines of device code whose declaration may lose its `;` with a certain, single error."""
    lines = code.split("\n")
    defs = macros(lines)
    out = []
    for i in _kernel_lines(lines):
        if not _DECL.match(lines[i]) or lines[i].split()[0] in _NOT_TYPES:
            continue
        k = _next_code_line(lines, i)
        # a next statement opening with a macro: where EDG points in its expansion is not known here
        if k is None or not _skippable(lines[k]):
            continue
        first = re.match(r"\s*(\w+)", lines[k]).group(1)
        after = _next_code_line(lines, k)
        # a skipped `return` leaves the function without one (a warning); a skipped `if` an orphan `else`;
        # a skipped first store to a local leaves it "used before its value is set" (a warning)
        if first not in defs and first != "return" and not (after is not None and lines[after].lstrip().startswith("else")) \
                and not _first_store(lines, k):
            out.append(i)
    return out


def semicolon(code: str, site: int, dtype: str = ""):
    sites = semicolon_sites(code)
    if not sites:
        return None
    j = sites[site % len(sites)]
    lines = code.split("\n")
    lines[j] = lines[j][:lines[j].rindex(";")] + lines[j][lines[j].rindex(";") + 1:]
    k = _next_code_line(lines, j)
    defs = macros(lines)
    col = len(lines[k]) - len(lines[k].lstrip())
    return "\n".join(lines), report([error_block(k, 'expected a ";"', echo_at(lines, k, defs),
                                                 printed_col(lines[k], defs, col, follows_system_macro(lines, k)))])
