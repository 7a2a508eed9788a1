"""`validate`: every file against its schema, the invariants of SPEC §4 and its content,
naming file and line of each problem. Streams the three training files in lockstep:
memory stays flat whatever the file size.

Content, not only hashes: every step's code is re-rendered from its variant, params, bug
and typo; the chat rows are rebuilt from the episode row (episodes.chat_rows) and compared;
speedups, attempts, arch and task fields are recomputed; stats.json is rebuilt from the
episodes; the holdout rows are compared with the plan's split. The run comes from the dataset's
manifest (manifest.py): its resolved profile and seed, never a profile looked up by name.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from . import knobs, progress
from .contamination import measure
from .episodes import kind_mismatch, speedup_vs_torch, task_fields, torch_times
from .fields import as_dict
from .gpus import GPUS
from .holdout import holdout_rows
from .ledger import Ledger
from .messages import arch_error, fails_at_launch, load_inline_error
from .ops import REGISTRY
from .plan import make_plan, task_id
from .reading import is_count, is_number
from .rerender import cached_task, render_code, simulated, with_typo
from .schema import CHECKS, ENDS, EPISODE_KEYS, FAILURES, KINDS, SCHEMA, STATUSES, STEP_KEYS
from .sim import smem_cap
from .slips import failure, kind_of
from .engine import baseline_rung

# Code fingerprints of arch-gated features: an ok step on a GPU without the feature must not contain them.
FEATURE_MARKERS = {"wgmma": re.compile(r"\bwgmma\."), "tma": re.compile(r"cp\.async\.bulk\.tensor"),
                   "fp4": re.compile(r"\.e2m1\b|kind::(f8f6f4|mxf8f6f4|mxf4nvf4|mxf4)\b"),   # FP4-generation mma
                   "inline_ptx": re.compile(r"\basm\s*(volatile\s*)?\(")}


# -- findings ---------------------------------------------------------------------------
class Findings(list):
    """Problems, as "file:line: what"; keeps the first `limit` (and the id of the check each
    fails, in `checks`), counts them all."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.total = limit, 0
        self.checks: list[str] = []  # CHECKS id of each kept problem
        self.notes: list[str] = []   # figures reported without failing (the combo split's contamination)
        self.listener = None         # called with each problem (the sessions layout tallies them per batch)

    def add(self, where: str, what: str, check: str) -> None:
        if check not in CHECKS:
            raise ValueError(f"unknown check id {check!r}")
        self.total += 1
        if self.listener:
            self.listener(where, what, check)
        if len(self) < self.limit:
            self.append(f"{where}: {what}")
            self.checks.append(check)


class Later:
    """A check `fn(found)` (its findings into `found`) run where the caller has time for it (`run`:
    in a wait on a pool's workers), its outcome handed over where the plain order asks for it
    (`result(out)`): its findings added to `out` then, in their order, and its value returned or
    what it raised raised there. Findings and errors are those of calling fn(out) at that point (fn
    reads nothing of `out`: validate's checks only add to it)."""

    def __init__(self, fn):
        self.fn, self.outcome = fn, None

    def run(self) -> None:
        if self.outcome is not None:
            return
        found = _Recorded()
        try:
            self.outcome = found, True, self.fn(found)
        except Exception as e:       # (any: raised again by result, where fn(out) would have raised it)
            self.outcome = found, False, e

    def result(self, out: Findings):
        self.run()
        found, ok, value = self.outcome
        for added in found.added:
            out.add(*added)
        if not ok:
            raise value
        return value


class _Recorded(Findings):
    """Findings kept whole, in order, for Later to add to the real ones."""

    def __init__(self):
        super().__init__(0)
        self.added: list = []

    def add(self, where: str, what: str, check: str) -> None:
        if check not in CHECKS:
            raise ValueError(f"unknown check id {check!r}")
        self.total += 1
        self.added.append((where, what, check))


# the row reader's buffer: a training file's lines run 4-60 KB (a chat row holds its whole history), and with the
# default 8 KB buffer reading them line by line cost 0.24-0.30 s CPU over a 1,000-episode dataset's 460 MB, 0.07 s
# with 128 KB (0.06 s with 1 MB, but the default layout reads eight files at once: 1 MB each raised validate's
# peak RSS by 8 MB, over generate's)
READ_BUFFER = 1 << 17


