"""`validate`: every file against its schema, the invariants of SPEC §4 and its content,
naming file and line of each problem. Streams the three training files in lockstep:
memory stays flat whatever the file size.

Content, not only hashes: every step's code is re-rendered from its variant, params, bug
and typo; the chat rows are rebuilt from the episode row (episodes.chat_rows) and compared;
speedups, attempts, arch and task fields are recomputed; stats.json is rebuilt from the
episodes; the holdout rows are compared with the plan's split when the profile is at hand.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path

from . import knobs, progress
from .dirkind import what_is
from .errors import DataError
from .fields import as_dict
from .gpus import GPUS
from .ops import REGISTRY
from .ledger import Ledger
from .schema import ENDS, EPISODE_KEYS, FAILURES, KINDS, SCHEMA, STATUSES, STEP_KEYS
from .sim import smem_cap
from .tasks import starting_rung
from .training import chat_figure
from .writers import DATASET_NAMES, FILES, RECORDS, SPLIT_CONFIGS, VALIDATION, layout_files, record_paths

STATS_SCHEMA = SCHEMA["stats"]
# Code fingerprints of arch-gated features: an ok step on a GPU without the feature must not contain them.
FEATURE_MARKERS = {"wgmma": re.compile(r"\bwgmma\."), "tma": re.compile(r"cp\.async\.bulk\.tensor"),
                   "fp4": re.compile(r"\.e2m1\b|kind::(f8f6f4|mxf8f6f4|mxf4nvf4|mxf4)\b"),   # FP4-generation mma
                   "inline_ptx": re.compile(r"\basm\s*(volatile\s*)?\(")}


# -- strict readers (merge, verify, stats): a problem is bad input, exit 2 ----------------
def read_jsonl(path: Path):
    """Yield (line number, object); a corrupt line raises DataError naming file and line."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    with fh:
        for n, raw in enumerate(progress.lines(fh, f"reading {path.name}"), 1):
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise DataError(f"{path}:{n}: not valid UTF-8") from None
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{n}: not a JSON object")
            yield n, row


def read_whole(path: Path):
    """read_jsonl of a config's file, then of its validation file where there is one
    (writers.record_paths): every row of the config, line numbers counted per file."""
    for part in record_paths(path):
        yield from read_jsonl(part)


# what `stats` and the other readers rely on: key -> type (dict keys hold these)
_STATS_SHAPE = {"generator": str, "profile": str, "seed": int, "episodes": int, "steps": int, "holdout_tasks": int,
                "status": dict, "status_pct": dict, "kind": dict, "steps_per_episode": dict, "speedup": dict,
                "by_op": dict, "by_module": dict, "by_gpu": dict, "by_impl": dict, "files": dict}


def read_stats(data: Path) -> dict:
    """stats.json of a dataset directory, with the shape the readers rely on."""
    path = data / "stats.json"
    if not data.is_dir():
        raise DataError(f"{data}: not a dataset directory")
    try:
        stats = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(what_is(data) or f"{path}: missing (an incomplete or interrupted run?)") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    if not isinstance(stats, dict) or stats.get("schema") != STATS_SCHEMA:
        raise DataError(what_is(data) or f"{path}: not a kernelstrain stats file (schema {STATS_SCHEMA})")
    for key, typ in _STATS_SHAPE.items():
        if not isinstance(stats.get(key), typ) or isinstance(stats.get(key), bool):
            raise DataError(f"{path}: key {key!r} must be {typ.__name__}, got {stats.get(key)!r:.60}")
    for sub, keys in (("steps_per_episode", ("mean", "median", "min", "max")), ("speedup", ("mean", "geomean", "max")),
                      ("status", ("ok", "wrong_result", "compile_error")),
                      ("status_pct", ("ok", "wrong_result", "compile_error"))):
        for k in keys:
            if not _number(stats[sub].get(k)):
                raise DataError(f"{path}: key {sub}.{k} must be a number, got {stats[sub].get(k)!r:.60}")
    for name, f in stats["files"].items():
        if not (isinstance(f, dict) and _count(f.get("rows")) and _count(f.get("bytes"))
                and isinstance(f.get("sha256"), str)):
            raise DataError(f"{path}: files[{name!r}] must hold rows, bytes and sha256")
    for name in ("by_op", "by_module", "by_gpu", "by_impl", "kind"):
        if not all(_count(v) for v in stats[name].values()):
            raise DataError(f"{path}: key {name!r} must map names to counts")
    return stats


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _count(v) -> bool:
    return type(v) is int and v >= 0


