"""Profiles: configs/*.toml read with tomllib into frozen, validated objects.

>>> p = load_profile(DEFAULT_PROFILE)
>>> p.name, p.episodes, p.steps.mean
('kernelstrain', 11514, 24.5)
"""
from __future__ import annotations

import hashlib
import json
import math
import tomllib
from dataclasses import MISSING, asdict, dataclass, fields, replace
from functools import cached_property
from pathlib import Path

from .clock import Clock
from .errors import UsageError
from .gpus import GPUS
from .knobs import KNOBS
from .ops import REGISTRY
from .slips import NAMES

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
    splits: tuple = ("combo",)      # what is unseen: combo, unseen_op, unseen_gpu (SPLITS)
    unseen_ops: tuple = ()          # ops (both impls) the unseen_op split holds out
    unseen_gpus: tuple = ()         # GPUs the unseen_gpu split holds out


@dataclass(frozen=True)
class Output:
    timestamps: bool
    max_context_tokens: int     # split sft_multiturn sessions into windows of this many tokens; 0 = never
    layout: str = "episodes"    # LAYOUTS: episodes (episodes + sft files) or sessions (sessions.jsonl + batches)
    batch_size: int = 100       # sessions per batches/batch_NNN.jsonl (sessions layout)
    validation_frac: float = 0.0  # share of training tasks whose chat rows go to the validation files (training.py)