def rows(path: Path, out: Findings):
    """Yield (line number, object or None) of a JSONL file; every unreadable line is a
    finding (invalid UTF-8, not JSON, not an object, cut off, a duplicate of the line before)."""
    prev = None
    with open(path, "rb", buffering=READ_BUFFER) as fh:
        for n, raw in enumerate(progress.lines(fh, f"checking {path.name}"), 1):
            where = f"{path.name}:{n}"
            if not raw.endswith(b"\n"):
                out.add(where, "last line is cut off (no newline at the end: a truncated file?)", "rows_and_schema")
            if raw == prev:
                out.add(where, f"duplicates line {n - 1}", "rows_and_schema")
                continue
            prev = raw
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                out.add(where, f"not valid UTF-8 (byte {e.start})", "rows_and_schema")
                yield n, None
                continue
            except json.JSONDecodeError as e:
                out.add(where, f"not valid JSON ({e.msg}, column {e.colno})", "rows_and_schema")
                yield n, None
                continue
            if not isinstance(row, dict):
                out.add(where, f"not a JSON object (a {type(row).__name__})", "rows_and_schema")
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


def identical(a, b) -> bool:
    """a == b as JSON values that print alike: the same type at every node (1, 1.0 and True are
    equal in Python, not here), dict keys in the same order, the sign of a zero kept."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return len(a) == len(b) and all(ka == kb and identical(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if type(a) is list:
        return len(a) == len(b) and all(map(identical, a, b))
    if type(a) is float:
        return a == b and (a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b))
    return a == b


def identical_rows(taken: list, made) -> bool:
    """The (line, row) pairs a check took from a file are the rows `made`, one for one."""
    return made is not None and len(taken) == len(made) and all(
        row is not None and identical(row, want) for (_, row), want in zip(taken, made))


# Substrings every match of a feature's pattern holds: the pattern is searched only in code that holds
# one (a plain `in` scans ~20x faster than the regex; fp4's was searched in every ok step's code,
# 0.1 s of validate's 1.4 s of row checks over 300 default episodes)
_MARKER_HINTS = {"wgmma": ("wgmma.",), "tma": ("cp.async.bulk.tensor",), "fp4": (".e2m1", "kind::"), "inline_ptx": ("asm",)}


# A code recurs within its episode (a rebench, a revert) and across a few (a baseline): kernelinfer's
# first 200 sessions ask 3,998 codes (2,655 distinct, 4.4 KB on average): 800 hits at 512 entries, 1,343
# at 4,096 (~0.3 s CPU of a full run's misses, ~60 us each), where 4,096 codes held ~18 MB of the run's
# peak RSS (generate's workers judge every session row through here: validate_written.judge)
FEATURES_KEPT = 512


@lru_cache(maxsize=FEATURES_KEPT)
def _features(code: str) -> frozenset:
    """The arch-gated features whose fingerprints a candidate's code holds (cached: the same
    code recurs across steps and episodes)."""
    return frozenset(f for f, pat in FEATURE_MARKERS.items()
                     if any(hint in code for hint in _MARKER_HINTS[f]) and pat.search(code))


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
        out.add(where, f"episode keys {list(ep)} != {list(EPISODE_KEYS)}", "rows_and_schema")
        return False
    want = {"id": str, "module": str, "gpu": str, "dtype": str, "shape": list, "baseline": dict, "steps": list,
            "best": dict, "attempts": dict, "elapsed_s": int, "seed": int}
    for key, typ in want.items():
        if not isinstance(ep[key], typ) or isinstance(ep[key], bool):
            out.add(where, f"{key} must be {typ.__name__}, got {ep[key]!r:.60}", "rows_and_schema")
            return False
    m = REGISTRY.get(ep["module"])
    if m is None or ep["gpu"] not in GPUS:
        out.add(where, f"unknown module {ep['module']!r} or gpu {ep['gpu']!r}", "rows_and_schema")
        return False
    if ep["dtype"] not in m.dtypes or not _pairs(ep["shape"], "dim") or list(as_dict(ep["shape"])) != list(m.dims) \
            or not all(type(v) is int and v >= 0 for v in as_dict(ep["shape"]).values()):
        out.add(where, f"dtype/shape {ep['dtype']!r} {ep['shape']!r:.80} are not a task of {m.name}", "rows_and_schema")
        return False
    for key in ("torch_eager_ms", "torch_compile_ms"):
        if ep[key] is not None and not (is_number(ep[key]) and ep[key] > 0):
            out.add(where, f"{key} must be a time > 0 or null, got {ep[key]!r:.40}", "rows_and_schema")
            return False
    b = ep["baseline"]
    if list(b) != ["tag", "params", "code", "time_ms"] or not isinstance(b["code"], str) \
            or not _pairs(b["params"], "name") or not is_number(b["time_ms"]) or b["time_ms"] <= 0:
        out.add(where, f"baseline must be {{tag, params, code, time_ms > 0}}, got keys {list(b)}", "rows_and_schema")
        return False
    tags = {v.tag for v in m.variants}
    for i, s in enumerate(ep["steps"], 1):
        w = f"{where} step {i}"
        if not isinstance(s, dict) or tuple(s) != STEP_KEYS:
            out.add(w, f"step keys {list(s) if isinstance(s, dict) else type(s).__name__} != {list(STEP_KEYS)}", "rows_and_schema")
            return False
        bad = [k for k, ok in (
            ("step", s["step"] == i and type(s["step"]) is int), ("kind", s["kind"] in KINDS),
            ("status", s["status"] in STATUSES), ("tag", isinstance(s["tag"], str) and s["tag"] in tags),
            ("params", _pairs(s["params"], "name") and all(isinstance(v, (int, float, str, bool)) for v in as_dict(s["params"]).values())),
            ("failure", s["failure"] in FAILURES if s["status"] != "ok" else s["failure"] is None),
            ("bug", s["bug"] is None or isinstance(s["bug"], str)),
            ("typo", s["typo"] is None or (type(s["typo"]) is int and s["typo"] >= 0)),
            ("code", isinstance(s["code"], str)), ("time_ms", s["time_ms"] is None or (is_number(s["time_ms"]) and s["time_ms"] > 0)),
            ("smem_bytes", is_count(s["smem_bytes"])), ("regs", is_count(s["regs"])),
            ("error", s["error"] is None or isinstance(s["error"], str)), ("kept", isinstance(s["kept"], bool)),
            ("best_ms", is_number(s["best_ms"]) and s["best_ms"] > 0), ("elapsed_s", is_count(s["elapsed_s"]))) if not ok]
        if bad:
            out.add(w, f"bad {', '.join(bad)}: " + ", ".join(f"{k}={s[k]!r:.40}" for k in bad), "rows_and_schema")
            return False
    if ep["end"] not in ENDS:
        out.add(where, f"end must be one of {', '.join(ENDS)}, got {ep['end']!r:.40}", "rows_and_schema")
        return False
    best, att = ep["best"], ep["attempts"]
    if list(best) != ["step", "time_ms", "speedup", "speedup_vs_torch"] \
            or not all(is_number(v) for k, v in best.items() if k != "speedup_vs_torch" or v is not None) \
            or list(att) != ["kept", "reverted", "errors", "rebench"] or not all(is_count(v) for v in att.values()):
        out.add(where, f"best {best!r:.80} / attempts {att!r:.80} malformed", "rows_and_schema")
        return False
    return True


def check_episode(ep: dict, where: str, out: Findings, ctx: "Context", index: int | None) -> bool:
    """Every check of one episode row; False when its shape is too broken to go on."""
    if not _types_ok(ep, where, out):
        return False
    module, gpu = REGISTRY[ep["module"]], GPUS[ep["gpu"]]
    shape = tuple(as_dict(ep["shape"]).items())
    task = cached_task(ep["module"], ep["gpu"], ep["dtype"], shape)
    if ep["schema"] != SCHEMA["episode"]:
        out.add(where, f"schema {ep['schema']!r}, expected {SCHEMA['episode']!r}", "rows_and_schema")
    for key, value in task_fields(module, task).items():
        if ep[key] != value:
            out.add(where, f"{key} {ep[key]!r:.60} is not {module.name}'s on {gpu.name}: expected {value!r:.60}", "ids_and_task")
    if ep["task_id"] != task_id(task):
        out.add(where, f"task_id {ep['task_id']!r}, expected {task_id(task)!r}", "ids_and_task")
    if index is not None and ctx.plan.task(index).key != task.key:
        out.add(where, f"episode {index} works on {task.key}, but the plan gives {ctx.plan.task(index).key}", "ids_and_task")
    for key in ("seed", "generator"):
        if ep[key] != ctx.stats.get(key):
            out.add(where, f"{key} {ep[key]!r} differs from stats.json's {ctx.stats.get(key)!r}", "ids_and_task")
    base = baseline_rung(module, task, ctx.plan.profile.search)    # the profile's starting rung
    if ep["baseline"]["tag"] != base.tag or as_dict(ep["baseline"]["params"]) != base.defaults() \
            or ep["baseline"]["code"] != render_code(ep["module"], ep["gpu"], ep["dtype"], shape, base.tag,
                                                 _freeze(base.defaults()), None):
        out.add(where, f"baseline is not the render of {module.name}'s starting rung {base.tag} at its defaults", "code_and_feedback")
    book = Ledger(ep["baseline"]["code"], ep["baseline"]["time_ms"])
    best_tag, best_params = ep["baseline"]["tag"], as_dict(ep["baseline"]["params"])
    for s in ep["steps"]:
        w = f"{where} step {s['step']}"
        _check_step(ep, s, w, out, module, gpu, shape, book.best_ms)
        mismatch = kind_mismatch(s, best_tag, best_params, book.best_code, module)
        if mismatch:
            out.add(w, mismatch, "attempts_and_kinds")
        if s["status"] == "ok" and s["time_ms"] is not None:
            before = book.best_ms
            if s["kept"] != book.record(s["code"], s["time_ms"], s["step"]):
                out.add(w, f"kept={s['kept']} but the noise-aware keep rule says otherwise (time {s['time_ms']}, best {before})", "keep_rule")
            if book.best_step == s["step"]:
                best_tag, best_params = s["tag"], as_dict(s["params"])
        if s["best_ms"] != book.best_ms:
            out.add(w, f"best_ms {s['best_ms']} is not the recorded best ({book.best_ms}: mean of the best's runs)", "best_running_minimum")
    steps = ep["steps"]
    best = book.best_ms
    if ep["best"]["time_ms"] != best or ep["best"]["step"] != book.best_step:
        out.add(where, f"best {ep['best']} != recorded best ({best} at step {book.best_step})", "best_running_minimum")
    speedup = round(book.mean(ep["baseline"]["code"]) / best, 4)     # both recorded means: one basis
    if ep["best"]["speedup"] != speedup:
        out.add(where, f"best.speedup {ep['best']['speedup']} != baseline/best (recorded means) = {speedup}",
                "best_running_minimum")
    eager_ms, compile_ms = torch_times(module, task)
    if (ep["torch_eager_ms"], ep["torch_compile_ms"]) != (eager_ms, compile_ms):
        out.add(where, f"torch_eager_ms/torch_compile_ms {ep['torch_eager_ms']}/{ep['torch_compile_ms']} are not the "
                       f"calibrated reference's {eager_ms}/{compile_ms}", "rows_and_schema")
    if ep["best"]["speedup_vs_torch"] != speedup_vs_torch(eager_ms, best):
        out.add(where, f"best.speedup_vs_torch {ep['best']['speedup_vs_torch']} != torch_eager_ms/best = "
                       f"{speedup_vs_torch(eager_ms, best)}", "best_running_minimum")
    attempts = {"kept": sum(s["kept"] for s in steps),
                "reverted": sum(1 for s in steps if not s["kept"] and s["kind"] != "rebench" and s["status"] == "ok"),
                "errors": sum(1 for s in steps if s["status"] != "ok"),
                "rebench": sum(1 for s in steps if s["kind"] == "rebench")}
    if ep["attempts"] != attempts:
        out.add(where, f"attempts {ep['attempts']} != counted from the steps {attempts}", "attempts_and_kinds")
    if ep["elapsed_s"] != (steps[-1]["elapsed_s"] if steps else 0):
        out.add(where, f"elapsed_s {ep['elapsed_s']} != the last step's", "stamps")
    if any(a["elapsed_s"] > b["elapsed_s"] for a, b in zip(steps, steps[1:])):
        out.add(where, "elapsed_s goes backwards", "stamps")
    budget = ctx.plan.profile.search.time_budget_h * 3600
    if ep["end"] == "time" and not (budget and steps and steps[-1]["elapsed_s"] >= budget):
        out.add(where, f"end time but the profile's time budget ({budget:.0f} s) was not reached", "rows_and_schema")
    return True


def _check_step(ep, s, w, out, module, gpu, shape, best) -> None:
    if (s["time_ms"] is None) != (s["status"] != "ok"):
        out.add(w, "time_ms must be null exactly when status is not ok", "time_ms_iff_ok")
    if (s["status"] == "ok") == (s["error"] is not None):
        out.add(w, "error must be set exactly when status is not ok", "time_ms_iff_ok")
    if s["kept"] and s["status"] != "ok":
        out.add(w, "a non-ok step is kept", "non_ok_never_kept")
    if s["kept"] and s["kind"] == "rebench":
        out.add(w, "a rebench is kept", "keep_rule")
    variant = module.variant(s["tag"])
    if s["bug"] is not None and s["bug"] not in variant.bugs:
        out.add(w, f"bug {s['bug']!r} is not one of {variant.tag}'s ({', '.join(variant.bugs) or 'none'})", "code_and_feedback")
        return
    if s["status"] == "ok" and (s["bug"] is not None or s["typo"] is not None):
        out.add(w, "an ok step carries a bug or typo", "time_ms_iff_ok")
    params = as_dict(s["params"])
    known = {p.name: p.values for p in variant.params} | {k: knobs.KNOBS[k].values for k in knobs.settings(params)}
    if set(params) != set(known) or any(v not in known[k] for k, v in params.items()):
        out.add(w, f"params {params} are not a configuration of {variant.tag}", "code_and_feedback")
        return
    args = (ep["module"], ep["gpu"], ep["dtype"], shape, s["tag"], _freeze(params))
    code = render_code(*args, s["bug"])
    typo_error = None
    if s["typo"] is not None:
        broken = with_typo(code, module.impl, s["typo"], gpu.arch if gpu.vendor == "amd" else "", ep["dtype"], shape)
        if broken is None:
            out.add(w, f"typo {s['typo']} cannot be applied to this candidate", "code_and_feedback")
            return
        code, typo_error = broken
        if s["failure"] != failure(kind_of(s["typo"])):
            out.add(w, f"failure {s['failure']!r} is not the class of slip {s['typo']} ({kind_of(s['typo'])}: "
                       f"{failure(kind_of(s['typo']))})", "code_and_feedback")
    if s["code"] != code:
        out.add(w, f"code is not {module.name}'s render of {s['tag']}{s['params']}"
                   + (f" with bug {s['bug']}" if s["bug"] else "") + (f" and typo {s['typo']}" if s["typo"] is not None else "")
                   + f" (first difference at character {_first_diff(s['code'], code)})", "code_and_feedback")
    r = simulated(*args)
    if (s["smem_bytes"], s["regs"]) != (r.smem_bytes, r.regs):
        out.add(w, f"smem_bytes/regs {s['smem_bytes']}/{s['regs']} != the simulator's {r.smem_bytes}/{r.regs}", "smem_caps")
    if s["status"] == "compile_error":
        want = typo_error if typo_error is not None else r.error
        if s["failure"] == "arch" and typo_error is None:   # ptxas lists each offending instruction of the code
            want = arch_error(variant.needs - gpu.features, cached_task(*args[:4]), module, s["code"])
        if not fails_at_launch(s["failure"], want):       # a load_inline solution's build: in its RuntimeError
            want = load_inline_error(want, s["code"], gpu.arch)
        if s["error"] != want:
            out.add(w, "compile error text is not the compiler's message for this candidate", "arch_gates")
    elif s["status"] == "ok":
        if not r.ok:
            out.add(w, f"status ok, but this candidate does not build on {gpu.name}: {(r.error or '').splitlines()[0]:.80}", "arch_gates")
        cap = smem_cap(variant, module, gpu)
        if s["smem_bytes"] > cap:
            out.add(w, f"ok step uses {s['smem_bytes']} B shared memory > cap {cap}", "smem_caps")
        for feature in _features(s["code"]) - gpu.features:
            out.add(w, f"ok step uses {feature} on {gpu.name} ({gpu.arch}), which lacks it", "arch_gates")
    elif s["bug"] is None:
        out.add(w, "a wrong_result step carries no bug", "time_ms_iff_ok")


def _first_diff(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


_TARGET_RULE = "the training-target rule (README, episodes.weight)"


def row_diff(got: dict, want: dict, source: str = "the episode's") -> str:
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
    """What every episode is checked against: stats.json and the run's manifest — the plan
    of its resolved profile and seed (the holdout split and each episode's task) and its
    [output] settings."""

    def __init__(self, stats: dict, manifest, plan=None):
        """`plan`: the run's plan where the caller holds it (generate's), taken where it is the
        manifest's (run_plan), else made here."""
        self.stats, self.manifest = stats, manifest
        self.plan = run_plan(manifest, plan)
        out = manifest.profile.output
        self.timestamps, self.max_tokens, self.validation_frac = out.timestamps, out.max_context_tokens, out.validation_frac
        self.id_prefix = f"{stats.get('profile')}-s{stats.get('seed')}-"     # an episode id before its index
        self.rebuilds = None     # validate_derived.Rebuilds: the plan's episodes rebuilt ahead in other processes
        self.scan = None         # validate_ahead.StreamedMeasure: the contamination measured from the rows read
        # the QA figures of the rows the file checks read (qa._Acc, layouts.Layout.judge), summed in plan
        # order: qa.json is compared with their report instead of reading every file again; False once a
        # row could not be judged
        self.judged = None

    def chat_settings(self) -> dict:
        return {"max_context_tokens": self.max_tokens, "validation_frac": self.validation_frac}