# -- findings ---------------------------------------------------------------------------
class Findings(list):
    """Problems, as "file:line: what"; keeps the first `limit`, counts them all."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.total = limit, 0
        self.notes: list[str] = []   # figures reported without failing (the combo split's contamination)
        self.listener = None         # called with each problem (the sessions layout tallies them per batch)

    def add(self, where: str, what: str) -> None:
        self.total += 1
        if self.listener:
            self.listener(where, what)
        if len(self) < self.limit:
            self.append(f"{where}: {what}")


def rows(path: Path, out: Findings):
    """Yield (line number, object or None) of a JSONL file; every unreadable line is a
    finding (invalid UTF-8, not JSON, not an object, cut off, a duplicate of the line before)."""
    prev = None
    with open(path, "rb") as fh:
        for n, raw in enumerate(progress.lines(fh, f"checking {path.name}"), 1):
            where = f"{path.name}:{n}"
            if not raw.endswith(b"\n"):
                out.add(where, "last line is cut off (no newline at the end: a truncated file?)")
            if raw == prev:
                out.add(where, f"duplicates line {n - 1}")
                continue
            prev = raw
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                out.add(where, f"not valid UTF-8 (byte {e.start})")
                yield n, None
                continue
            except json.JSONDecodeError as e:
                out.add(where, f"not valid JSON ({e.msg}, column {e.colno})")
                yield n, None
                continue
            if not isinstance(row, dict):
                out.add(where, f"not a JSON object (a {type(row).__name__})")
                yield n, None
                continue
            yield n, row


class Peek:
    """An iterator with one row of lookahead."""

    def __init__(self, it):
        self.it, self.head = it, next(it, None)

    def take(self):
        head, self.head = self.head, next(self.it, None)
        return head


# -- re-rendering, cached: one render per (module, gpu, dtype, shape, variant, params, bug) --
@lru_cache(maxsize=8192)
def cached_task(module: str, gpu: str, dtype: str, shape: tuple):
    from .tasks import make_task
    return make_task(REGISTRY[module], gpu, dtype, dict(shape))


@lru_cache(maxsize=8192)
def render_code(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple, bug):
    m = REGISTRY[module]
    return knobs.render(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape), bug)


@lru_cache(maxsize=8192)
def _sim(module: str, gpu: str, dtype: str, shape: tuple, tag: str, params: tuple):
    from .sim import simulate
    m = REGISTRY[module]
    return simulate(m, m.variant(tag), dict(params), cached_task(module, gpu, dtype, shape))


@lru_cache(maxsize=4096)
def with_typo(code: str, impl: str, pick: int, hip_arch: str, dtype: str = "", shape: tuple = ()):
    """(broken code, the tool's text) of slip `pick` (slips.apply) for a task of `dtype` and
    `shape` ((dim, value) pairs), or None."""
    from .slips import apply
    return apply(code, impl, pick, hip_arch, dtype, shape)


_MARKER_HINTS = {"wgmma": "wgmma.", "tma": "cp.async.bulk.tensor", "fp4": "", "inline_ptx": "asm"}


@lru_cache(maxsize=4096)
def _features(code: str) -> frozenset:
    """The arch-gated features whose fingerprints a candidate's code holds (cached: the same
    code recurs across steps and episodes)."""
    return frozenset(f for f, pat in FEATURE_MARKERS.items() if _MARKER_HINTS[f] in code and pat.search(code))


def _freeze(params: dict) -> tuple:
    return tuple(params.items())


# -- one episode ------------------------------------------------------------------------
def _pairs(field, key: str) -> bool:
    """A shape or params field: a list of {key, "value"} objects with distinct keys (fields.py)."""
    return isinstance(field, list) and all(
        isinstance(e, dict) and list(e) == [key, "value"] and isinstance(e[key], str) for e in field) \
        and len({e[key] for e in field}) == len(field)


def _types_ok(ep: dict, where: str, out: Findings) -> bool:
    """The row's shape: keys in order, field types, known module/GPU/variants."""
    if tuple(ep) != EPISODE_KEYS:
        out.add(where, f"episode keys {list(ep)} != {list(EPISODE_KEYS)}")
        return False
    want = {"id": str, "module": str, "gpu": str, "dtype": str, "shape": list, "baseline": dict, "steps": list,
            "best": dict, "attempts": dict, "elapsed_s": int, "seed": int}
    for key, typ in want.items():
        if not isinstance(ep[key], typ) or isinstance(ep[key], bool):
            out.add(where, f"{key} must be {typ.__name__}, got {ep[key]!r:.60}")
            return False
    m = REGISTRY.get(ep["module"])
    if m is None or ep["gpu"] not in GPUS:
        out.add(where, f"unknown module {ep['module']!r} or gpu {ep['gpu']!r}")
        return False
    if ep["dtype"] not in m.dtypes or not _pairs(ep["shape"], "dim") or list(as_dict(ep["shape"])) != list(m.dims) \
            or not all(type(v) is int and v >= 0 for v in as_dict(ep["shape"]).values()):
        out.add(where, f"dtype/shape {ep['dtype']!r} {ep['shape']!r:.80} are not a task of {m.name}")
        return False
    for key in ("torch_eager_ms", "torch_compile_ms"):
        if ep[key] is not None and not (_number(ep[key]) and ep[key] > 0):
            out.add(where, f"{key} must be a time > 0 or null, got {ep[key]!r:.40}")
            return False
    b = ep["baseline"]
    if list(b) != ["tag", "params", "code", "time_ms"] or not isinstance(b["code"], str) \
            or not _pairs(b["params"], "name") or not _number(b["time_ms"]) or b["time_ms"] <= 0:
        out.add(where, f"baseline must be {{tag, params, code, time_ms > 0}}, got keys {list(b)}")
        return False
    tags = {v.tag for v in m.variants}
    for i, s in enumerate(ep["steps"], 1):
        w = f"{where} step {i}"
        if not isinstance(s, dict) or tuple(s) != STEP_KEYS:
            out.add(w, f"step keys {list(s) if isinstance(s, dict) else type(s).__name__} != {list(STEP_KEYS)}")
            return False
        bad = [k for k, ok in (
            ("step", s["step"] == i and type(s["step"]) is int), ("kind", s["kind"] in KINDS),
            ("status", s["status"] in STATUSES), ("tag", isinstance(s["tag"], str) and s["tag"] in tags),
            ("params", _pairs(s["params"], "name") and all(isinstance(v, (int, float, str, bool)) for v in as_dict(s["params"]).values())),
            ("failure", s["failure"] in FAILURES if s["status"] != "ok" else s["failure"] is None),
            ("bug", s["bug"] is None or isinstance(s["bug"], str)),
            ("typo", s["typo"] is None or (type(s["typo"]) is int and s["typo"] >= 0)),
            ("code", isinstance(s["code"], str)), ("time_ms", s["time_ms"] is None or (_number(s["time_ms"]) and s["time_ms"] > 0)),
            ("smem_bytes", _count(s["smem_bytes"])), ("regs", _count(s["regs"])),
            ("error", s["error"] is None or isinstance(s["error"], str)), ("kept", isinstance(s["kept"], bool)),
            ("best_ms", _number(s["best_ms"]) and s["best_ms"] > 0), ("elapsed_s", _count(s["elapsed_s"]))) if not ok]
        if bad:
            out.add(w, f"bad {', '.join(bad)}: " + ", ".join(f"{k}={s[k]!r:.40}" for k in bad))
            return False
    if ep["end"] not in ENDS:
        out.add(where, f"end must be one of {', '.join(ENDS)}, got {ep['end']!r:.40}")
        return False
    best, att = ep["best"], ep["attempts"]
    if list(best) != ["step", "time_ms", "speedup", "speedup_vs_torch"] \
            or not all(_number(v) for k, v in best.items() if k != "speedup_vs_torch" or v is not None) \
            or list(att) != ["kept", "reverted", "errors", "rebench"] or not all(_count(v) for v in att.values()):
        out.add(where, f"best {best!r:.80} / attempts {att!r:.80} malformed")
        return False
    return True


