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


# A recipe is asked again within a few steps of its episode (a rebench, a slip and its fix): at 1,024
# entries validate and qa hit as often as at 8,192 (validate of 300 default / 100 kernelinfer episodes:
# the same 710 / 3,251 hits), where 8,192 rendered codes (3.6 KB on average) held ~30 MB of a long
# run's peak RSS.
RECIPES_KEPT = 1024


@lru_cache(maxsize=RECIPES_KEPT)
def render_code(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple, bug):
    m = REGISTRY[module]
    return knobs.render(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape), bug)


@lru_cache(maxsize=RECIPES_KEPT)
def simulated(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple):
    m = REGISTRY[module]
    return simulate(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape))


@lru_cache(maxsize=RECIPES_KEPT // 2)
def with_typo(code: str, impl: str, pick: int, hip_arch: str, dtype: str = "", shape: tuple = ()):
    """(broken code, the tool's text) of slip `pick` (slips.apply) for a task of `dtype` and
    `shape` ((dim, value) pairs), or None."""
    return apply(code, impl, pick, hip_arch, dtype, shape)