def run_plan(manifest, plan=None):
    """The plan of the manifest's run: `plan` where it is make_plan of the same profile (but for
    the file it was read from: a dataset's manifest.json, the run's .toml) and seed, as generate's
    own plan is when its batch QA reports read the manifest it just wrote; else made here (a
    kernelinfer plan is ~0.15 s with its room checks known, ~3 s without). `plan` must be made
    with the profile's own holdout split (make_plan's defaults), as every run's is."""
    if plan is not None and plan.seed == manifest.seed and \
            (plan.profile is manifest.profile or replace(plan.profile, path="") == replace(manifest.profile, path="")):
        return plan
    return make_plan(manifest.profile, manifest.seed)


def check_manifest(stats: dict, manifest, out: Findings) -> None:
    """The manifest and stats.json describe the same run."""
    p = manifest.profile
    for key, want in (("profile", p.name), ("profile_description", p.description), ("seed", manifest.seed),
                      ("generator", manifest.generator), ("layout", manifest.layout)):
        have = stats.get(key, "episodes" if key == "layout" else None)
        if have != want:
            out.add("manifest.json", f"{key} {want!r:.60} differs from stats.json's {have!r:.60}", "manifest")


def combo_of(row: dict) -> tuple:
    return (row.get("module"), row.get("gpu"), row.get("dtype"), json.dumps(row.get("shape"), sort_keys=True))