def check_episode(ep: dict, where: str, out: Findings, ctx: "Context", index: int | None) -> bool:
    """Every check of one episode row; False when its shape is too broken to go on."""
    if not _types_ok(ep, where, out):
        return False
    from .episodes import SCHEMA, task_fields
    from .plan import task_id
    module, gpu = REGISTRY[ep["module"]], GPUS[ep["gpu"]]
    shape = tuple(as_dict(ep["shape"]).items())
    task = cached_task(ep["module"], ep["gpu"], ep["dtype"], shape)
    if ep["schema"] != SCHEMA["episode"]:
        out.add(where, f"schema {ep['schema']!r}, expected {SCHEMA['episode']!r}")
    for key, value in task_fields(module, task).items():
        if ep[key] != value:
            out.add(where, f"{key} {ep[key]!r:.60} is not {module.name}'s on {gpu.name}: expected {value!r:.60}")
    if ep["task_id"] != task_id(task):
        out.add(where, f"task_id {ep['task_id']!r}, expected {task_id(task)!r}")
    if ctx.plan is not None and index is not None and ctx.plan.task(index).key != task.key:
        out.add(where, f"episode {index} works on {task.key}, but the plan gives {ctx.plan.task(index).key}")
    for key in ("seed", "generator"):
        if ep[key] != ctx.stats.get(key):
            out.add(where, f"{key} {ep[key]!r} differs from stats.json's {ctx.stats.get(key)!r}")
    if ctx.plan is not None:      # the profile's starting rung (tasks.starting_rung)
        base = starting_rung(module, task, ctx.plan.profile.search.baseline_cap)
    else:                          # unknown profile: any rung from the module's first up
        first, tags = module.baseline_variant(), [v.tag for v in module.variants]
        tag = ep["baseline"]["tag"]
        base = module.variant(tag) if tag in tags and tags.index(tag) >= tags.index(first.tag) else first
    if ep["baseline"]["tag"] != base.tag or as_dict(ep["baseline"]["params"]) != base.defaults() \
            or ep["baseline"]["code"] != render_code(ep["module"], ep["gpu"], ep["dtype"], shape, base.tag,
                                                 _freeze(base.defaults()), None):
        out.add(where, f"baseline is not the render of {module.name}'s starting rung {base.tag} at its defaults")
    book = Ledger(ep["baseline"]["code"], ep["baseline"]["time_ms"])
    best_tag, best_params = ep["baseline"]["tag"], as_dict(ep["baseline"]["params"])
    for s in ep["steps"]:
        w = f"{where} step {s['step']}"
        _check_step(ep, s, w, out, module, gpu, shape, book.best_ms)
        mismatch = kind_mismatch(s, best_tag, best_params, book.best_code, module)
        if mismatch:
            out.add(w, mismatch)
        if s["status"] == "ok" and s["time_ms"] is not None:
            before = book.best_ms
            if s["kept"] != book.record(s["code"], s["time_ms"], s["step"]):
                out.add(w, f"kept={s['kept']} but the noise-aware keep rule says otherwise (time {s['time_ms']}, best {before})")
            if book.best_step == s["step"]:
                best_tag, best_params = s["tag"], as_dict(s["params"])
        if s["best_ms"] != book.best_ms:
            out.add(w, f"best_ms {s['best_ms']} is not the recorded best ({book.best_ms}: mean of the best's runs)")
    steps = ep["steps"]
    best = book.best_ms
    if ep["best"]["time_ms"] != best or ep["best"]["step"] != book.best_step:
        out.add(where, f"best {ep['best']} != recorded best ({best} at step {book.best_step})")
    speedup = round(ep["baseline"]["time_ms"] / best, 4)
    if ep["best"]["speedup"] != speedup:
        out.add(where, f"best.speedup {ep['best']['speedup']} != baseline/best = {speedup}")
    from .episodes import speedup_vs_torch, torch_times
    eager_ms, compile_ms = torch_times(module, task)
    if (ep["torch_eager_ms"], ep["torch_compile_ms"]) != (eager_ms, compile_ms):
        out.add(where, f"torch_eager_ms/torch_compile_ms {ep['torch_eager_ms']}/{ep['torch_compile_ms']} are not the "
                       f"calibrated reference's {eager_ms}/{compile_ms}")
    if ep["best"]["speedup_vs_torch"] != speedup_vs_torch(eager_ms, best):
        out.add(where, f"best.speedup_vs_torch {ep['best']['speedup_vs_torch']} != torch_eager_ms/best = "
                       f"{speedup_vs_torch(eager_ms, best)}")
    attempts = {"kept": sum(s["kept"] for s in steps),
                "reverted": sum(1 for s in steps if not s["kept"] and s["kind"] != "rebench" and s["status"] == "ok"),
                "errors": sum(1 for s in steps if s["status"] != "ok"),
                "rebench": sum(1 for s in steps if s["kind"] == "rebench")}
    if ep["attempts"] != attempts:
        out.add(where, f"attempts {ep['attempts']} != counted from the steps {attempts}")
    if ep["elapsed_s"] != (steps[-1]["elapsed_s"] if steps else 0):
        out.add(where, f"elapsed_s {ep['elapsed_s']} != the last step's")
    if any(a["elapsed_s"] > b["elapsed_s"] for a, b in zip(steps, steps[1:])):
        out.add(where, "elapsed_s goes backwards")
    budget = ctx.plan.profile.search.time_budget_h * 3600 if ctx.plan else None
    if ep["end"] == "time" and budget is not None and not (budget and steps and steps[-1]["elapsed_s"] >= budget):
        out.add(where, f"end time but the profile's time budget ({budget:.0f} s) was not reached")
    return True


