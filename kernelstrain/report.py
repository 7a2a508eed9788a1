"""`kernelstrain report DIR`: one self-contained HTML file with the dataset's charts and an
episode browser.

One pass over episodes.jsonl aggregates everything (counters and small per-episode
lists), keeping a bounded, deterministic sample of episodes for the browser: the few of
each module with the smallest sha256 of their id, whatever the file order. A second pass
over sft_multiturn.jsonl parses only the sampled rows, for the feedback the model saw.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import math
import time
from collections import Counter, defaultdict
from pathlib import Path

from . import svg
from .compilers import classify
from .slips import kind_of
from .errors import UsageError
from .fields import as_dict
from .report_page import render_page
from .dataset import episode_source
from .safety import check_output, row_guard
from .writers import DATASET_NAMES, FILES, write_error, write_text_atomic

STATUSES = ("ok", "wrong_result", "compile_error")
STATUS_COLORS = {"ok": "#59a14f", "wrong_result": "#f28e2b", "compile_error": "#e15759"}
KINDS = ("structural", "param_sweep", "joint", "rebench", "endgame")
COMPILE_KINDS = {"arch": "arch feature", "smem": "shared memory", "resources": "registers / resources",
                 "syntax": "typo / syntax", "type": "type / overload", "constexpr": "non-constant size",
                 "other": "other"}
SAMPLE_PER_MODULE = 3
BROWSER_BYTES = 14_000_000   # the browser's data stays under this, so the page stays under 20 MB


def failure_kind(step: dict) -> str | None:
    """What went wrong in a step, from its status and error text; None for an ok step.

    >>> failure_kind({"status": "compile_error", "error": "ptxas error : ... uses too much shared data (0x10000 bytes, 0xc000 max)"})
    'compile: shared memory'
    """
    error = step.get("error") or ""
    if step["status"] == "compile_error":
        kind = classify(error)
        if kind == "other" and "shared memory" in error:   # a dynamic request over the device limit, at launch
            kind = "smem"
        if step.get("typo") is not None and kind_of(step["typo"]) != "identifier":   # which slip of the catalogue
            return f"compile: {COMPILE_KINDS[kind]} ({kind_of(step['typo'])})"
        return f"compile: {COMPILE_KINDS[kind]}"
    if step["status"] == "wrong_result":
        if step.get("bug"):
            return f"wrong: {step['bug']}"
        return "wrong: " + (error.split(":")[0].strip().lower() or "mismatch")
    return None


class Aggregate:
    """Everything the charts need, added one episode at a time."""

    def __init__(self, per_module: int = SAMPLE_PER_MODULE):
        self.episodes = self.steps = 0
        self.status = defaultdict(Counter)        # row label -> status -> steps
        self.kind_status = defaultdict(Counter)   # step kind -> status -> steps
        self.lengths = Counter()
        self.hours = []
        self.speedup = {"family": defaultdict(list), "gpu": defaultdict(list), "impl": defaultdict(list)}
        self.curves = defaultdict(list)           # module -> [best/baseline after each step, ...] per episode
        self.failures = Counter()
        self.compile_by_gpu = defaultdict(Counter)
        self.per_module = per_module
        self.sample = defaultdict(list)           # module -> [(rank, episode)], the smallest ranks

    def add(self, ep: dict) -> None:
        self.episodes += 1
        steps = ep["steps"]
        self.steps += len(steps)
        self.lengths[len(steps)] += 1
        self.hours.append(ep["elapsed_s"] / 3600)
        statuses = Counter(s["status"] for s in steps)
        for label in ("all", ep["gpu"], ep["impl"]):
            self.status[label].update(statuses)
        for s in steps:
            self.kind_status[s["kind"]][s["status"]] += 1
            if s["status"] != "ok":
                kind = failure_kind(s)
                self.failures[kind] += 1
                if s["status"] == "compile_error":
                    self.compile_by_gpu[ep["gpu"]][kind.split(": ", 1)[1]] += 1
        for key, groups in self.speedup.items():
            groups[ep[key]].append(ep["best"]["speedup"])
        base = ep["baseline"]["time_ms"]
        self.curves[ep["module"]].append([1.0] + [s["best_ms"] / base for s in steps])
        rank = hashlib.sha256(ep["id"].encode()).hexdigest()
        kept = self.sample[ep["module"]]
        if len(kept) < self.per_module or rank < kept[-1][0]:
            kept.append((rank, ep))
            kept.sort(key=lambda r: r[0])
            del kept[self.per_module:]

    def ladder_bands(self, module: str) -> list[list[float]]:
        """[p10, p25, p50, p75, p90] of best/baseline at each step, up to the 90th-percentile
        episode length; an episode that ended keeps its final best."""
        curves = self.curves[module]
        last = max(1, round(svg.quantiles([len(c) - 1 for c in curves], (0.9,))[0]))
        return [svg.quantiles([c[min(k, len(c) - 1)] for c in curves]) for k in range(last + 1)]

    def sampled(self) -> list[dict]:
        """The sample, round-robin over modules: every module's first episode, then its second, ..."""
        modules = sorted(self.sample)
        return [self.sample[m][i][1] for i in range(self.per_module) for m in modules if i < len(self.sample[m])]


