"""The registry of op modules: explicit imports, one module per (op, impl).

>>> REGISTRY["rmsnorm_cuda"].family
'norms'
"""
from __future__ import annotations

from .base import OpModule

REGISTRY: dict[str, OpModule] = {}


def register(module: OpModule) -> OpModule:
    if module.name in REGISTRY:
        raise ValueError(f"op module {module.name!r} registered twice")
    if len(module.variants) < 4:
        raise ValueError(f"{module.name}: a ladder needs at least 4 variants")
    REGISTRY[module.name] = module
    return module


from .norms.rmsnorm_cuda import RMSNormCuda  # noqa: E402

for _cls in (RMSNormCuda,):
    register(_cls())