def kind_mismatch(s: dict, best_tag: str, best_params: dict, best_code: str, module) -> str | None:
    """Why a step's kind does not say what changed relative to the best, or None."""
    params = as_dict(s["params"])
    best_params = as_dict(best_params)
    kind, changed = s["kind"], [k for k in params if params[k] != best_params.get(k, knobs.default(k))]
    if s["tag"] != best_tag:
        return None if kind == "structural" else f"kind {kind} but the variant changed ({best_tag} -> {s['tag']})"
    if kind == "structural":
        return "kind structural but the variant is unchanged"
    if kind == "rebench":
        return None if s["code"] == best_code else "kind rebench but the code is not the best's"
    if kind == "joint":
        return None if len(changed) > 1 else f"kind joint but {len(changed)} parameter(s) changed"
    if len(changed) != 1:
        return f"kind {kind} but {len(changed)} parameters changed"
    if kind == "endgame":
        try:
            values = knobs.param(module.variant(s["tag"]), changed[0]).values
            step = abs(values.index(params[changed[0]]) - values.index(best_params.get(changed[0], knobs.default(changed[0]))))
        except (KeyError, ValueError):
            return "kind endgame on an unknown parameter"
        return None if step == 1 else f"kind endgame but {changed[0]} moved {step} values"
    return None


