"""KernelStrain: synthetic long-horizon GPU kernel-optimization trajectories.

The Python face (kernelstrain/api.py): `profile(name_or_path)`, `generate(profile, seed, out, ...)`,
`open(path) -> Dataset` and `episode(task=..., seed=...)`; loaded on first use, so that the
command line and `import kernelstrain` stay quick.
"""
from .version import __version__
API = ("open", "generate", "profile", "episode", "Dataset")


def __getattr__(name: str):
    if name in API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'kernelstrain' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *API])
