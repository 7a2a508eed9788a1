"""The slip catalogue: compile errors an engineer writes into the code they just changed,
each true for the installed compilers (scripts/slip_audit.py compiles every kind).

A recorded slip is one int, `pick` (the step's `typo` field): the kind is KINDS[pick // SITE],
the site pick % SITE. Kind 0, `identifier`, is the rename of mutations.py, so every pick
below SITE means what it meant before this catalogue. `apply` gives the broken code and the
tool's text; `failure` the failure class (schema.FAILURES) the step records.

>>> code = "__global__ void k(float* y) {\\n    const int row = blockIdx.x;\\n    y[row] = 0.f;\\n}\\n"
>>> kind_of(7), kind_of(encode("shfl_mask", 3)), failure("const_cast")
('identifier', 'shfl_mask', 'type')
>>> apply(code, "cuda", 0)[1].splitlines()[0]
'candidate.cu(3): error: identifier "row" is undefined'
>>> apply(code, "cuda", encode("const_cast", 0)) is None      # no const pointer is cast here
True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from . import nvcc, nvcc_more, nvcc_syntax, triton_more, triton_slips
from ..mutations import break_identifier

SITE = 1000


@dataclass(frozen=True)
class Kind:
    name: str
    impl: str              # "cuda", "triton" or "" (both)
    failure: str           # schema.FAILURES
    sites: object          # code -> list of sites (line first); None for identifier
    apply: object          # (code, site) -> (broken code, tool text) | None
    hip: bool = False      # worded for hipcc (clang) too
    dtypes: tuple = ()     # task dtypes it is written for (empty: any)
    unit_dims: bool = True  # offered for a shape with a dimension of 1 (Triton makes an int argument
                            # equal to 1 a constant: a runtime bound of 1 compiles)


KINDS = (
    Kind("identifier", "", "syntax", None, None, hip=True),
    Kind("const_cast", "cuda", "type", nvcc.const_cast_sites, nvcc.const_cast),
    Kind("shared_vla", "cuda", "constexpr", nvcc.shared_vla_sites, nvcc.shared_vla),
    Kind("shfl_mask", "cuda", "type", nvcc.shfl_sites, nvcc.shfl_mask),
    Kind("arange_runtime", "triton", "constexpr", triton_slips.arange_sites, triton_slips.arange_runtime,
         unit_dims=False),
    Kind("dot_dtype", "triton", "type", triton_slips.dot_cast_sites, triton_slips.dot_dtype,
         dtypes=tuple(triton_slips.TL_DTYPE)),
    Kind("launch_args", "cuda", "type", nvcc_more.launch_sites, nvcc_more.launch_args),
    Kind("launch_config", "cuda", "type", nvcc_more.launch_sites, nvcc_more.launch_config),
    Kind("store_other", "triton", "type", lambda code: triton_more.masked_calls(code, "store"),
         triton_more.store_other),
    Kind("load_unmasked", "triton", "type", lambda code: triton_more.masked_calls(code, "load"),
         triton_more.load_unmasked),
    Kind("semicolon", "cuda", "syntax", nvcc_syntax.semicolon_sites, nvcc_syntax.semicolon),
    Kind("cast_pointer", "cuda", "type", nvcc.cast_pointer_sites, nvcc.cast_pointer),
)
BY_NAME = {k.name: k for k in KINDS}
NAMES = tuple(BY_NAME)
FAILURES = tuple(dict.fromkeys(k.failure for k in KINDS))     # syntax, type, constexpr


def encode(kind: str, site: int) -> int:
    return NAMES.index(kind) * SITE + site % SITE


def kind_of(pick: int) -> str:
    return NAMES[pick // SITE] if 0 <= pick < len(NAMES) * SITE else "?"


def failure(kind: str) -> str:
    return BY_NAME[kind].failure


def offered(kind: str, impl: str, hip_arch: str = "", dtype: str = "", shape=()) -> bool:
    """`kind` is written for this dialect, compiler, task dtype ("": any) and shape (a dict or
    (dim, value) pairs)."""
    k = BY_NAME[kind]
    values = shape.values() if isinstance(shape, dict) else [v for _, v in shape]
    return k.impl in ("", impl) and (k.hip or not hip_arch) and (not k.dtypes or not dtype or dtype in k.dtypes) \
        and (k.unit_dims or 1 not in values)


def site_lines(kind: str, code: str) -> list:
    """The line of each site of `kind` in `code` (for identifier: none listed)."""
    return list(_site_lines(kind, code))


@functools.lru_cache(maxsize=512)     # asked again of the same code at each step's slip draw and when it is learnt
def _site_lines(kind: str, code: str) -> tuple:
    k = BY_NAME[kind]
    if k.sites is None:
        return ()
    return tuple(s if isinstance(s, int) else s[0] for s in k.sites(code))


def apply(code: str, impl: str, pick: int, hip_arch: str = "", dtype: str = "", shape=()):
    """(broken code, the compiler's text) of slip `pick` in a candidate for a task of `dtype`
    and `shape`, or None when it cannot be made here."""
    name = kind_of(pick)
    if name == "?" or not offered(name, impl, hip_arch, dtype, shape):
        return None
    if name == "identifier":
        return break_identifier(code, impl, pick % SITE, hip_arch)
    return BY_NAME[name].apply(code, pick % SITE, dtype)