def _check_step(ep, s, w, out, module, gpu, shape, best) -> None:
    if (s["time_ms"] is None) != (s["status"] != "ok"):
        out.add(w, "time_ms must be null exactly when status is not ok")
    if (s["status"] == "ok") == (s["error"] is not None):
        out.add(w, "error must be set exactly when status is not ok")
    if s["kept"] and s["status"] != "ok":
        out.add(w, "a non-ok step is kept")
    if s["kept"] and s["kind"] == "rebench":
        out.add(w, "a rebench is kept")
    variant = module.variant(s["tag"])
    if s["bug"] is not None and s["bug"] not in variant.bugs:
        out.add(w, f"bug {s['bug']!r} is not one of {variant.tag}'s ({', '.join(variant.bugs) or 'none'})")
        return
    if s["status"] == "ok" and (s["bug"] is not None or s["typo"] is not None):
        out.add(w, "an ok step carries a bug or typo")
    params = as_dict(s["params"])
    known = {p.name: p.values for p in variant.params} | {k: knobs.KNOBS[k].values for k in knobs.settings(params)}
    if set(params) != set(known) or any(v not in known[k] for k, v in params.items()):
        out.add(w, f"params {params} are not a configuration of {variant.tag}")
        return
    args = (ep["module"], ep["gpu"], ep["dtype"], shape, s["tag"], _freeze(params))
    code = render_code(*args, s["bug"])
    typo_error = None
    if s["typo"] is not None:
        broken = with_typo(code, module.impl, s["typo"], gpu.arch if gpu.vendor == "amd" else "", ep["dtype"], shape)
        if broken is None:
            out.add(w, f"typo {s['typo']} cannot be applied to this candidate")
            return
        code, typo_error = broken
        from .slips import failure, kind_of
        if s["failure"] != failure(kind_of(s["typo"])):
            out.add(w, f"failure {s['failure']!r} is not the class of slip {s['typo']} ({kind_of(s['typo'])}: "
                       f"{failure(kind_of(s['typo']))})")
    if s["code"] != code:
        out.add(w, f"code is not {module.name}'s render of {s['tag']}{s['params']}"
                   + (f" with bug {s['bug']}" if s["bug"] else "") + (f" and typo {s['typo']}" if s["typo"] is not None else "")
                   + f" (first difference at character {_first_diff(s['code'], code)})")
    r = _sim(*args)
    if (s["smem_bytes"], s["regs"]) != (r.smem_bytes, r.regs):
        out.add(w, f"smem_bytes/regs {s['smem_bytes']}/{s['regs']} != the simulator's {r.smem_bytes}/{r.regs}")
    if s["status"] == "compile_error":
        want = typo_error if typo_error is not None else r.error
        if s["failure"] == "arch" and typo_error is None:   # ptxas lists each offending instruction of the code
            from .messages import arch_error
            want = arch_error(variant.needs - gpu.features, cached_task(*args[:4]), module, s["code"])
        if s["error"] != want:
            out.add(w, "compile error text is not the compiler's message for this candidate")
    elif s["status"] == "ok":
        if not r.ok:
            out.add(w, f"status ok, but this candidate does not build on {gpu.name}: {(r.error or '').splitlines()[0]:.80}")
        cap = smem_cap(variant, module, gpu)
        if s["smem_bytes"] > cap:
            out.add(w, f"ok step uses {s['smem_bytes']} B shared memory > cap {cap}")
        for feature in _features(s["code"]) - gpu.features:
            out.add(w, f"ok step uses {feature} on {gpu.name} ({gpu.arch}), which lacks it")
    elif s["bug"] is None:
        out.add(w, "a wrong_result step carries no bug")