@dataclass(frozen=True)
class Search:
    """How the simulated engineer searches (engine.py); the defaults are the default profile's."""
    # The agent may stop early on convergence: its budget is drawn above steps.mean so that
    # episodes still average steps.mean. Retries, re-measurements and owed failures take steps
    # where no new failure is drawn, and many compile failures wait for a limit to be near.
    budget_scale: float = 2.0       # step budget drawn at this multiple of steps.mean
    compile_scale: float = 4.3      # per-step compile-error draw = status.compile_error * this
    failure_scale: float = 0.9      # per-step wrong-result draw = status.wrong_result * this (a bug rides on
                                    # the move the engineer was making, and its repair is a step of its own)
    patience_min: int = 4           # steps in a row without a keep, no rung left worth climbing, before
    patience_max: int = 8           # converging: drawn in [min, max] (engine.Episode.converged); enough to
                                    # finish the coordinate search of a rung's two or three parameters
    skip_min: float = 0.3           # an engineer's habit of skipping the next rung up for one further up: drawn in
    skip_max: float = 0.7           # [min, max] per episode (engine.Habits.skip; paths vary between episodes)
    expert_first: float = 0.15      # share of engineers who rewrite straight to the top rung at the first step
    stepwise: bool = False          # a climb toward a rung that raises the ceiling goes one rung at a time, each
                                    # measured (and, once it leads, tuned) on the way up (engine.propose_raise)
    spread: int = 2                 # a neighbour of the best moves one parameter up to this many values
    contender: float = 1.15         # a climb that lost by less than this factor, at the parameters it carried
                                    # over, is tuned before it is judged (retuning a rewrite's inherited
                                    # tiles and launch shape recovers some 5-15%, rarely more)
    contender_steps: int = 3        # ... by coordinate search, until this many steps in a row find nothing
    revisits: int = 0               # contenders whose steps ran out unsettled, taken up again once the best's
                                    # neighbourhood is settled and no rung is left (engine.propose_revisit)
    reprobe: bool = False           # a new best of the same rung re-opens every parameter (off: those that lost by
                                    # more than the gain stay settled; engine.Line.moved)
    ablations: int = 1              # techniques of the best an episode ablates (each once, to learn what it buys)
    joints: int = 1                 # joint moves of two near-tied parameters once a best's search is settled
    interact: bool = False          # ... or of two interacting ones (engine.INTERACT_LOSS: tile M x N, warps x stages)
                                    # that each lost alone by a little; with probe_all, patience waits for them
    roofline_near: float = 1.25     # a best this close to its floor (roofline + one launch) leaves no rewrite or
                                    # tune worth a step: one probe, then converge (engine.Episode.at_roofline)
    open_ideas: bool = True         # patience does not end a search while its own evidence points at an untried
                                    # neighbour of the best: the way the last keep's parameter paid, on; the other way
                                    # of a parameter that lost one way; a parameter of the best's rung never moved
                                    # there (engine.Episode.open_ideas)
    thorough: bool = False          # a long session (kernelinfer) settles every close call it sees, walks the joint
                                    # moves of its settled parameters whatever its habit, and ablates one technique
                                    # of the best before it stops (engine.Episode.finish)
    tie_wins: bool = False          # a parameter whose walk passed configs measured faster than the best inside the noise
                                    # is a tie there (a negative margin), not settled: its joint moves stay open (engine.along)
    retry: bool = False             # a climb that lost by under `contender` is written once more at the best's parameters
                                    # once the best's tuning changed the ones it carries over (engine.Episode.retries)
    across: bool = False            # interacting pairs include warps x the block a CTA covers (engine.ACROSS), not only pairs
                                    # of one profiler group (engine.POINTS_AT)
    joint_ways: bool = False        # a joint move combines the ways (parameter and direction) that each lost alone by under its
                                    # limit, not any way of parameters whose better way did (engine.Episode.joint_moves)
    runner_up: float = 0.0          # an ablation (a rung below the best, written at its parameters) within this factor of the
                                    # best is tuned as a contender before it is left (engine.Episode.contend); 0: never
    coupled: int = 0                # joint moves of coupled knobs (tile M x N, stages x tile, warps x the block a CTA covers)
                                    # per best, once its one-value neighbourhood is exhausted while its profile still
                                    # points at them and it is far from its floor (engine.Episode.propose_coupled)
    probe_all: bool = False         # patience waits until every parameter of the best had a neighbour tried
                                    # (off: until one had; engine.Episode.probed)
    flat_stop: bool = False         # the search ends once the best's one-value neighbourhood is flat: every neighbour
                                    # measured, or its mirror measured inside the noise (engine.Episode.flat)
    refail: float = 0.0             # probability that the fix of a slip fails to build again
    limit_rungs: int = 1            # rungs above the best whose too-big configs a rewrite may try
    backoff: float = 0.0            # probability of answering a limit failure (smem, resources) by
                                    # backing one parameter off one value (engine.propose_backoff)
    learn_limits: bool = False      # the feasibility memory (limits.py): a limit or arch failure is
                                    # not repeated (off: the default profile's figures are tuned without it)
    typo_weight: float = 1.0        # weight of a typo among the compile-error kinds (limits: 4/3/2)
    slip_weights: tuple = ()        # ((kind, weight), ...): slips (kernelstrain/slips) besides the typo, whose
                                    # weight is typo_weight; TOML: slip_weights = {const_cast = 0.1, ...}
    owed_share: float = 0.92        # a compile error drawn with no limit near is owed, not a typo (short
                                    # episodes pay fewer owed failures: the typo share stays under qa's 0.6)
    knobs: tuple = ("min_blocks", "main_unroll")  # generic launch knobs (knobs.KNOBS) added to
                                    # every rung where its code has a place; the slips `bound`/`optin` are opt-in (kernelinfer)
    one_impl_per_combo: bool = False  # (op, gpu, dtype, shape) unique: one impl per combo
    time_budget_h: float = 0.0      # simulated hours after which no new step starts (0 = none): engine.out_of_time
    baseline_cap: float = 67.0      # start at the lowest rung within this factor of the fastest (tasks.starting_rung); 0 = first rung
    eager_cap: float = 67.0         # ... and within this factor of the PyTorch eager reference (else the fastest
                                    # rung): no baseline 400x slower than what torch already runs; 0 = no cap