def read_rows(path: Path):
    """(line number, row) for each line of a JSONL file, with a one-line error for a bad line."""
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            try:
                yield n, json.loads(line)
            except ValueError:
                raise UsageError(f"{path.name}:{n}: not a JSON object") from None


def read_feedback(path: Path, ids: set[str]) -> dict[str, list[str]]:
    """The feedback turn after each step's candidate, for the multi-turn rows of `ids`
    (other rows are skipped without parsing)."""
    out = {}
    if not path.exists():
        return out
    with open(path, "rb") as fh:
        for line in fh:
            head = line[:300].decode("utf-8", "replace")
            at = head.find('"id":"')
            if at >= 0 and head[at + 6:head.find('"', at + 6)] not in ids:
                continue
            row = json.loads(line)
            if row.get("id") in ids:       # a long session is several window rows, in order
                out.setdefault(row["id"], []).append(row["messages"])
    return {i: window_feedback(w) for i, w in out.items()}


def window_feedback(windows: list[list[dict]]) -> list[str]:
    """Feedback per step over a session's windows: a window drops its last step's feedback,
    which opens the next window as its "Last result:" (episodes.chat_rows)."""
    out = []
    for k, messages in enumerate(windows):
        fb = step_feedback(messages)
        if k + 1 < len(windows) and fb and not fb[-1]:
            opener = windows[k + 1][1]["content"] if len(windows[k + 1]) > 1 else ""
            # the opener: ...History...\n\nLast result:\n<feedback>\n\nCurrent best (...): ...
            last = opener.split("\nLast result:\n", 1)[1] if "\nLast result:\n" in opener else ""
            fb[-1] = last.split("\n\nCurrent best (", 1)[0]
        out += fb
    return out


def step_feedback(messages: list[dict]) -> list[str]:
    """Feedback per step of a chat: the user turn after each assistant turn ('' for the last)."""
    turns = messages[2:]
    out = []
    for i, m in enumerate(turns):
        if m["role"] == "assistant":
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            out.append(nxt["content"] if nxt and nxt["role"] == "user" else "")
    return out


def _diff(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), before_name, after_name, n=2, lineterm="")
    return "\n".join(lines)


def _shape_text(shape) -> str:
    return ", ".join(f"{k}={v}" for k, v in as_dict(shape).items())


def browser_episode(ep: dict, feedback: list[str]) -> dict:
    """An episode as the browser shows it: steps with diffs against the best before each."""
    best_code, best_step = ep["baseline"]["code"], 0
    steps = []
    for i, s in enumerate(ep["steps"]):
        diff = _diff(best_code, s["code"], f"best (step {best_step})", f"step {s['step']}")
        steps.append({"step": s["step"], "kind": s["kind"], "tag": s["tag"],
                      "params": ", ".join(f"{k}={v}" for k, v in as_dict(s["params"]).items()),
                      "status": s["status"], "time_ms": s["time_ms"], "best_ms": s["best_ms"], "kept": s["kept"],
                      "elapsed_s": s["elapsed_s"], "smem": s["smem_bytes"], "regs": s["regs"], "error": s["error"],
                      "failure": failure_kind(s), "feedback": feedback[i] if i < len(feedback) else "",
                      "against": best_step, "diff": diff})
        if s["kept"]:
            best_code, best_step = s["code"], s["step"]
    return {"id": ep["id"], "module": ep["module"], "gpu": ep["gpu"], "arch": ep["arch"], "dtype": ep["dtype"],
            "impl": ep["impl"], "shape": _shape_text(ep["shape"]), "desc": ep.get("desc", ""),
            "baseline_ms": ep["baseline"]["time_ms"], "baseline_tag": ep["baseline"]["tag"],
            "baseline_code": ep["baseline"]["code"], "best": ep["best"], "elapsed_s": ep["elapsed_s"],
            "steps": steps}