def _check_holdout(path: Path, ctx: Context, out: Findings) -> set:
    """Held-out rows: each the plan's row for its task, none missing."""
    expected = Peek(iter(holdout_rows(ctx.plan, "combo")))
    held = set()
    for n, row in rows(path, out):
        where = f"{path.name}:{n}"
        if row is None:
            expected.take()
            continue
        held.add(combo_of(row))
        if row.get("schema") != SCHEMA["holdout"]:
            out.add(where, f"schema {row.get('schema')!r:.40}, expected {SCHEMA['holdout']!r}", "holdout")
        want = expected.take()
        if want is None:
            out.add(where, "a held-out row the plan's split does not have", "holdout")
        elif json.loads(want) != row:
            w = json.loads(want)
            what = row_diff(row, w, "the plan's row") if row.get("task_id") == w["task_id"] else \
                f"task {row.get('task_id')!r}, the plan's split has {w['task_id']!r} here (rows missing, added or reordered)"
            out.add(where, what, "holdout")
            if row.get("task_id") != w["task_id"] and expected.head is not None and \
                    json.loads(expected.head).get("task_id") == row.get("task_id"):
                expected.take()     # a deleted row: realign on the next one
    if expected.head is not None:
        out.add(f"{path.name}:EOF", f"held-out task {json.loads(expected.head)['task_id']} of the plan's split is missing", "holdout")
    return held


