"""The library's Python face (`import kernelstrain as ks`): a profile, a dataset generated
and opened, or one episode on a task of the caller's choosing — what the CLI does, as calls.

>>> import kernelstrain as ks
>>> p = ks.profile("kernelinfer")
>>> p.name, p.output.layout, p.output.max_context_tokens
('kernelinfer', 'sessions', 32000)
>>> ep = ks.episode(task="rmsnorm_cuda|H100|bf16|T=4096,D=4096", seed=7)
>>> ep["module"], ep["gpu"], ep["steps"][0]["step"], ep == ks.episode(task="rmsnorm_cuda|H100|bf16|T=4096,D=4096", seed=7)
('rmsnorm_cuda', 'H100', 1, True)
>>> ks.episode(task={"module": "rmsnorm_cuda", "gpu": "A100", "dtype": "fp16", "shape": {"T": 8, "D": 4096}})["shape"]
[{'dim': 'T', 'value': 8}, {'dim': 'D', 'value': 4096}]
"""
from __future__ import annotations

from pathlib import Path

from .dataset import Dataset, open  # noqa: A004 (the reader: kernelstrain.open(path) -> Dataset)
from .episodes import build_episode
from .errors import UsageError
from .generate import generate as _generate
from .ops import REGISTRY
from .ops.base import Task
from .plan import Plan
from .profiles import Profile, load_profile
from .tasks import make_task


def _as_profile(name_or_path: str | Path | Profile) -> Profile:
    return name_or_path if isinstance(name_or_path, Profile) else load_profile(name_or_path)


def profile(name_or_path: str | Path | Profile) -> Profile:
    """A validated profile: a bundled one by name (`"kernelinfer"`), a TOML file by path, or a
    Profile as it is."""
    return _as_profile(name_or_path)


def generate(profile: str | Path | Profile, seed: int, out: str | Path, episodes: int | None = None,
             workers: int = 1, force: bool = False, progress: bool = False) -> Dataset:
    """Write the dataset of a profile and seed into `out` (as `kernelstrain generate`; the
    same bytes) and open it."""
    _generate(_as_profile(profile), seed, Path(out), episodes=episodes, workers=workers, force=force, progress=progress)
    return Dataset(out)


def as_task(spec: str | dict | Task) -> Task:
    """A task from its key (`module|GPU|dtype|D1=v,D2=v`), a mapping with module, gpu, dtype
    and shape, or a Task; a combo the module cannot run raises UsageError."""
    if isinstance(spec, Task):
        return spec
    if isinstance(spec, str):
        try:
            module, gpu, dtype, dims = spec.split("|")
            spec = {"module": module, "gpu": gpu, "dtype": dtype,
                    "shape": {d: int(v) for d, v in (kv.split("=") for kv in dims.split(","))}}
        except ValueError:
            raise UsageError(f"task {spec!r}: expected module|GPU|dtype|D1=v,D2=v") from None
    if spec.get("module") not in REGISTRY:
        raise UsageError(f"task: unknown module {spec.get('module')!r} (see `kernelstrain ops`)")
    module = REGISTRY[spec["module"]]
    try:
        made = make_task(module, spec["gpu"], spec["dtype"], spec["shape"])
    except (KeyError, ValueError) as e:
        raise UsageError(f"task: {e}") from None
    if not module.supports(made.gpu, made.dtype):
        raise UsageError(f"task: {module.name} does not run {made.dtype} on {made.gpu.name}")
    return made


def episode(task: str | dict | Task, seed: int = 0, profile: str | Path | Profile = "kernelstrain",
            index: int = 0) -> dict:
    """One episode's public row (as in episodes.jsonl) on a task of the caller's choosing, by
    the profile's engineer and random streams (seed, index): the same arguments, the same row."""
    chosen = as_task(task)
    plan = Plan(_as_profile(profile), seed, (chosen,), (), (chosen,), {})
    return build_episode(plan, index).row()
