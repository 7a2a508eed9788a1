"""`validate`: every file against its schema and the invariants of SPEC §4, naming file
and line of each problem. Streams: memory stays flat whatever the file size."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

from .errors import DataError
from .ledger import Ledger
from .messages import fmt_ms
from .gpus import GPUS
from .ops import REGISTRY
from .schema import EPISODE_KEYS, KINDS, SCHEMA, STATUSES, STEP_KEYS
from .sim import STATIC_SMEM_CAP
from .writers import FILES

# Code fingerprints of arch-gated features: an ok step on a GPU without the feature must not contain them.
FEATURE_MARKERS = {"wgmma": re.compile(r"\bwgmma\."), "tma": re.compile(r"cp\.async\.bulk\.tensor"),
                   "fp4": re.compile(r"\.e2m1\b|kind::(f8f6f4|mxf8f6f4|mxf4nvf4|mxf4)\b"),   # FP4-generation mma
                   "inline_ptx": re.compile(r"\basm\s*(volatile\s*)?\(")}


def read_jsonl(path: Path):
    """Yield (line number, object); a corrupt line raises DataError naming file and line."""
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    with fh:
        for n, line in enumerate(fh, 1):
            try:
                yield n, json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise DataError(f"{path}:{n}: not valid JSON ({e.msg if hasattr(e, 'msg') else e})") from None


def read_stats(data: Path) -> dict:
    path = data / "stats.json"
    if not data.is_dir():
        raise DataError(f"{data}: not a dataset directory")
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing (an incomplete or interrupted run?)") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(stats, dict) or stats.get("schema") != SCHEMA["stats"]:
        raise DataError(f"{path}: not a kernelstrain stats file (schema kernelstrain/stats@1)")
    return stats


class Findings(list):
    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def add(self, where: str, what: str) -> None:
        if len(self) < self.limit:
            self.append(f"{where}: {what}")


def check_episode(ep: dict, where: str, out: Findings) -> None:
    if tuple(ep) != EPISODE_KEYS:
        out.add(where, f"episode keys {list(ep)} != {list(EPISODE_KEYS)}")
        return
    gpu = GPUS.get(ep["gpu"])
    module = REGISTRY.get(ep["module"])
    if gpu is None or module is None:
        out.add(where, f"unknown gpu {ep['gpu']!r} or module {ep['module']!r}")
        return
    book = Ledger(ep["baseline"]["code"], ep["baseline"]["time_ms"])
    best_tag, best_params = ep["baseline"]["tag"], ep["baseline"]["params"]
    for s in ep["steps"]:
        w = f"{where} step {s.get('step')}"
        if tuple(s) != STEP_KEYS:
            out.add(w, f"step keys {list(s)} != {list(STEP_KEYS)}")
            continue
        if s["kind"] not in KINDS or s["status"] not in STATUSES:
            out.add(w, f"bad kind/status {s['kind']!r}/{s['status']!r}")
        if (s["time_ms"] is None) != (s["status"] != "ok"):
            out.add(w, "time_ms must be null exactly when status is not ok")
        if s["kept"] and s["status"] != "ok":
            out.add(w, "a non-ok step is kept")
        if s["kept"] and s["kind"] == "rebench":
            out.add(w, "a rebench is kept")
        mismatch = kind_mismatch(s, best_tag, best_params, book.best_code, module)
        if mismatch:
            out.add(w, mismatch)
        if s["status"] == "ok" and s["time_ms"] is not None:
            before = book.best_ms
            if s["kept"] != book.record(s["code"], s["time_ms"], s["step"]):
                out.add(w, f"kept={s['kept']} but the noise-aware keep rule says otherwise (time {s['time_ms']}, best {before})")
            if book.best_step == s["step"]:
                best_tag, best_params = s["tag"], s["params"]
            cap = STATIC_SMEM_CAP if (module.impl == "cuda" and _static(module, s["tag"])) else gpu.smem_per_block
            if s["smem_bytes"] > cap:
                out.add(w, f"ok step uses {s['smem_bytes']} B shared memory > cap {cap}")
            for feature, pat in FEATURE_MARKERS.items():
                if feature not in gpu.features and pat.search(s["code"]):
                    out.add(w, f"ok step uses {feature} on {gpu.name} ({gpu.arch}), which lacks it")
        if s["best_ms"] != book.best_ms:
            out.add(w, f"best_ms {s['best_ms']} is not the recorded best ({book.best_ms}: mean of the best's runs)")
        if (s["status"] == "ok") == (s["error"] is not None):
            out.add(w, "error must be set exactly when status is not ok")
    if ep["best"]["time_ms"] != book.best_ms or ep["best"]["step"] != book.best_step:
        out.add(where, f"best {ep['best']} != recorded best ({book.best_ms} at step {book.best_step})")


def kind_mismatch(s: dict, best_tag: str, best_params: dict, best_code: str, module) -> str | None:
    """Why a step's kind does not say what changed relative to the best, or None."""
    kind, changed = s["kind"], [k for k in s["params"] if s["params"][k] != best_params.get(k)]
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
            values = module.variant(s["tag"]).param(changed[0]).values
            step = abs(values.index(s["params"][changed[0]]) - values.index(best_params[changed[0]]))
        except (KeyError, ValueError):
            return "kind endgame on an unknown parameter"
        return None if step == 1 else f"kind endgame but {changed[0]} moved {step} values"
    return None