def _first_diff(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


_TARGET_RULE = "the training-target rule (README, episodes.weight)"


def _row_diff(got: dict, want: dict, source: str = "the episode's") -> str:
    """Where two rows differ, in words: the first differing key, or message; a weight that
    differs names the training-target rule."""
    for key in list(dict.fromkeys([*want, *got])):
        if got.get(key) != want.get(key):
            if key == "weight":
                return f"weight {got.get(key)!r:.10} where {_TARGET_RULE} gives {want.get(key)!r:.10}"
            if key == "messages" and isinstance(got.get(key), list):
                g, e = got[key], want[key]
                for i in range(max(len(g), len(e))):
                    a, b = (g[i] if i < len(g) else None), (e[i] if i < len(e) else None)
                    if isinstance(a, dict) and isinstance(b, dict) and a.get("weight") != b.get("weight"):
                        return (f"message {i + 1} ({b.get('role')}) has weight {a.get('weight')!r:.10} where "
                                f"{_TARGET_RULE} gives {b.get('weight')!r:.10}")
                    if a != b:
                        role = b["role"] if isinstance(b, dict) else "none"
                        return f"message {i + 1} ({role}) differs from {source}" if a is not None and b is not None \
                            else f"{len(g)} messages, {source} has {len(e)}"
            return f"{key} {got.get(key)!r:.60} != {source} {want.get(key)!r:.60}"
    return "key order differs"


# -- the dataset ------------------------------------------------------------------------
class Context:
    """What every episode is checked against: stats.json, and the plan when its profile is
    a bundled one (the holdout split and each episode's task)."""

    def __init__(self, stats: dict):
        self.stats, self.plan, self.timestamps, self.max_tokens = stats, None, None, None
        self.rebuilds = None     # validate_derived.Rebuilds: the plan's episodes rebuilt ahead in other processes
        self.id_prefix = f"{stats.get('profile')}-s{stats.get('seed')}-"     # an episode id before its index
        chat = stats.get("chat") if isinstance(stats.get("chat"), dict) else {}
        self.validation_frac = chat.get("validation_frac", 0.0)
        from .plan import make_plan
        from .profiles import PROFILE_DIR, load_profile
        for path in sorted(PROFILE_DIR.glob("*.toml")):
            try:
                profile = load_profile(path)
            except Exception:   # a bundled profile another stream is editing must not stop validate
                continue
            if profile.name == stats.get("profile") and profile.description == stats.get("profile_description"):
                self.plan = make_plan(profile, stats["seed"])
                self.timestamps = profile.output.timestamps
                self.max_tokens = profile.output.max_context_tokens
                self.validation_frac = profile.output.validation_frac
                break
        if self.max_tokens is None:      # not a bundled profile: its stats' budget, or the default profile's
            self.max_tokens = chat["max_context_tokens"] if "max_context_tokens" in chat else \
                load_profile(PROFILE_DIR / "kernelstrain.toml").output.max_context_tokens

    def chat_settings(self) -> dict:
        return {"max_context_tokens": self.max_tokens, "validation_frac": self.validation_frac}


def validate(data: Path, limit: int = 50, workers: int = 1) -> Findings:
    """All problems found in a dataset directory (the first `limit` kept, all counted). With
    `workers` > 1 the holdout contamination is measured in another process and the plan's
    episodes are rebuilt ahead in `workers` - 1 more while this one checks the files (the
    findings are the same)."""
    if limit < 1:
        raise DataError(f"--max-problems must be >= 1, got {limit}")
    out = Findings(limit)
    stats = read_stats(data)
    names = data_files(stats)
    for name in names:
        if not (data / name).is_file():
            out.add(str(data / name), "missing")
    if out:
        return out
    actual = {name: _summary(data / name) for name in names}
    for name, summary in stats["files"].items():
        if name not in actual:
            out.add("stats.json", f"files lists {name!r}, which is not a dataset file")
        elif {k: summary.get(k) for k in ("bytes", "sha256")} != {k: actual[name][k] for k in ("bytes", "sha256")}:
            out.add(name, "sha256/bytes differ from stats.json (modified or truncated?)")
    from .pools import Background
    from .validate_derived import check_derived_files
    from .validate_derived import Rebuilds
    with Background(workers > 1) as background:
        measured = background.run(measure_splits, data, stats, workers)
        ctx = Context(stats)
        sessions = stats.get("layout") == "sessions"
        if ctx.plan is not None and workers > 1:
            ctx.rebuilds = Rebuilds(ctx.plan, _first_index(stats), stats["episodes"], sessions, workers - 1)
        try:
            held = _check_holdout(data / FILES["holdout"], ctx, out)
            if sessions:
                from .validate_sessions import check_sessions_dir
                acc = check_sessions_dir(data, ctx, held, out)
            else:
                acc = _check_training(data, ctx, held, out)
        finally:
            if ctx.rebuilds is not None:
                ctx.rebuilds.close()
        _check_stats(stats, acc, actual, len(held), out, ctx.chat_settings())
        check_derived_files(data, stats, out)
        out.notes = check_holdout_splits(data, stats, out, measured())
    return out


def data_files(stats: dict) -> list[str]:
    """The data files a dataset must hold: those of every dataset of its layout, any further
    holdout split files its stats.json declares, and (sessions layout) the batches it lists."""
    splits = stats.get("holdout", {}).get("splits", {}) if isinstance(stats.get("holdout"), dict) else {}
    extra = [s.get("file") for s in splits.values() if isinstance(s, dict)]
    batches = [f for f in stats["files"] if f.startswith("batches/")] if stats.get("layout") == "sessions" else []
    return list(dict.fromkeys([*layout_files(stats.get("layout")).values(), *(f for f in extra if f in DATASET_NAMES),
                               *batches]))


def _summary(path: Path) -> dict:
    digest, size, lines = hashlib.sha256(), 0, 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return {"rows": lines, "bytes": size, "sha256": digest.hexdigest()}


def _combo(row: dict) -> tuple:
    return (row.get("module"), row.get("gpu"), row.get("dtype"), json.dumps(row.get("shape"), sort_keys=True))


def _check_holdout(path: Path, ctx: Context, out: Findings) -> set:
    """Held-out rows: each the plan's row for its task, none missing (when the plan is known)."""
    from .episodes import SCHEMA
    expected = None
    if ctx.plan is not None:
        from .holdout import holdout_rows
        expected = Peek(iter(holdout_rows(ctx.plan, "combo")))
    held = set()
    for n, row in rows(path, out):
        where = f"{path.name}:{n}"
        if row is None:
            if expected:
                expected.take()
            continue
        held.add(_combo(row))
        if row.get("schema") != SCHEMA["holdout"]:
            out.add(where, f"schema {row.get('schema')!r:.40}, expected {SCHEMA['holdout']!r}")
        if expected is None:
            continue
        want = expected.take()
        if want is None:
            out.add(where, "a held-out row the plan's split does not have")
        elif json.loads(want) != row:
            w = json.loads(want)
            what = _row_diff(row, w, "the plan's row") if row.get("task_id") == w["task_id"] else \
                f"task {row.get('task_id')!r}, the plan's split has {w['task_id']!r} here (rows missing, added or reordered)"
            out.add(where, what)
            if row.get("task_id") != w["task_id"] and expected.head is not None and \
                    json.loads(expected.head).get("task_id") == row.get("task_id"):
                expected.take()     # a deleted row: realign on the next one
    if expected is not None and expected.head is not None:
        out.add(f"{path.name}:EOF", f"held-out task {json.loads(expected.head)['task_id']} of the plan's split is missing")
    return held


def _check_training(data: Path, ctx: Context, held: set, out: Findings):
    """episodes, sft_multiturn and sft_steps in lockstep: each episode checked, its chat rows
    rebuilt and compared; returns the stats accumulated from the valid episodes."""
    from .episodes import chat_rows
    from .stats import StatsAccumulator
    from .training import is_validation, prompt_completion_rows
    from .validate_derived import plan_row
    acc = StatsAccumulator()
    names = layout_files("episodes")
    # (train, validation) of each chat config: path and row stream
    split = {k: [(data / names[k + v], Peek(rows(data / names[k + v], out))) for v in ("", VALIDATION)]
             for k in CHAT_SPLITS}
    for ep_path, n, ep, index in record_rows(data, "episodes", ctx, out):
        where = f"{ep_path.name}:{n}"
        want_id = f"{ctx.id_prefix}{index:06d}"
        in_order = ep is not None and ep.get("id") == want_id
        if ep is not None and not in_order:
            out.add(where, f"episode {ep.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)")
        valid = ep is not None and _guarded(check_episode, where, out, ep, where, out, ctx, index if in_order else None)
        if valid:
            acc.add(ep)
            if _combo(ep) in held:
                out.add(where, f"held-out combo {_combo(ep)[:3]} appears in a training file")
        part = int(isinstance(ep, dict) and is_validation(str(ep.get("task_id")), ctx.validation_frac))
        (mt_path, mt_rows), (st_path, st_rows), (pc_path, pc_rows) = (split[k][part] for k in CHAT_SPLITS)
        mt = mt_rows.take()
        expected = None
        if valid and in_order:
            if ctx.timestamps is None:
                ctx.timestamps = _stamped(mt)
            planned = ctx.plan is not None and _guarded(plan_row, where, out, ctx, index, ep, where, out)
            expected = (planned[1] if planned else _guarded(chat_rows, where, out, ep, ctx.timestamps, ctx.max_tokens)) or None
        _check_multiturn(mt, mt_rows, mt_path, want_id, expected, out)
        _check_steps(st_rows, st_path, want_id, expected, out)
        pcs = expected and prompt_completion_rows(expected[1])
        _check_steps(pc_rows, pc_path, want_id, expected and (None, pcs), out)
        if expected:
            for path, made in zip((mt_path, st_path, pc_path), (*expected, pcs)):
                acc.add_chat(path.name, map(chat_figure, made))
    for path, peek in (p for k in CHAT_SPLITS for p in split[k]):
        if peek.head is not None:
            out.add(f"{path.name}:{peek.head[0]}", "more rows than episodes and steps in episodes.jsonl")
    return acc


_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError, ArithmeticError)
CHAT_SPLITS = tuple(k for k in SPLIT_CONFIGS if k not in RECORDS)     # an episode's chat rows, by config


