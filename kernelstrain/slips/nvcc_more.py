"""CUDA slips in the host wrapper's kernel launch, each with nvcc's own text.

Offered only for a launch written on one line of an `extern "C"` kernel (no template
to deduce, no default argument): the error is then certain and nvcc's only one.

>>> src = ('#define THREADS 128\\nextern "C" __global__ void __launch_bounds__(THREADS)\\nscale_kernel(const float* x, '
...        'float* y, int n) {\\n    const int i = blockIdx.x * THREADS + threadIdx.x;\\n    if (i < n) y[i] = 2.f * x[i];\\n'
...        '}\\n\\nvoid scale(const float* x, float* y, int n, cudaStream_t s) {\\n'
...        '    scale_kernel<<<(n + THREADS - 1) / THREADS, THREADS, 0, s>>>(x, y, n);  // one thread each\\n}\\n')
>>> launch_sites(src)
[(8, 4)]
>>> print(launch_args(src, 0)[1])
candidate.cu(9): error: too few arguments in function call
      scale_kernel<<<(n + 128 - 1) / 128, 128, 0, s>>>(x, y);
                                                           ^
<BLANKLINE>
1 error detected in the compilation of "candidate.cu".
>>> print(launch_config(src, 0)[1].splitlines()[:3])
['candidate.cu(9): error: a __global__ function call must be configured', '      scale_kernel(x, y, n);', '      ^']
"""
from __future__ import annotations

import re

from .cpp import echo_at, follows_system_macro, macros, printed_col
from .nvcc import error_block, report

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?'
                     r'([A-Za-z_]\w*)\s*\(([^)]*)\)')
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)<<<")


def _close(line: str, start: int) -> int:
    """Index of the bracket closing the one at `start` on this line, or -1."""
    depth = 0
    for i in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return i
    return -1


def _launch(line: str, start: int):
    """(end of `>>>`, the argument list's `(` and `)`) of the launch at `start`, or None."""
    cfg = line.find(">>>", start)
    if cfg < 0 or not line.startswith("(", cfg + 3):
        return None
    close = _close(line, cfg + 3)
    return None if close < 0 or not line[close + 1:].lstrip().startswith(";") else (cfg + 3, close)


def launch_sites(code: str) -> list:
    """(line, column) of each one-line launch of an `extern "C"` kernel without default
    arguments, that passes at least one argument."""
    kernels = {m.group(1) for m in _KERNEL.finditer(code) if "=" not in m.group(2)}
    lines = code.split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("//", "#")):
            continue
        for m in _LAUNCH.finditer(line):
            got = _launch(line, m.start())
            if m.group(1) in kernels and got and line[got[0] + 1:got[1]].strip():
                out.append((i, m.start()))
    return out


def _edit(code: str, site: int, rewrite):
    """The launch at the `site`-th site rewritten by rewrite(line, its start, `(` index, `)`
    index) -> (new line, the error's column in it): (lines, line index, echo, caret column)."""
    sites = launch_sites(code)
    if not sites:
        return None
    j, start = sites[site % len(sites)]
    lines = code.split("\n")
    lines[j], col = rewrite(lines[j], start, *_launch(lines[j], start))
    defs = macros(lines)
    return lines, j, echo_at(lines, j, defs), printed_col(lines[j], defs, col, follows_system_macro(lines, j))


def _drop_last(line: str, start: int, open_: int, close: int):
    """The argument list without its last argument (a comma inside brackets is no separator)."""
    depth, cut = 0, open_ + 1
    for i in range(open_ + 1, close):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(line[i], 0)
        if line[i] == "," and depth == 0:
            cut = i
    new = line[:cut] + line[close:]
    return new, cut


# -- a parameter added to the kernel, the launch not updated: one argument short --------------
def launch_args(code: str, site: int, dtype: str = ""):
    got = _edit(code, site, _drop_last)
    if got is None:
        return None
    lines, j, shown, col = got
    return "\n".join(lines), report([error_block(j, "too few arguments in function call", shown, col)])


# -- a kernel called like a device function: the launch configuration left out ---------------
def launch_config(code: str, site: int, dtype: str = ""):
    got = _edit(code, site, lambda line, start, open_, close: (line[:line.index("<<<", start)] + line[open_:], start))
    if got is None:
        return None
    lines, j, shown, col = got
    return "\n".join(lines), report([error_block(j, "a __global__ function call must be configured", shown, col)])