@dataclass(frozen=True)
class Fused:
    """[fused]: the profile's tasks are fused programs (kernelstrain/fused), not op modules."""
    programs: int                   # tasks: the first this many usable programs of the grammar's stream
    seed: int = 0                   # the grammar stream (`tasks fused --seed`)
    impls: tuple = ("cuda", "triton")   # each program's language, drawn by hash
    tasks: str = ""                 # a `tasks filter` output directory to take the programs from instead


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    episodes: int
    modules: tuple          # module names ("all" in the TOML: every registered module, resolved at load)
    gpus: tuple
    combos: int
    steps: Steps
    status: Status
    holdout: Holdout
    output: Output
    path: str
    search: Search = Search()
    clock: object = None      # clock.Clock; the default profile's when the table is left out
    shapes: dict = None       # module -> extra shapes (tuple of dicts) on top of its menu
    fused: Fused | None = None  # [fused]: tasks are fused programs (modules = "fused")
    min_floor_launches: float = 0.0   # [profile]: a combo whose roofline is under this many kernel launches is no
                                      # task (plan.all_combos); 0 (and left out of the tables): every combo
    min_room: float = 0.0             # [profile]: a combo whose ladder's fastest config (plan.room) is under this many times
                                      # faster than its baseline is no task (plan.all_combos); 0 (left out): every combo

    @cached_property
    def key(self) -> str:
        """What seeds every random draw besides the seed: the sha256 of the profile's content
        that shapes episodes — every table but [output] (how rows are written), without the
        name, the description or the episode count (a longer run extends a shorter one). Two
        profiles that differ in a setting draw different streams, whatever their names."""
        tables = profile_tables(self)
        shaping = {k: v for k, v in tables.items() if k != "output"}
        shaping["profile"] = {k: v for k, v in tables["profile"].items() if k not in ("name", "description", "episodes")}
        return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:32]

    @cached_property
    def tasks_key(self) -> str:
        """What seeds the plan's draws (which combos, which are held out, their order): the
        sha256 of the tables that define tasks — modules, GPUs, combo count, extra shapes, the
        holdout and fused tables. Tuning the engineer ([search], [steps], [status], [clock]) changes
        the episodes (`key`), never which tasks a run holds or holds out."""
        tables = profile_tables(self)
        defining = {k: tables[k] for k in ("shapes", "holdout", "fused") if k in tables}
        defining["profile"] = {k: v for k, v in tables["profile"].items()
                               if k in ("modules", "gpus", "combos", "min_floor_launches", "min_room")}
        return hashlib.sha256(json.dumps(defining, sort_keys=True).encode()).hexdigest()[:32]


def profile_tables(p: Profile) -> dict:
    """The profile as the tables of its TOML file, every default filled in and `modules`
    resolved to the module list: what a dataset's manifest records, read back by
    profile_from_tables (the path is where it was read from, not content)."""
    def table(record) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(record).items()}
    search = table(p.search)
    search["slip_weights"] = dict(p.search.slip_weights)
    for key in ("coupled", "runner_up"):       # written only where set: a profile without them keeps its key (its streams)
        if not search[key]:
            del search[key]
    tables = {"profile": {"name": p.name, "description": p.description, "episodes": p.episodes,
                          "modules": "fused" if p.fused else list(p.modules), "gpus": list(p.gpus),
                          "combos": p.combos,
                          # written only where set: a profile without it keeps its keys (its streams) and manifest
                          **({"min_floor_launches": p.min_floor_launches} if p.min_floor_launches else {}),
                          **({"min_room": p.min_room} if p.min_room else {})},
              **{k: table(getattr(p, k)) for k in _TABLE_TYPES}, "search": search,
              "clock": table(p.clock), "shapes": {m: [dict(s) for s in shapes] for m, shapes in (p.shapes or {}).items()}}
    if p.fused:
        tables["fused"] = table(p.fused)
    return tables


_TABLE_TYPES = {"steps": Steps, "status": Status, "holdout": Holdout, "output": Output}
_OPTIONAL_TABLES = ("search", "clock", "shapes", "fused")     # left out: the default profile's behaviour
_PROFILE_KEYS = {"name": str, "description": str, "episodes": int, "modules": (str, list),
                 "gpus": list, "combos": int}
_PROFILE_OPTIONAL = {"min_floor_launches": float, "min_room": float}


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
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{path}: key '{where}.{key}' must be a finite number, got {value!r}")
        if not ok:
            name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
            raise UsageError(f"{path}: key '{where}.{key}' must be {name}, got {type(value).__name__} {value!r}")


def _build(cls, table: dict, where: str, path: Path):
    """A table -> cls; a field with a default may be left out (a list becomes a tuple)."""
    types = {"int": int, "float": float, "bool": bool, "tuple": list, "str": str}
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    expected = {f.name: types[f.type] for f in fields(cls)}
    _check({**{k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items() if k not in table}, **table},
           expected, where, path)
    for k, v in table.items():
        if expected[k] is list and not all(isinstance(x, str) for x in v):
            raise UsageError(f"{path}: key '{where}.{k}' must be a list of strings, got {v!r}")
    convert = {float: float, list: tuple}
    return cls(**{k: convert.get(expected[k], lambda x: x)(v) for k, v in table.items()})


def resolve(config: str | Path) -> Path:
    """A profile by path, or by the name of a bundled one (`kernelinfer` ->
    configs/kernelinfer.toml) when no such file exists."""
    path = Path(config)
    bundled = PROFILE_DIR / f"{config}.toml"
    if not path.is_file() and path.name == str(config) and path.suffix == "" and bundled.is_file():
        return bundled
    return path


