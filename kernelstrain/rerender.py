"""A row's code rendered again from its recipe — module, GPU, dtype, shape, variant, parameters,
bug and slip — cached: one render per recipe. validate, qa, the sessions layout (whose rows keep
the recipe, not the code) and the trusted-code check all re-render through here.

>>> code = render_code("rmsnorm_cuda", "A100", "fp16", (("T", 8), ("D", 4096)), "row_per_thread", (("threads", 128),), None)
>>> "__global__" in code and render_code.cache_info().currsize >= 1
True
"""
from __future__ import annotations

from functools import lru_cache

from . import knobs
from .ops import REGISTRY
from .sim import simulate
from .slips import apply
from .tasks import make_task


@lru_cache(maxsize=8192)
def cached_task(module: str, gpu: str, dtype: str, shape: tuple):
    return make_task(REGISTRY[module], gpu, dtype, dict(shape))


@lru_cache(maxsize=8192)
def render_code(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple, bug):
    m = REGISTRY[module]
    return knobs.render(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape), bug)


@lru_cache(maxsize=8192)
def simulated(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple):
    m = REGISTRY[module]
    return simulate(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape))


@lru_cache(maxsize=4096)
def with_typo(code: str, impl: str, pick: int, hip_arch: str, dtype: str = "", shape: tuple = ()):
    """(broken code, the tool's text) of slip `pick` (slips.apply) for a task of `dtype` and
    `shape` ((dim, value) pairs), or None."""
    return apply(code, impl, pick, hip_arch, dtype, shape)
