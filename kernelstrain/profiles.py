"""Profiles: configs/*.toml read with tomllib into frozen, validated objects.

>>> p = load_profile(DEFAULT_PROFILE)
>>> p.name, p.episodes, p.steps.mean
('kernelstrain', 11514, 24.5)
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from .errors import UsageError
from .gpus import GPUS

PROFILE_DIR = Path(__file__).resolve().parent / "configs"
DEFAULT_PROFILE = PROFILE_DIR / "kernelstrain.toml"


@dataclass(frozen=True)
class Steps:
    min: int
    max: int
    mean: float


@dataclass(frozen=True)
class Status:
    compile_error: float
    wrong_result: float


@dataclass(frozen=True)
class Holdout:
    frac: float
    seed: int


@dataclass(frozen=True)
class Output:
    timestamps: bool
    max_context_tokens: int     # split sft_multiturn sessions into windows of this many tokens; 0 = never


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    episodes: int
    modules: tuple          # module names; empty tuple means all registered
    gpus: tuple
    combos: int
    steps: Steps
    status: Status
    holdout: Holdout
    output: Output
    path: str

    @property
    def key(self) -> str:
        """What seeds every random draw besides the seed: the profile's name."""
        return self.name


_TABLE_TYPES = {"steps": Steps, "status": Status, "holdout": Holdout, "output": Output}
_PROFILE_KEYS = {"name": str, "description": str, "episodes": int, "modules": (str, list),
                 "gpus": list, "combos": int}


def _check(table: dict, expected: dict, where: str, path: Path) -> None:
    for key in table:
        if key not in expected:
            raise UsageError(f"{path}: unknown key '{where}.{key}' (expected one of: {', '.join(expected)})")
    for key, typ in expected.items():
        if key not in table:
            raise UsageError(f"{path}: missing key '{where}.{key}'")
        value = table[key]
        ok = isinstance(value, typ) and not (typ in (int, float) and isinstance(value, bool))
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            raise UsageError(f"{path}: key '{where}.{key}' must be {name}, got {type(value).__name__} {value!r}")


def _build(cls, table: dict, where: str, path: Path):
    expected = {f.name: f.type for f in fields(cls)}
    expected = {k: {"int": int, "float": float, "bool": bool}[v] for k, v in expected.items()}
    _check(table, expected, where, path)
    return cls(**{k: (float(v) if expected[k] is float else v) for k, v in table.items()})


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile; every problem raises UsageError naming the key."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"profile not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    allowed = {"profile", *_TABLE_TYPES}
    for key in raw:
        if key not in allowed:
            raise UsageError(f"{path}: unknown table or key '{key}' (expected: {', '.join(sorted(allowed))})")
        if not isinstance(raw[key], dict):
            raise UsageError(f"{path}: '{key}' must be a table")
    for key in allowed:
        if key not in raw:
            raise UsageError(f"{path}: missing table '[{key}]'")
    top = raw["profile"]
    _check(top, _PROFILE_KEYS, "profile", path)
    tables = {k: _build(cls, raw[k], k, path) for k, cls in _TABLE_TYPES.items()}
    modules = () if top["modules"] == "all" else tuple(top["modules"])
    if isinstance(top["modules"], str) and top["modules"] != "all":
        raise UsageError(f"{path}: key 'profile.modules' must be \"all\" or a list of module names")
    profile = Profile(name=top["name"], description=top["description"], episodes=top["episodes"],
                      modules=modules, gpus=tuple(top["gpus"]), combos=top["combos"], path=str(path), **tables)
    _validate(profile, path)
    return profile


def _validate(p: Profile, path: Path) -> None:
    from .ops import REGISTRY

    def bad(key, why):
        raise UsageError(f"{path}: key '{key}' {why}")
    if not p.name or not p.name.replace("_", "").replace("-", "").isalnum():
        bad("profile.name", "must be a non-empty name of letters, digits, - and _")
    if p.episodes < 1:
        bad("profile.episodes", f"must be >= 1, got {p.episodes}")
    if p.combos < 1:
        bad("profile.combos", f"must be >= 1, got {p.combos}")
    if not p.gpus:
        bad("profile.gpus", "must name at least one GPU")
    for g in p.gpus:
        if g not in GPUS:
            bad("profile.gpus", f"names unknown GPU {g!r} (known: {', '.join(GPUS)})")
    for m in p.modules:
        if m not in REGISTRY:
            bad("profile.modules", f"names unknown module {m!r} (see `kernelstrain ops`)")
    s = p.steps
    if not (1 <= s.min <= s.mean <= s.max):
        bad("steps", f"needs 1 <= min <= mean <= max, got min={s.min} mean={s.mean} max={s.max}")
    for key in ("compile_error", "wrong_result"):
        v = getattr(p.status, key)
        if not 0.0 <= v < 0.5:
            bad(f"status.{key}", f"must be in [0, 0.5), got {v}")
    if p.output.max_context_tokens < 0:
        bad("output.max_context_tokens", f"must be >= 0 (0 = no windows), got {p.output.max_context_tokens}")
    if not 0.0 <= p.holdout.frac < 1.0:
        bad("holdout.frac", f"must be in [0, 1), got {p.holdout.frac}")