def bundled_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile (a path, or a bundled profile's name); every problem
    raises UsageError naming the key."""
    path = resolve(path)
    return profile_from_tables(_read_toml(path), path)


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))    # -sig: a BOM from a Windows editor is fine
    except FileNotFoundError:
        raise UsageError(f"profile not found: {path} (bundled profiles: {', '.join(bundled_names())})") from None
    except IsADirectoryError:
        raise UsageError(f"profile {path} is a directory, not a TOML file") from None
    except OSError as e:
        raise UsageError(f"cannot read profile {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None


def profile_from_tables(raw: dict, path: Path | str) -> Profile:
    """A profile's tables (a TOML file's, or a manifest's record of them) -> a validated
    Profile; `path` names the source in messages and becomes Profile.path."""
    path = Path(path)
    allowed = {"profile", *_TABLE_TYPES, *_OPTIONAL_TABLES}
    for key in raw:
        if key not in allowed:
            raise UsageError(f"{path}: unknown table or key '{key}' (expected: {', '.join(sorted(allowed))})")
        if not isinstance(raw[key], dict):
            raise UsageError(f"{path}: '{key}' must be a table")
    for key in ("profile", *_TABLE_TYPES):
        if key not in raw:
            raise UsageError(f"{path}: missing table '[{key}]'")
    top = raw["profile"]
    optional = {k: top[k] for k in _PROFILE_OPTIONAL if k in top}
    _check(top, {**_PROFILE_KEYS, **{k: _PROFILE_OPTIONAL[k] for k in optional}}, "profile", path)
    tables = {k: _build(cls, raw[k], k, path) for k, cls in _TABLE_TYPES.items()}
    if isinstance(top["modules"], str) and top["modules"] not in ("all", "fused"):
        raise UsageError(f"{path}: key 'profile.modules' must be \"all\", \"fused\" or a list of module names")
    if (top["modules"] == "fused") != ("fused" in raw):
        raise UsageError(f"{path}: modules = \"fused\" and a [fused] table go together")
    modules = (tuple(REGISTRY) if top["modules"] == "all" else () if top["modules"] == "fused"
               else _names(top["modules"], "profile.modules", path))
    _names(top["gpus"], "profile.gpus", path)
    search = dict(raw.get("search", {}))
    weights = _slip_weights(search.pop("slip_weights", {}), path)
    tables["search"] = replace(_build(Search, search, "search", path), slip_weights=weights)
    tables["clock"] = Clock.from_table(raw.get("clock", {}), path)
    tables["shapes"] = _shapes(raw.get("shapes", {}), path)
    tables["fused"] = _fused(raw["fused"], path) if "fused" in raw else None
    profile = Profile(name=top["name"], description=top["description"], episodes=top["episodes"],
                      modules=modules, gpus=tuple(top["gpus"]), combos=top["combos"], path=str(path),
                      min_floor_launches=float(optional.get("min_floor_launches", 0.0)),
                      min_room=float(optional.get("min_room", 0.0)), **tables)
    _validate(profile, path)
    return profile


def _fused(table: dict, path: Path) -> Fused:
    fused = _build(Fused, table, "fused", path)
    if fused.programs < 1 or fused.seed < 0:
        raise UsageError(f"{path}: key 'fused.programs' must be >= 1 and 'fused.seed' >= 0")
    if not fused.impls or set(fused.impls) - {"cuda", "triton"}:
        raise UsageError(f"{path}: key 'fused.impls' must list cuda and/or triton, got {list(fused.impls)}")
    return fused


def _slip_weights(table, path: Path) -> tuple:
    """[search] slip_weights = {kind = weight, ...}: known non-typo kinds, weights >= 0."""
    if not isinstance(table, dict):
        raise UsageError(f"{path}: key 'search.slip_weights' must be a table of kind = weight")
    for kind, w in table.items():
        if kind not in NAMES[1:]:
            raise UsageError(f"{path}: key 'search.slip_weights' names unknown slip kind {kind!r} "
                             f"(known: {', '.join(NAMES[1:])}; the typo's weight is typo_weight)")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise UsageError(f"{path}: key 'search.slip_weights.{kind}' must be a number >= 0, got {w!r}")
    return tuple((k, float(table[k])) for k in NAMES[1:] if k in table)


def _shapes(table: dict, path: Path) -> dict:
    """[shapes]: module = [{dim = value, ...}, ...], extra shapes for a module's menu."""
    out = {}
    for module, shapes in table.items():
        if not isinstance(shapes, list) or not all(
                isinstance(s, dict) and s and all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                                  for v in s.values()) for s in shapes):
            raise UsageError(f"{path}: key 'shapes.{module}' must be a list of tables of positive integers")
        out[module] = tuple(dict(s) for s in shapes)
    return out