MALFORMED = (TypeError, ValueError, KeyError, AttributeError, IndexError, ArithmeticError)


def guarded(fn, where: str, out: Findings, *args):
    """fn(*args), or False with a finding when a malformed row trips it up."""
    try:
        return fn(*args)
    except MALFORMED as e:
        out.add(where, f"malformed row ({type(e).__name__}: {e!s:.80})", "rows_and_schema")
        return False


def record_rows(data: Path, key: str, ctx: Context, out: Findings):
    """(path, line, row or None, plan index) of every row of a record (`episodes` or `sessions`)
    and its validation file, merged back into plan order: at each index the row whose id is that
    index's, else the earliest head. A row in the file its task does not belong to
    (training.is_validation) is a finding: no task is in both splits."""
    from .training import is_validation, plan_index
    from .writers import FILES, SESSION_FILES, VALIDATION, validation_file
    name = {**FILES, **SESSION_FILES}[key]
    parts = [(data / n, Peek(rows(data / n, out))) for n in (name, validation_file(name))]

    def order(head) -> tuple:
        try:
            return (1, plan_index(head[1]["id"]))
        except (TypeError, KeyError, ValueError, AttributeError, IndexError):
            return (0, 0)            # a malformed row first: it holds its place in its file
    index = first_index(ctx.stats)
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
                                            f"{('train', 'validation')[belongs]} split ({parts[belongs][0].name})",
                        "ids_and_task")
        yield path, n, row, index
        index += 1


