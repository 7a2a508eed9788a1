"""CUDA slips that nvcc rejects, other than a misspelt name, each with nvcc's own text.

nvcc (EDG front end) echoes the offending line as the preprocessor left it: macros
expanded, comments gone, `__shared__` spelt `__attribute__((shared))`; the caret is a
column of that line. cpp.echo rebuilds that line from the source alone.

>>> src = ("#define THREADS 128\\n__global__ void k(const float* __restrict__ x, float* y) {\\n"
...        "    __shared__ float part[THREADS];\\n"
...        "    const float4* xv = reinterpret_cast<const float4*>(x);\\n    y[0] = xv[0].x + part[0];\\n}\\n")
>>> print(const_cast(src, 0)[1])
candidate.cu(4): error: reinterpret_cast cannot cast away const or other type qualifiers
      const float4* xv = reinterpret_cast<float4*>(x);
                         ^
<BLANKLINE>
1 error detected in the compilation of "candidate.cu".
>>> print(shared_vla(src, 0)[1].splitlines()[:3])
['candidate.cu(3): error: a variable length array cannot have static storage duration', \
'      __attribute__((shared)) float part[blockDim.x];', '                                    ^']
"""
from __future__ import annotations

import re

from .cpp import echo, echo_at, macros  # noqa: F401  (the preprocessed line nvcc echoes)

FILE = "candidate.cu"


def error_block(j: int, text: str, shown: str, col: int, extra: str = "") -> str:
    """One nvcc diagnostic: file(line): error: text, the echoed line, the caret."""
    return f"{FILE}({j + 1}): error: {text}\n{extra}  {shown}\n  {' ' * col}^\n"


def report(blocks: list) -> str:
    n = len(blocks)
    return "\n".join(blocks) + f"\n{n} error{'s' if n > 1 else ''} detected in the compilation of \"{FILE}\"."


def _kernel_lines(lines):
    """Indices of the lines of device code (from the first __device__/__global__ on), less
    preprocessor lines: a slip in a macro's body errs where the macro is used."""
    start = next((i for i, line in enumerate(lines) if "__global__" in line or "__device__" in line), len(lines))
    return [i for i in range(start, len(lines)) if not lines[i].lstrip().startswith("#")]


# -- a vector load written without the const: reinterpret_cast casts the const away -----------
_CONST_PTR = re.compile(r"\bconst\s+[\w:]+\s*\*\s*(?:const\s+)?(?:__restrict__\s+)?([A-Za-z_]\w*)")
_CAST = re.compile(r"reinterpret_cast<const\s+([\w:]+)\s*\*>\(\s*\(?\s*([A-Za-z_]\w*)\b(?!\s*\()")


def const_cast_sites(code: str) -> list:
    lines = code.split("\n")
    consts = set(_CONST_PTR.findall(code))
    return [(i, m.start()) for i in _kernel_lines(lines) for m in _CAST.finditer(lines[i])
            if m.group(2) in consts and not lines[i].lstrip().startswith("//")]


def _edit(code: str, sites: list, site: int, pattern, token: str, rewrite):
    """Rewrite the match of `pattern` at the `site`-th (line, column) with rewrite(match):
    (lines, line index, match, the line as nvcc echoes it, the caret's column: that match's
    `token` in the echo), or None without a site."""
    if not sites:
        return None
    j, start = sites[site % len(sites)]
    lines = code.split("\n")
    line = lines[j]
    m = pattern.match(line, start)
    lines[j] = line[:start] + rewrite(m) + line[m.end():]
    defs = macros(lines)
    shown = echo_at(lines, j, defs)
    nth = len(re.findall(re.escape(token), echo(line[:start], defs)))
    return lines, j, m, shown, [t.start() for t in re.finditer(re.escape(token), shown)][nth]


def const_cast(code: str, site: int, dtype: str = ""):
    got = _edit(code, const_cast_sites(code), site, _CAST, "reinterpret_cast<",
                lambda m: re.sub(r"<const\s+", "<", m.group(0), count=1))
    if got is None:
        return None
    lines, j, _, shown, col = got
    return "\n".join(lines), report([error_block(j, "reinterpret_cast cannot cast away const or other type qualifiers",
                                                 shown, col)])


# -- a vector cast's template argument written without its `*`: a cast to a non-pointer type -----
_VECTOR = re.compile(r"(?:__)?[a-z][a-z_0-9]*[234]")     # float4, uint2, __half2, __nv_bfloat162; not uint8_t


def cast_pointer_sites(code: str) -> list:
    """const_cast_sites whose type is a CUDA vector struct: a pointer cast to an integer type
    (`uint32_t`) compiles, and errs later."""
    lines = code.split("\n")
    return [(i, col) for i, col in const_cast_sites(code) if _VECTOR.fullmatch(_CAST.match(lines[i], col).group(1))]


def cast_pointer(code: str, site: int, dtype: str = ""):
    """`reinterpret_cast<const float4*>(x)` written `reinterpret_cast<const float4>(x)`: EDG
    rejects the cast at its template argument, naming the type (nvcc 13.0)."""
    got = _edit(code, cast_pointer_sites(code), site, _CAST, "reinterpret_cast<",
                lambda m: re.sub(r"\s*\*>", ">", m.group(0), count=1))
    if got is None:
        return None
    lines, j, m, shown, col = got
    return "\n".join(lines), report([error_block(j, f'cast to type "const {m.group(1)}" is not allowed', shown,
                                                 col + len("reinterpret_cast<"))])