def _names(values: list, key: str, path: Path) -> tuple:
    """A non-empty list of distinct strings."""
    for v in values:
        if not isinstance(v, str):
            raise UsageError(f"{path}: key '{key}' must list names (strings), got {type(v).__name__} {v!r}")
    if not values:
        raise UsageError(f"{path}: key '{key}' is an empty list (name at least one"
                         + (', or write "all")' if key == "profile.modules" else ")"))
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise UsageError(f"{path}: key '{key}' names {', '.join(dup)} more than once")
    return tuple(values)


LAYOUTS = ("episodes", "sessions")
SPLITS = ("combo", "unseen_op", "unseen_gpu")   # what a holdout split holds out (plan.split_combos)
MAX_EPISODES = 10_000_000     # the default profile has 11,514; past this a run is surely a typo
MAX_STEPS = 1_000             # kernelinfer's longest sessions have 200 steps
MAX_COMBOS = 1_000_000
MAX_TIME_BUDGET_H = 100.0     # a session budget of simulated hours; past this it is surely a typo
MAX_FAILURE = 0.5             # the two failure rates together: most steps must still run


def _validate(p: Profile, path: Path) -> None:

    def bad(key, why):
        raise UsageError(f"{path}: key '{key}' {why}")
    if not p.name or not p.name.replace("_", "").replace("-", "").isalnum():
        bad("profile.name", "must be a non-empty name of letters, digits, - and _")
    if not 1 <= p.episodes <= MAX_EPISODES:
        bad("profile.episodes", f"must be between 1 and {MAX_EPISODES:,}, got {p.episodes:,}")
    if not 1 <= p.combos <= MAX_COMBOS:
        bad("profile.combos", f"must be between 1 and {MAX_COMBOS:,}, got {p.combos:,}")
    if not p.gpus:
        bad("profile.gpus", "must name at least one GPU")
    if p.min_floor_launches < 0:
        bad("profile.min_floor_launches", f"must be >= 0 (kernel launches; 0 = every combo), got {p.min_floor_launches}")
    if p.min_room != 0 and p.min_room < 1:
        bad("profile.min_room", f"must be 0 (every combo) or >= 1 (times faster than the baseline), got {p.min_room}")
    for g in p.gpus:
        if g not in GPUS:
            bad("profile.gpus", f"names unknown GPU {g!r} (known: {', '.join(GPUS)})")
    for m in p.modules:
        if m not in REGISTRY:
            bad("profile.modules", f"names unknown module {m!r} (see `kernelstrain ops`)")
    s = p.steps
    if not (1 <= s.min <= s.mean <= s.max <= MAX_STEPS):
        bad("steps", f"needs 1 <= min <= mean <= max <= {MAX_STEPS}, got min={s.min} mean={s.mean} max={s.max}")
    for key in ("compile_error", "wrong_result"):
        v = getattr(p.status, key)
        if not 0.0 <= v < MAX_FAILURE:
            bad(f"status.{key}", f"must be in [0, {MAX_FAILURE}), got {v}")
    total = p.status.compile_error + p.status.wrong_result
    if total >= MAX_FAILURE:
        bad("status", f"failure rates sum to {total:g}; they must sum to less than {MAX_FAILURE} "
                      "(most steps of an episode must run)")
    for m, shapes in (p.shapes or {}).items():
        if m not in REGISTRY:
            bad(f"shapes.{m}", f"names unknown module {m!r} (see `kernelstrain ops`)")
        for shape in shapes:
            if set(shape) != set(REGISTRY[m].dims):
                bad(f"shapes.{m}", f"has a shape with dims {', '.join(shape)}; {m} needs {', '.join(REGISTRY[m].dims)}")
    q = p.search
    if q.spread < 1:
        bad("search.spread", f"must be >= 1 (values a tuning move may go from the best's), got {q.spread}")
    if not 0.0 <= q.expert_first <= 1.0:
        bad("search.expert_first", f"needs 0 <= expert_first <= 1, got {q.expert_first}")
    if not 0.0 <= q.skip_min <= q.skip_max <= 1.0:
        bad("search.skip_min", f"needs 0 <= skip_min <= skip_max <= 1, got {q.skip_min}, {q.skip_max}")
    if not 1 <= q.patience_min <= q.patience_max:
        bad("search.patience_min", f"needs 1 <= patience_min <= patience_max, got {q.patience_min}, {q.patience_max}")
    if not 0.0 <= q.refail < 1.0 or not 0.0 <= q.owed_share <= 1.0 or not 0.0 <= q.backoff <= 1.0:
        bad("search", "refail must be in [0, 1), owed_share and backoff in [0, 1]")
    if not 0.0 <= q.time_budget_h <= MAX_TIME_BUDGET_H:
        bad("search.time_budget_h", f"must be in [0, {MAX_TIME_BUDGET_H}] hours (0 = no budget), got {q.time_budget_h}")
    if q.eager_cap < 0 or q.baseline_cap < 0:
        bad("search", "baseline_cap and eager_cap must be >= 0 (0: no cap)")
    if q.roofline_near < 1.0:
        bad("search.roofline_near", f"must be >= 1 (a factor over the floor), got {q.roofline_near}")
    if q.contender < 1.0 or min(q.contender_steps, q.ablations, q.joints, q.revisits) < 0:
        bad("search", "contender must be >= 1; contender_steps, ablations, joints and revisits >= 0")
    if q.limit_rungs < 0:
        bad("search.limit_rungs", f"must be >= 0, got {q.limit_rungs}")
    if q.budget_scale < 1.0 or q.compile_scale <= 0 or q.failure_scale <= 0 or q.typo_weight < 0:
        bad("search", "budget_scale must be >= 1; compile_scale, failure_scale > 0; typo_weight >= 0")
    for k in q.knobs:
        if k not in KNOBS:
            bad("search.knobs", f"names unknown knob {k!r} (known: {', '.join(KNOBS)})")
    if p.output.max_context_tokens < 0:
        bad("output.max_context_tokens", f"must be >= 0 (0 = no windows), got {p.output.max_context_tokens}")
    if p.output.layout not in LAYOUTS:
        bad("output.layout", f"must be one of {', '.join(LAYOUTS)}, got {p.output.layout!r}")
    if not 0 <= p.output.validation_frac < 1:
        bad("output.validation_frac", f"must be in [0, 1), got {p.output.validation_frac}")
    if p.output.batch_size < 1:
        bad("output.batch_size", f"must be >= 1, got {p.output.batch_size}")
    if not 0.0 <= p.holdout.frac < 1.0:
        bad("holdout.frac", f"must be in [0, 1), got {p.holdout.frac}")
    if p.holdout.seed < 0:
        bad("holdout.seed", f"must be >= 0, got {p.holdout.seed}")
    if not p.description.strip():
        bad("profile.description", "must not be empty")
    _validate_splits(p, bad)