def first_index(stats: dict) -> int:
    run = stats.get("run")
    if isinstance(run, dict) and isinstance(run.get("episodes"), int) and isinstance(stats.get("shard"), str):
        try:
            i, n = (int(x) for x in stats["shard"].split("/"))
            return run["episodes"] * i // n
        except ValueError:
            return 0
    return 0


def _check_stats(stats: dict, acc, actual: dict, holdout_rows: int, out: Findings, ctx: Context, cuts: bool) -> None:
    """stats.json against what the files hold and the run's manifest, key by key (`cuts`: the
    layout cuts its rows into batches)."""
    profile = ctx.manifest.profile
    files = dict(actual)
    want = acc.result(profile, ctx.manifest.seed, holdout_rows, files, stats.get("shard"), stats.get("holdout"),
                      ctx.manifest.layout, profile.output.batch_size if cuts else None, ctx.chat_settings())
    if "run" in stats:
        want["run"] = stats["run"]
    if want["generator"] != stats.get("generator"):
        want["generator"] = stats.get("generator")   # the episodes' generator field is checked against it
    for key in list(dict.fromkeys([*want, *stats])):
        if key == "files":
            for name, f in want["files"].items():
                if stats["files"].get(name, {}).get("rows") != f["rows"]:
                    out.add("stats.json", f"files[{name!r}].rows {stats['files'].get(name, {}).get('rows')} != the file's {f['rows']} lines", "stats")
        elif stats.get(key) != want.get(key):
            out.add("stats.json", f"{key} {json.dumps(stats.get(key))[:80]} != from the files {json.dumps(want.get(key))[:80]}", "stats")


