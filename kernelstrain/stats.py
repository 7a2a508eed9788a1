"""stats.json: counts and distributions accumulated while episodes stream past, and the
human summary `kernelstrain stats` prints."""
from __future__ import annotations

import json
import math
from collections import Counter

from .version import __version__
from .schema import KINDS, SCHEMA, STATUSES

SPEEDUP_EDGES = (1, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000)


def stats_fields(ep: dict) -> dict:
    """What the stats need of an episode (StatsAccumulator.add), without the code."""
    keys = ("op", "module", "gpu", "impl", "family", "dtype", "shape", "best", "elapsed_s")
    return {**{k: ep[k] for k in keys}, "steps": [{"status": s["status"], "kind": s["kind"]} for s in ep["steps"]]}


class StatsAccumulator:
    """Add episodes (as dicts) one at a time; `result()` gives the stats object."""

    def __init__(self):
        self.episodes = 0
        self.steps = 0
        self.status, self.kind = Counter(), Counter()
        self.by = {k: Counter() for k in ("op", "module", "gpu", "impl", "family", "dtype")}
        self.steps_hist = Counter()
        self.speedup_hist = Counter()
        self.speedup_sum = self.speedup_log_sum = 0.0
        self.speedup_min, self.speedup_max = math.inf, 0.0
        self.torch_n = self.torch_beats = 0          # best over the PyTorch eager reference (best.speedup_vs_torch)
        self.torch_log_sum, self.torch_min, self.torch_max = 0.0, math.inf, 0.0
        self.elapsed_sum = 0
        self.elapsed_min, self.elapsed_max = math.inf, 0
        self.combos = set()
        self.chat = {}          # chat file -> [rows, assistant targets, weight-1 targets, Counter of tokens]

    def add_chat(self, name: str, figures) -> None:
        """Chat rows of a file, as training.chat_figure gives them (a file is listed once it
        has a row)."""
        for tokens, targets, weighted in figures:
            f = self.chat.setdefault(name, [0, 0, 0, Counter()])
            f[0] += 1
            f[1] += targets
            f[2] += weighted
            f[3][tokens] += 1

    def add(self, ep: dict) -> None:
        """An episode row, its stats_fields (with its chat rows' figures under "chat"), or a
        session row (its steps are its `trace`)."""
        for name, figures in ep.get("chat", {}).items():
            self.add_chat(name, figures)
        self.episodes += 1
        steps = ep["steps"] if "steps" in ep else ep["trace"]
        n = len(steps)
        self.steps += n
        self.steps_hist[n] += 1
        for s in steps:
            self.status[s["status"]] += 1
            self.kind[s["kind"]] += 1
        for k, c in self.by.items():
            c[ep[k]] += 1
        sp = ep["best"]["speedup"]
        self.speedup_sum += sp
        self.speedup_log_sum += math.log(sp)
        self.speedup_min, self.speedup_max = min(self.speedup_min, sp), max(self.speedup_max, sp)
        self.speedup_hist[next((f"<{e}" for e in SPEEDUP_EDGES if sp < e), f">={SPEEDUP_EDGES[-1]}")] += 1
        vs = ep["best"].get("speedup_vs_torch")
        if vs is not None:
            self.torch_n += 1
            self.torch_beats += vs > 1
            self.torch_log_sum += math.log(vs)
            self.torch_min, self.torch_max = min(self.torch_min, vs), max(self.torch_max, vs)
        self.elapsed_sum += ep["elapsed_s"]
        self.elapsed_min, self.elapsed_max = min(self.elapsed_min, ep["elapsed_s"]), max(self.elapsed_max, ep["elapsed_s"])
        self.combos.add((ep["op"], ep["gpu"], json.dumps(ep["shape"]), ep["dtype"]))

    def chat_figures(self, settings: dict) -> dict:
        """Each chat file's rows, targets, weight-1 share and token percentiles (messages.tokens,
        the template's framing included) against the profile's budget (settings)."""
        files = {}
        for name in sorted(self.chat):
            rows, targets, weighted, tokens = self.chat[name]
            ranked = sorted(tokens.elements())
            within = sum(n for t, n in tokens.items() if t <= settings["max_context_tokens"])
            files[name] = {"rows": rows, "targets": targets, "weight1_targets": weighted,
                           "weight1_share": round(weighted / max(1, targets), 4),
                           "tokens": {q: ranked[min(rows - 1, int(p * rows))] if rows else 0
                                      for q, p in (("p50", .5), ("p90", .9), ("p99", .99), ("max", 1.0))},
                           "within_budget": round(within / max(1, rows), 4)}
        return {**settings, "files": files}

    def result(self, profile, seed: int, holdout_tasks: int, files: dict, shard: str | None = None,
               holdout: dict | None = None, layout: str = "episodes", batch_size: int | None = None,
               chat: dict | None = None) -> dict:
        """The stats object; a layout other than the default one is named, and one that cuts its
        rows into batches (`batch_size` given) adds the batch size, session count, unique (op, gpu,
        shape, dtype) combos and the simulated hours' range; `chat` (the profile's
        max_context_tokens and validation_frac) adds the chat files' figures."""
        n, steps = max(1, self.episodes), max(1, self.steps)
        lengths = sorted(self.steps_hist.elements())
        hours = {"mean": round(self.elapsed_sum / n / 3600, 3)}
        sessions = {"layout": layout} if layout != "episodes" else {}
        if batch_size is not None:
            sessions.update(batch_size=batch_size, sessions=self.episodes, unique_combos=len(self.combos))
            hours.update(min=round(self.elapsed_min / 3600, 3) if self.episodes else 0,
                         max=round(self.elapsed_max / 3600, 3))
        return {
            "schema": SCHEMA["stats"],
            "generator": f"kernelstrain {__version__}",
            "profile": profile.name,
            "profile_description": profile.description,
            **sessions,
            "seed": seed,
            "episodes": self.episodes,
            "steps": self.steps,
            "holdout_tasks": holdout_tasks,
            **({"holdout": holdout} if holdout else {}),
            "status": {k: self.status[k] for k in STATUSES},
            "status_pct": {k: round(100 * self.status[k] / steps, 2) for k in STATUSES},
            "kind": {k: self.kind[k] for k in KINDS},
            "steps_per_episode": {"mean": round(self.steps / n, 3), "min": lengths[0] if lengths else 0,
                                  "median": lengths[len(lengths) // 2] if lengths else 0,
                                  "max": lengths[-1] if lengths else 0,
                                  "hist": {str(k): self.steps_hist[k] for k in sorted(self.steps_hist)}},
            "speedup": {"mean": round(self.speedup_sum / n, 3), "geomean": round(math.exp(self.speedup_log_sum / n), 3),
                        "min": round(self.speedup_min, 3) if self.episodes else 0, "max": round(self.speedup_max, 3),
                        "hist": {k: self.speedup_hist[k] for k in [f"<{e}" for e in SPEEDUP_EDGES] + [f">={SPEEDUP_EDGES[-1]}"]}},
            "speedup_vs_torch": {"episodes": self.torch_n,
                                 "geomean": round(math.exp(self.torch_log_sum / max(1, self.torch_n)), 3),
                                 "min": round(self.torch_min, 3) if self.torch_n else 0, "max": round(self.torch_max, 3),
                                 "beats_eager_pct": round(100 * self.torch_beats / max(1, self.torch_n), 2)},
            "simulated_hours": hours,
            **{f"by_{k}": dict(sorted(c.items())) for k, c in self.by.items()},
            **({"chat": self.chat_figures(chat)} if chat else {}),
            "files": files,
            **({"shard": shard} if shard else {}),
        }


def summary(stats: dict) -> str:
    """Human summary of a stats object."""
    st, pct = stats["status"], stats["status_pct"]
    spe, sp = stats["steps_per_episode"], stats["speedup"]
    lines = [
        f"profile {stats['profile']} (seed {stats['seed']}), {stats['generator']}",
        f"episodes        {stats['episodes']:,}",
        f"steps           {stats['steps']:,}  (per episode: mean {spe['mean']}, median {spe['median']}, "
        f"min {spe['min']}, max {spe['max']})",
        "status          " + ", ".join(f"{k} {st[k]:,} ({pct[k]}%)" for k in st),
        "kinds           " + ", ".join(f"{k} {v:,}" for k, v in stats["kind"].items()),
        f"speedup         mean {sp['mean']}x, geomean {sp['geomean']}x, max {sp['max']}x",
        *([_vs_torch_line(stats["speedup_vs_torch"])] if "speedup_vs_torch" in stats else []),
        *([f"sessions        {stats['sessions']:,} ({stats['unique_combos']:,} unique (op, gpu, shape, dtype) combos), "
           f"batches of {stats['batch_size']}; simulated hours mean {stats['simulated_hours']['mean']}, "
           f"min {stats['simulated_hours']['min']}, max {stats['simulated_hours']['max']}"]
          if "batch_size" in stats else []),
        f"holdout tasks   {holdout_total(stats)}",
        *holdout_lines(stats),
        f"modules         {len(stats['by_module'])} ({len(stats['by_op'])} ops); "
        + ", ".join(f"{k} {v}" for k, v in stats["by_impl"].items()),
        "gpus            " + ", ".join(f"{k} {v:,}" for k, v in stats["by_gpu"].items()),
        *chat_lines(stats),
        "files:",
    ]
    lines += [f"  {name:40} {f['rows']:>9,} rows {f['bytes'] / 1e6:>10.1f} MB" for name, f in stats["files"].items()]
    return "\n".join(lines)


def holdout_total(stats: dict) -> str:
    """Held-out tasks of every split (stats.json's `holdout_tasks` counts the combo split only)."""
    splits = stats.get("holdout", {}).get("splits") or {}
    if not splits:
        return f"{stats['holdout_tasks']:,}"
    total = sum(s["tasks"] for s in splits.values())
    return f"{total:,} (" + ", ".join(f"{name} {s['tasks']:,}" for name, s in splits.items()) + ")"


def chat_lines(stats: dict) -> list[str]:
    """Each chat file's rows, weight-1 share and token percentiles against the budget."""
    c = stats.get("chat")
    if not c:
        return []
    lines = [f"chat rows       tokens by messages.tokens (+5 a message), budget {c['max_context_tokens']:,}; "
             f"validation split: {c['validation_frac']:.0%} of the tasks"]
    for name, f in c["files"].items():
        t = f["tokens"]
        lines.append(f"  {name:38} {f['rows']:>8,} rows, weight 1 on {f['weight1_share']:.1%} of {f['targets']:,} "
                     f"targets; tokens p50 {t['p50']:,} p90 {t['p90']:,} max {t['max']:,}, "
                     f"{f['within_budget']:.1%} within budget")
    return lines


def holdout_lines(stats: dict) -> list[str]:
    """Each holdout split's size and contamination, and the modules held out of training."""
    h = stats.get("holdout")
    if not h:
        return []
    lines = []
    for name, s in h["splits"].items():
        what = f"ops {', '.join(s['ops'])}" if "ops" in s else f"gpus {', '.join(s['gpus'])}" if "gpus" in s else "combos"
        lines.append(f"  {name:11} {s['tasks']:>4} tasks ({what}) -> {s['file']}")
        c = s.get("contamination")
        if c:
            n, ex, ng = c["tasks"], c["exact"], c["ngram"]
            lines.append(f"  {'':11} exact after normalization: solution {ex['solution']}/{n}, baseline "
                         f"{ex['baseline']}/{n}, reference {ex['reference']}/{n}")
            lines.append(f"  {'':11} {h['contamination_method']['ngram']}-gram overlap of solutions: max "
                         f"{ng['solution_ngram']['max']:.2f}, mean {ng['solution_ngram']['mean']:.2f}; kernel-specific: max "
                         f"{ng['solution_ngram_specific']['max']:.2f}, mean {ng['solution_ngram_specific']['mean']:.2f}")
    held = h["modules_held_out"]
    lines.append(f"training        {len(h['modules_in_training'])} modules; held out of training: "
                 + (", ".join(held) if held else "none"))
    return lines


def dumps_stats(stats: dict) -> str:
    return json.dumps(stats, indent=2, ensure_ascii=False) + "\n"


def _vs_torch_line(vs: dict) -> str:
    return (f"vs PyTorch      eager time / best time: geomean {vs['geomean']}x (min {vs['min']}x, max {vs['max']}x); "
            f"{vs['beats_eager_pct']}% of {vs['episodes']:,} episodes beat eager")