def _read_json(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise UsageError(f"{path.name} is not valid JSON") from None


def charts(agg: Aggregate) -> dict[str, str]:
    """Every chart of the report as inline SVG, by section."""
    gpus = sorted(k for k in agg.status if k not in ("all", "cuda", "triton"))
    rows = [(label, agg.status[label]) for label in ["all", *gpus, "cuda", "triton"] if label in agg.status]
    lo, hi = min(agg.lengths), max(agg.lengths)
    hour_bins = Counter(math.floor(h * 4) / 4 for h in agg.hours)
    top = max(hour_bins)
    out = {
        "status": svg.stacked_shares("status-mix", rows, list(STATUSES), "Step status by GPU and impl",
                                     STATUS_COLORS),
        "kinds": svg.stacked_shares("status-by-kind", [(k, agg.kind_status[k]) for k in KINDS if k in agg.kind_status],
                                    list(STATUSES), "Step status by step kind", STATUS_COLORS),
        "lengths": svg.histogram("steps-per-episode", [(str(n), agg.lengths[n]) for n in range(lo, hi + 1)],
                                 "Steps per episode", "steps in the episode"),
        "hours": svg.histogram("elapsed-hours", [(f"{b:g}", hour_bins[b]) for b in
                                                 [i / 4 for i in range(int(top * 4) + 1)]],
                               "Simulated wall time per episode", "hours (bins of 15 min)", color=svg.COLORS[3]),
        "speedup_family": svg.box_plot("speedup-by-family", sorted(agg.speedup["family"].items()),
                                       "Best speedup over baseline by op family", "speedup (x, log scale)"),
        "speedup_gpu": svg.box_plot("speedup-by-gpu", sorted(agg.speedup["gpu"].items()) +
                                    sorted(agg.speedup["impl"].items()),
                                    "Best speedup over baseline by GPU and impl", "speedup (x, log scale)"),
    }
    if agg.failures:
        out["failures"] = svg.hbars("failure-kinds", agg.failures.most_common(), "Failed steps by kind")
    if agg.compile_by_gpu:
        kinds = [k for k in COMPILE_KINDS.values() if any(c[k] for c in agg.compile_by_gpu.values())]
        out["compile_gpu"] = svg.stacked_shares(
            "compile-errors-by-gpu", sorted(agg.compile_by_gpu.items()), kinds, "Compile errors by GPU, by kind",
            width=600)
    out["ladders"] = "".join(svg.band_chart(f"ladder-{m}", agg.ladder_bands(m), m) for m in sorted(agg.curves))
    return out


def build_report(data: Path, per_module: int = SAMPLE_PER_MODULE) -> tuple[str, dict]:
    """(the HTML page, a summary) for the dataset in `data`."""
    episodes, chats, as_episode = episode_source(data)
    if not episodes.exists():
        raise UsageError(f"{data} has no {FILES['episodes']} (is it a KernelStrain dataset?)")
    agg = Aggregate(per_module)
    for n, row in read_rows(episodes):
        with row_guard(f"{episodes.name}:{n}"):
            agg.add(as_episode(row))
    if not agg.episodes:
        raise UsageError(f"{episodes} has no episodes")
    sample = agg.sampled()
    feedback = read_feedback(chats, {ep["id"] for ep in sample})
    browser, size = [], 0
    for ep in sample:   # round-robin order: a budget cut keeps every module's first episodes
        with row_guard(f"{episodes.name}: episode {ep['id']}"):
            view = browser_episode(ep, feedback.get(ep["id"], []))
        size += len(json.dumps(view, ensure_ascii=False, separators=(",", ":")).encode())
        if size > BROWSER_BYTES and browser:
            break
        browser.append(view)
    browser.sort(key=lambda v: v["module"])
    stats = _read_json(data / "stats.json") or {}
    qa = _read_json(data / "qa.json")
    summary = {"episodes": agg.episodes, "steps": agg.steps, "browser_episodes": len(browser),
               "modules": len(agg.curves)}
    page = render_page(stats=stats, qa=qa, summary=summary, charts=charts(agg), browser=browser,
                       per_module=per_module)
    return page, summary


def write_report(data: Path, out: Path, per_module: int = SAMPLE_PER_MODULE) -> dict:
    """Write the report of `data` to `out` (atomically); returns the summary with bytes and seconds."""
    if not data.is_dir():
        raise UsageError(f"{data} is not a directory")
    if out.exists() and out.is_dir():
        raise UsageError(f"--out {out} is a directory")
    check_output(out, [data / name for name in DATASET_NAMES])
    started = time.monotonic()
    page, summary = build_report(data, per_module)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, page)
    except OSError as e:
        raise write_error(out, e) from None
    return {**summary, "bytes": out.stat().st_size, "seconds": round(time.monotonic() - started, 1)}