def _static(module, tag: str) -> bool:
    try:
        return module.variant(tag).smem == "static"
    except KeyError:
        return False


def check_feedback(windows: list, ep_steps: list, where: str, out: Findings) -> None:
    """The windows of one episode cover its steps in order; feedback after step k reports
    step k and the best so far, nothing later."""
    k = 0
    for mt in windows:
        msgs = mt["messages"]
        if [m["role"] for m in msgs[:2]] != ["system", "user"]:
            out.add(where, "messages must start with system, user")
            return
        turns = msgs[2:]
        for i in range(0, len(turns), 2):
            a = turns[i]
            if k >= len(ep_steps) or a["role"] != "assistant" or not a["content"].startswith("```") \
                    or not a["content"].endswith("```"):
                out.add(f"{where} step {k + 1}", "assistant turn must be one fenced code block of a step")
                return
            s = ep_steps[k]
            if i + 1 < len(turns):
                fb = turns[i + 1]["content"]
                later = [int(n) for n in re.findall(r"\bstep (\d+)", fb, flags=re.I)]
                if any(n > s["step"] for n in later):
                    out.add(f"{where} step {k + 1}", "feedback mentions a later step")
                if fmt_ms(s["best_ms"]) not in fb:
                    out.add(f"{where} step {k + 1}", "feedback does not report the best so far")
            k += 1
    if k != len(ep_steps):
        out.add(where, f"windows hold {k} steps, the episode {len(ep_steps)}")


def validate(data: Path, limit: int = 50) -> list[str]:
    """All problems found in a dataset directory (up to `limit`)."""
    out = Findings(limit)
    stats = read_stats(data)
    for name in list(FILES.values()):
        if not (data / name).exists():
            out.add(str(data / name), "missing")
    if out:
        return out
    for fname, summary in stats.get("files", {}).items():
        path = data / fname
        digest, size = hashlib.sha256(), 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        if digest.hexdigest() != summary["sha256"] or size != summary["bytes"]:
            out.add(str(path), "sha256/bytes differ from stats.json (modified or truncated?)")
    held = set()
    for n, row in read_jsonl(data / FILES["holdout"]):
        held.add((row.get("module"), row.get("gpu"), row.get("dtype"), json.dumps(row.get("shape"), sort_keys=True)))
    status, steps_total, episodes = Counter(), 0, 0
    ep_path, mt_path, st_path = (data / FILES[k] for k in ("episodes", "sft_multiturn", "sft_steps"))
    mt_iter, st_iter = read_jsonl(mt_path), read_jsonl(st_path)
    for n, ep in read_jsonl(ep_path):
        where = f"{ep_path.name}:{n}"
        episodes += 1
        check_episode(ep, where, out)
        combo = (ep.get("module"), ep.get("gpu"), ep.get("dtype"), json.dumps(ep.get("shape"), sort_keys=True))
        if combo in held:
            out.add(where, f"held-out combo {combo[:3]} appears in a training file")
        steps = ep.get("steps", [])
        steps_total += len(steps)
        status.update(s.get("status") for s in steps)
        m = next(mt_iter, None)
        windows = [m[1]] if m else []
        while m is not None and len(windows) < (m[1].get("windows") or 1):
            m = next(mt_iter, None)
            windows += [m[1]] if m else []
        if m is None or any(w.get("id") != ep.get("id") for w in windows):
            out.add(f"{mt_path.name}:{n}", f"row does not match episode {ep.get('id')}")
        else:
            check_feedback(windows, steps, f"{mt_path.name}:{m[0]}", out)
        for s in steps:
            row = next(st_iter, None)
            if row is None or row[1].get("episode_id") != ep.get("id") or row[1].get("step") != s.get("step") \
                    or row[1].get("status") != s.get("status") or row[1].get("kept") != s.get("kept"):
                out.add(f"{st_path.name}:{row[0] if row else 'EOF'}", f"does not match {ep.get('id')} step {s.get('step')}")
                break
    if next(st_iter, None) is not None:
        out.add(st_path.name, "more step rows than steps in episodes.jsonl")
    if episodes != stats.get("episodes") or steps_total != stats.get("steps"):
        out.add("stats.json", f"episodes/steps {stats.get('episodes')}/{stats.get('steps')} != files {episodes}/{steps_total}")
    for k in STATUSES:
        if status[k] != stats.get("status", {}).get(k):
            out.add("stats.json", f"status {k}: {stats.get('status', {}).get(k)} != files {status[k]}")
    return out