def _validate_splits(p: Profile, bad) -> None:
    """The holdout splits name known splits once each, combo among them (it writes the
    `holdout` config every dataset has), and what they hold out leaves every family and
    at least one GPU in training."""
    h = p.holdout
    unknown = [s for s in h.splits if s not in SPLITS]
    if unknown or len(set(h.splits)) != len(h.splits) or "combo" not in h.splits:
        bad("holdout.splits", f"must list each of {', '.join(SPLITS)} at most once, combo included; got {list(h.splits)}")
    modules = [REGISTRY[m] for m in p.modules or REGISTRY]
    ops = {m.op for m in modules}
    for key, values, known in (("unseen_ops", h.unseen_ops, ops), ("unseen_gpus", h.unseen_gpus, set(p.gpus))):
        split = "unseen_op" if key == "unseen_ops" else "unseen_gpu"
        if (split in h.splits) != bool(values):
            bad(f"holdout.{key}", f"must be non-empty exactly when holdout.splits includes {split}")
        for v in values:
            if not isinstance(v, str):
                bad(f"holdout.{key}", f"must list names (strings), got {type(v).__name__} {v!r}")
            if v not in known:
                bad(f"holdout.{key}", f"names {v!r}, not one of the profile's {'ops' if split == 'unseen_op' else 'GPUs'}")
    kept = {m.family for m in modules if m.op not in h.unseen_ops}
    lost = sorted({m.family for m in modules} - kept)
    if lost:
        bad("holdout.unseen_ops", f"holds out every op of famil{'ies' if len(lost) > 1 else 'y'} {', '.join(lost)}")
    if set(p.gpus) <= set(h.unseen_gpus):
        bad("holdout.unseen_gpus", "holds out every GPU of the profile")