def measure_splits(data: Path, stats: dict, layout, workers: int = 1) -> dict | str | None:
    """contamination.measure (in `workers` processes) of every holdout split stats.json lists,
    by the training file of the dataset's `layout`;
    None when there is none or a file is missing; what went wrong (a str) when the files
    cannot be measured."""
    splits = stats.get("holdout", {}).get("splits", {})
    if not splits or any(not (data / s["file"]).exists() for s in splits.values()):
        return None
    try:
        return measure(data, {name: s["file"] for name, s in splits.items()}, layout, workers)
    except MALFORMED + (UnicodeDecodeError,) as e:
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
        out.add(str(data / name), "missing", "files")
    if missing or not splits:
        return []
    if isinstance(found, str):
        out.add("stats.json", f"holdout contamination cannot be measured on these files ({found})", "stats")
        return []
    trained = {(REGISTRY[m].op, gpu) for m, gpu, _, _ in found["training_tasks"]}
    notes = []
    for name, s in splits.items():
        figures, where = found["splits"][name], data / s["file"]
        if figures != s.get("contamination"):
            out.add("stats.json", f"holdout split {name}: contamination figures differ from the data's", "stats")
        held = [("op", op) for op in s.get("ops", [])] + [("gpu", gpu) for gpu in s.get("gpus", [])]
        for kind, value in held:
            if any((op if kind == "op" else gpu) == value for op, gpu in trained):
                out.add(str(where), f"leak: held-out {kind} {value} has episodes in training", "contamination")
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
            out.add(str(where), f"leak: {summary} (tasks {', '.join(leaked[:5])}{' ...' if len(leaked) > 5 else ''})", "contamination")
    return notes