# -- a reduction buffer sized by the launch instead of the compile-time block size ------------
_SHARED = re.compile(r"^\s*__shared__\s+(?:__align__\(\d+\)\s+)?[\w:]+\s+([A-Za-z_]\w*)\s*((?:\[[^\]]*\])+)")
_BLOCK_SIZE = {"THREADS": "blockDim.x", "WARPS": "(blockDim.x / 32)"}


def shared_vla_sites(code: str) -> list:
    lines = code.split("\n")
    out = []
    for i in _kernel_lines(lines):
        m = _SHARED.match(lines[i])
        if m and re.search(r"\b(THREADS|WARPS)\b", m.group(2)) and "extern" not in lines[i]:
            out.append(i)
    return out


def shared_vla(code: str, site: int, dtype: str = ""):
    sites = shared_vla_sites(code)
    if not sites:
        return None
    j = sites[site % len(sites)]
    lines = code.split("\n")
    m = _SHARED.match(lines[j])
    bound = re.sub(r"\b(THREADS|WARPS)\b", lambda t: _BLOCK_SIZE[t.group(1)], m.group(2), count=1)
    lines[j] = lines[j][:m.start(2)] + bound + lines[j][m.end(2):]
    shown = echo_at(lines, j, macros(lines))
    col = re.search(rf"\b{m.group(1)}\s*\[", shown).start()
    return "\n".join(lines), report([error_block(j, "a variable length array cannot have static storage duration",
                                                 shown, col)])


# -- a warp shuffle ported from pre-Volta code: the _sync call written without its mask -------
_SHFL = re.compile(r"__shfl_xor_sync\(\s*(0xffffffffu?|FULL_MASK)\s*,\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*|\d+)\s*\)")
_TYPES = ("unsigned int", "unsigned", "float", "int", "double")
_SPELL = {"unsigned": "unsigned int"}
_INC = "/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/"
# nvcc 13.0's candidates for __shfl_xor_sync, latest declared first: (header, line, value type)
_SHFL_DECLS = {
    "cuda_bf16.h": (("cuda_bf16.hpp", 1803, "__nv_bfloat16"), ("cuda_bf16.hpp", 1775, "__nv_bfloat162")),
    "cuda_fp16.h": (("cuda_fp16.hpp", 1872, "__half"), ("cuda_fp16.hpp", 1814, "__half2")),
    "": tuple(("sm_30_intrinsics.h", n, t) for n, t in ((215, "unsigned long"), (214, "long"), (194, "double"),
              (190, "unsigned long long"), (189, "long long"), (165, "float"), (161, "unsigned int"), (160, "int"))),
}


def _type_of(lines, j: int, name: str) -> str | None:
    if name.isdigit():
        return "int"
    pat = re.compile(rf"\b({'|'.join(_TYPES)})\s+{re.escape(name)}\b")
    for i in range(j, -1, -1):
        m = pat.search(lines[i])
        if m:
            return _SPELL.get(m.group(1), m.group(1))
        if i < j and re.match(r"^(?:extern|__global__|__device__|template|static)", lines[i]):
            return None     # the start of the enclosing function: not declared in it
    return None


def shfl_sites(code: str) -> list:
    lines = code.split("\n")
    return [(i, m.start()) for i in _kernel_lines(lines) for m in _SHFL.finditer(lines[i])
            if _type_of(lines, i, m.group(2)) and _type_of(lines, i, m.group(3))]


def _shfl_note(header: str, line: int, value: str) -> str:
    if header.startswith("sm_30"):
        decl = f"static __attribute__((device)) __inline__ {value} __shfl_xor_sync(unsigned mask, {value} var, int laneMask, int width=32) {{ }}"
    else:
        decl = (f"static __attribute__((device)) __inline__ {value} __shfl_xor_sync(const unsigned int mask, "
                f"const {value} var, const int laneMask, const int width)")
    return (f"{_INC}{header}({line}): note #3322-D: number of parameters of function \"__shfl_xor_sync(unsigned int, "
            f"{value}, int, int)\" does not match the call\n  {decl}\n  {' ' * decl.index('__shfl_xor_sync')}^\n")


def shfl_mask(code: str, site: int, dtype: str = ""):
    got = _edit(code, shfl_sites(code), site, _SHFL, "__shfl_xor_sync(",
                lambda m: f"__shfl_xor_sync({m.group(2)}, {m.group(3)})")
    if got is None:
        return None
    lines, j, m, shown, col = got
    args = (_type_of(lines, j, m.group(2)), _type_of(lines, j, m.group(3)))
    included = [h for h in ("cuda_fp16.h", "cuda_bf16.h") if re.search(rf"#include\s*<{h}>", code)]
    notes = "".join(_shfl_note(*d) for h in [*sorted(included, key=code.index, reverse=True), ""]
                    for d in _SHFL_DECLS[h])
    text = "no instance of overloaded function \"__shfl_xor_sync\" matches the argument list"
    return "\n".join(lines), report([error_block(j, text, shown, col, f"            argument types are: ({', '.join(args)})\n")
                                     .rstrip("\n") + "\n" + notes])
