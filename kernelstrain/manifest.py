"""The run manifest: what a dataset was made from, written beside its files by `generate`
and `merge` and read by every command that reads the dataset back (SPEC §13).

It holds the fully resolved profile (every table, defaults filled in, `modules` listed), the
seed, the generator version, the sha256 of the simulator's calibration fit and the layout —
so no reader looks for the profile by path or by name, and a profile changed, renamed or
moved after the run still reads its dataset.

>>> from kernelstrain.profiles import load_profile
>>> m = Manifest(load_profile("kernelstrain"), 0)
>>> back = parse_manifest(json.loads(dumps_manifest(m)), "manifest.json")
>>> (back.profile.key == m.profile.key, back.seed, back.layout)
(True, 0, 'episodes')
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .version import __version__
from .errors import DataError, UsageError
from .profiles import Profile, profile_from_tables, profile_tables
from .schema import SCHEMA
from .writers import MANIFEST, write_text_atomic

GENERATOR = f"kernelstrain {__version__}"


@lru_cache(maxsize=1)
def calibration_fit_sha() -> str:
    """sha256 of the calibration fit the simulator applies (calibration/h200_fit.json)."""
    return hashlib.sha256(resources.files("kernelstrain.calibration").joinpath("h200_fit.json").read_bytes()).hexdigest()


@dataclass(frozen=True)
class Manifest:
    profile: Profile
    seed: int
    generator: str = GENERATOR
    calibration_fit: str = field(default_factory=calibration_fit_sha)

    @property
    def layout(self) -> str:
        return self.profile.output.layout


def dumps_manifest(m: Manifest) -> str:
    return json.dumps({"schema": SCHEMA["manifest"], "generator": m.generator, "seed": m.seed,
                       "layout": m.layout, "calibration_fit": m.calibration_fit,
                       "profile_key": m.profile.key, "profile": profile_tables(m.profile)}, indent=1) + "\n"


def write_manifest(out: Path, m: Manifest) -> None:
    write_text_atomic(out / MANIFEST, dumps_manifest(m))


def parse_manifest(raw, where: str) -> Manifest:
    """A manifest's JSON object -> Manifest; anything malformed raises DataError naming `where`."""
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA["manifest"]:
        raise DataError(f"{where}: not a kernelstrain run manifest (schema {SCHEMA['manifest']})")
    for key, typ in (("generator", str), ("seed", int), ("layout", str), ("calibration_fit", str),
                     ("profile_key", str), ("profile", dict)):
        if not isinstance(raw.get(key), typ) or isinstance(raw.get(key), bool):
            raise DataError(f"{where}: key {key!r} must be {typ.__name__}, got {raw.get(key)!r:.60}")
    try:
        profile = profile_from_tables(raw["profile"], where)
    except UsageError as e:
        raise DataError(f"{where}: its profile does not load: {e}") from None
    if profile.key != raw["profile_key"] or profile.output.layout != raw["layout"]:
        raise DataError(f"{where}: profile_key or layout does not match its profile (edited by hand?)")
    return Manifest(profile, raw["seed"], raw["generator"], raw["calibration_fit"])


def read_manifest(data: Path) -> Manifest:
    """The manifest of a dataset directory. A dataset written before manifests existed is
    refused (exit 2): its profile cannot be known without guessing, so it is regenerated."""
    path = data / MANIFEST
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing: the dataset was written before run manifests (or is not one); "
                        "regenerate it with this kernelstrain's `generate` (same --seed and --config)") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise DataError(f"{path}: not valid JSON ({getattr(e, 'msg', e)})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    return parse_manifest(raw, str(path))