def record_rows(data: Path, key: str, ctx, out: Findings):
    """(path, line, row or None, plan index) of every row of
    a record (`episodes` or `sessions`) and its validation file, merged back into plan order:
    at each index the row whose id is that index's, else the earliest head. A row in the file
    its task does not belong to (training.is_validation) is a finding: no task in both splits."""
    from .training import is_validation, plan_index
    names = layout_files("sessions" if key == "sessions" else "episodes")
    parts = [(data / names[key + v], Peek(rows(data / names[key + v], out))) for v in ("", VALIDATION)]

    def order(head) -> tuple:
        row = head[1]
        try:
            return (1, plan_index(row["id"]))
        except (TypeError, KeyError, ValueError, AttributeError, IndexError):
            return (0, 0)            # a malformed row first: it holds its place in its file
    index = _first_index(ctx.stats)
    while True:
        heads = [k for k, (_, peek) in enumerate(parts) if peek.head is not None]
        if not heads:
            return
        want_id = f"{ctx.id_prefix}{index:06d}"
        here = [k for k in heads if isinstance(parts[k][1].head[1], dict) and parts[k][1].head[1].get("id") == want_id]
        part = here[0] if here else min(heads, key=lambda k: order(parts[k][1].head))
        path, peek = parts[part]
        n, row = peek.take()
        if isinstance(row, dict) and "task_id" in row:
            belongs = int(is_validation(str(row["task_id"]), ctx.validation_frac))
            if belongs != part:
                out.add(f"{path.name}:{n}", f"task {str(row['task_id'])[:60]} belongs to the "
                                            f"{('train', 'validation')[belongs]} split ({parts[belongs][0].name})")
        yield path, n, row, index
        index += 1


def _guarded(fn, where: str, out: Findings, *args):
    """fn(*args), or False with a finding when a malformed row trips it up."""
    try:
        return fn(*args)
    except _MALFORMED as e:
        out.add(where, f"malformed row ({type(e).__name__}: {e!s:.80})")
        return False


def _first_index(stats: dict) -> int:
    run = stats.get("run")
    if isinstance(run, dict) and isinstance(run.get("episodes"), int) and isinstance(stats.get("shard"), str):
        try:
            i, n = (int(x) for x in stats["shard"].split("/"))
            return run["episodes"] * i // n
        except ValueError:
            return 0
    return 0


def _stamped(mt) -> bool:
    msgs = mt[1].get("messages") if mt and mt[1] else None
    return bool(isinstance(msgs, list) and len(msgs) > 3 and isinstance(msgs[3], dict)
                and str(msgs[3].get("content", "")).startswith("[t+"))


def _check_multiturn(mt, mt_rows: "Peek", path: Path, want_id: str, expected, out: Findings) -> None:
    """The multi-turn window rows of one episode (mt is the first, already taken): as many as
    the rebuilt windows, each equal to its rebuilt row."""
    if mt is None:
        out.add(f"{path.name}:EOF", f"no row for episode {want_id}")
        return
    got = [mt]
    while mt_rows.head is not None and mt_rows.head[1] is not None and mt_rows.head[1].get("id") == want_id \
            and (expected is None or len(got) < len(expected[0])):
        got.append(mt_rows.take())
    for k, (n, row) in enumerate(got):
        if row is None:
            continue
        where = f"{path.name}:{n}"
        if row.get("id") != want_id:
            out.add(where, f"row of episode {row.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)")
        elif expected is not None and row != expected[0][k]:
            out.add(where, _row_diff(row, expected[0][k]))
    if expected is not None and len(got) < len(expected[0]):
        out.add(f"{path.name}:{got[-1][0]}", f"episode {want_id} has {len(got)} window rows, expected {len(expected[0])}")


def _check_steps(st_rows: Peek, path: Path, want_id: str, expected, out: Findings) -> None:
    """The step rows of one episode: as many as its steps, each the rebuilt row."""
    want_rows = expected[1] if expected is not None else None
    got = []
    while st_rows.head is not None and (st_rows.head[1] is None or st_rows.head[1].get("episode_id") == want_id) \
            and (want_rows is None or len(got) < len(want_rows)):
        got.append(st_rows.take())
    if want_rows is None:
        return
    for k, want in enumerate(want_rows):
        if k >= len(got):
            line = st_rows.head[0] if st_rows.head is not None else "EOF"
            out.add(f"{path.name}:{line}", f"missing the row of {want['id']} ({len(got)} of {len(want_rows)} step rows found)")
            return
        n, row = got[k]
        if row is None:
            continue
        if row.get("id") != want["id"]:
            out.add(f"{path.name}:{n}", f"row {row.get('id')!r:.40}, expected {want['id']} here (lines swapped, missing or added)")
        elif row != want:
            out.add(f"{path.name}:{n}", _row_diff(row, want))


def _check_stats(stats: dict, acc, actual: dict, holdout_rows: int, out: Findings, chat: dict) -> None:
    """stats.json against what the files hold, key by key."""
    from types import SimpleNamespace
    profile = SimpleNamespace(name=stats.get("profile"), description=stats.get("profile_description"))
    files = dict(actual)
    want = acc.result(profile, stats.get("seed"), holdout_rows, files, stats.get("shard"), stats.get("holdout"),
                      stats.get("layout", "episodes"), stats.get("batch_size"), chat)
    if "run" in stats:
        want["run"] = stats["run"]
    if want["generator"] != stats.get("generator"):
        want["generator"] = stats.get("generator")   # the episodes' generator field is checked against it
    for key in list(dict.fromkeys([*want, *stats])):
        if key == "files":
            for name, f in want["files"].items():
                if stats["files"].get(name, {}).get("rows") != f["rows"]:
                    out.add("stats.json", f"files[{name!r}].rows {stats['files'].get(name, {}).get('rows')} != the file's {f['rows']} lines")
        elif stats.get(key) != want.get(key):
            out.add("stats.json", f"{key} {json.dumps(stats.get(key))[:80]} != from the files {json.dumps(want.get(key))[:80]}")


def measure_splits(data: Path, stats: dict, workers: int = 1) -> dict | str | None:
    """contamination.measure (in `workers` processes) of every holdout split stats.json lists;
    None when there is none or a file is missing; what went wrong (a str) when the files
    cannot be measured."""
    from .contamination import measure
    splits = stats.get("holdout", {}).get("splits", {})
    if not splits or any(not (data / s["file"]).exists() for s in splits.values()):
        return None
    try:
        return measure(data, {name: s["file"] for name, s in splits.items()}, workers)
    except _MALFORMED + (UnicodeDecodeError,) as e:
        return f"{type(e).__name__}: {e!s:.80}"


def check_holdout_splits(data: Path, stats: dict, out: Findings, found) -> list[str]:
    """Check every holdout split's contamination, measured again (`found`: measure_splits'
    result): an unseen_op / unseen_gpu split
    fails when training has an episode of a held op / GPU or any normalized match of a
    held task's solution, baseline or reference; the combo split's figures are reported
    (returned as notes), not failed. Figures that differ from stats.json are findings."""
    splits = stats.get("holdout", {}).get("splits", {})
    missing = [s["file"] for s in splits.values() if not (data / s["file"]).exists()]
    for name in missing:
        out.add(str(data / name), "missing")
    if missing or not splits:
        return []
    if isinstance(found, str):
        out.add("stats.json", f"holdout contamination cannot be measured on these files ({found})")
        return []
    trained = {(REGISTRY[m].op, gpu) for m, gpu, _, _ in found["training_tasks"]}
    notes = []
    for name, s in splits.items():
        figures, where = found["splits"][name], data / s["file"]
        if figures != s.get("contamination"):
            out.add("stats.json", f"holdout split {name}: contamination figures differ from the data's")
        held = [("op", op) for op in s.get("ops", [])] + [("gpu", gpu) for gpu in s.get("gpus", [])]
        for kind, value in held:
            if any((op if kind == "op" else gpu) == value for op, gpu in trained):
                out.add(str(where), f"leak: held-out {kind} {value} has episodes in training")
        ex, n = figures["exact"], figures["tasks"]
        summary = (f"exact normalized matches in training: solution {ex['solution']}/{n}, baseline "
                   f"{ex['baseline']}/{n}, reference {ex['reference']}/{n}; max 13-gram overlap of solutions "
                   f"{figures['ngram']['solution_ngram']['max']:.2f} (kernel-specific "
                   f"{figures['ngram']['solution_ngram_specific']['max']:.2f})")
        if name == "combo":
            notes.append(f"holdout split combo ({s['file']}): {summary}")
        elif ex["any"]:
            leaked = [t["task_id"] for t in found["per_task"][name]
                      if t["solution_exact"] or t["baseline_exact"] or t["reference_exact"]]
            out.add(str(where), f"leak: {summary} (tasks {', '.join(leaked[:5])}{' ...' if len(leaked) > 5 else ''})")
    return notes
