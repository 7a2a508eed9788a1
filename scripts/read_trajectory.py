"""One whole trajectory as the model sees it (sft_multiturn form: each user turn's feedback lines,
each assistant kernel shortened to its change against the best's code), with, per step, the
engineer's reason read from the episode's trace in one sentence: what kind of step it was, what
changed, and its measured time against the best.

    python3 scripts/read_trajectory.py DATA EPISODE_ID [--lines 8] [--feedback 6]
    python3 scripts/read_trajectory.py DATA median     # the first converged episode of the median step count

DATA is a generated dataset directory, either layout (episodes.jsonl + sft_multiturn.jsonl, or
sessions.jsonl). The reasons are read from public fields only (kind, tag, params, status,
failure, time_ms, best_ms, kept) and the module's ladder (which rung is below which: an
ablation), as a reader of the data would reconstruct them.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import knobs  # noqa: E402
from kernelstrain.engine import RESTORE, spilled  # noqa: E402
from kernelstrain.fields import as_dict  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

_CODE = re.compile(r"```\w*\n(.*?)```", re.S)


def load(data: Path, episode_id: str) -> tuple[dict, list[dict]]:
    """(episode row, the conversation's messages in order, windows joined)."""
    if (data / "episodes.jsonl").exists():
        ep = _find(data / "episodes.jsonl", episode_id)
        windows = sorted(_rows(data, "sft_multiturn", episode_id), key=lambda r: r.get("window", 0))
        if not windows:
            raise SystemExit(f"read_trajectory: no sft_multiturn rows for {episode_id} in {data}")
        messages = list(windows[0]["messages"])
        for w in windows[1:]:        # a later window restates the task and a history: its steps are new
            first = next(i for i, m in enumerate(w["messages"]) if m["role"] == "assistant")
            messages += w["messages"][first - 1:]
        return ep, messages
    from kernelstrain.sessions import episode_row
    session = _find(data / "sessions.jsonl", episode_id)
    return episode_row(session), session["messages"]


def _matching(path: Path, episode_id: str):
    """The rows of one JSONL file whose id is `episode_id` (a substring test first: most lines are not parsed)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if f'"{episode_id}"' in line:
                row = json.loads(line)
                if row["id"] == episode_id:
                    yield row


def _find(path: Path, episode_id: str) -> dict:
    for row in _matching(path, episode_id):
        return row
    raise SystemExit(f"read_trajectory: {episode_id} not in {path}")


def median_id(data: Path) -> str:
    """The id of the first episode ending `converged` whose step count is the median of the
    dataset's converged episodes (either layout): a typical trajectory to read end to end."""
    path = data / ("episodes.jsonl" if (data / "episodes.jsonl").exists() else "sessions.jsonl")
    counts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["end"] == "converged":
                counts.append((row["id"], len(row["steps"]) if "steps" in row else row["num_steps"]))
    if not counts:
        raise SystemExit(f"read_trajectory: no converged episode in {path}")
    median = sorted(n for _, n in counts)[len(counts) // 2]
    return next(i for i, n in counts if n == median)


def _rows(data: Path, name: str, episode_id: str):
    for path in (data / f"{name}.jsonl", data / f"{name}.validation.jsonl"):
        if path.exists():
            yield from _matching(path, episode_id)


def changes(before: dict, after: dict) -> str:
    """`a x->y, b u->v` for the parameters that differ (a launch knob a row leaves out is at its default)."""
    was = {k: before.get(k, knobs.default(k)) for k in after}
    return ", ".join(f"{k} {was[k]}->{v}" for k, v in after.items() if was[k] != v)


def versus(s: dict, best_ms: float, of_best: bool = False) -> str:
    """The measured time against the best before the step (`of_best`: a run of the best's own code)."""
    if s["status"] != "ok":
        return f"it fails: {s['status']} ({s.get('failure') or 'error'})"
    ratio = s["time_ms"] / best_ms
    if of_best:
        verdict = f"the best's recorded time is now {s['best_ms']:g} ms"
    elif s["kept"]:
        verdict = "kept, the new best"
    else:
        verdict = "slower, reverted" if ratio >= 1 else "faster inside the noise, not kept"
    return f"{s['time_ms']:g} ms vs best {best_ms:g} ms ({ratio:.2f}x): {verdict}"


def retried(then: dict, now: dict, p: dict) -> bool:
    """A climb written again (engine.Episode.retries): the best's parameters it shares changed
    since it was first measured, and it is written at the best's values of them now."""
    shared = [k for k in p if k in now and k in then]
    return any(now[k] != then[k] for k in shared) and all(p[k] == now[k] for k in shared)


def spilled_step(ep: dict, module, s: dict) -> bool:
    """The compiler spilled much of step `s`'s registers, as the engine judges it (engine.spilled: the launch
    model's demand for its code against the registers it ran at); False where the row does not name the task."""
    if module is None or s.get("regs") is None or not all(k in ep for k in ("gpu", "dtype", "shape")):
        return False
    variant = next((v for v in module.variants if v.tag == s["tag"]), None)
    task = make_task(module, ep["gpu"], ep["dtype"], ep["shape"])
    return variant is not None and spilled(module, variant, as_dict(s["params"]), task, s["regs"])


def reasons(ep: dict) -> list[str]:
    """One sentence a step: why the engineer took it, read from the trace in order."""
    base = ep["baseline"]
    best = {"tag": base["tag"], "params": as_dict(base.get("params", {}))}
    best_ms, rung_ms, runs, prev, out = base["time_ms"], {base["tag"]: base["time_ms"]}, {}, None, []
    fastest = {base["tag"]: best["params"]}     # each rung's fastest configuration measured: a tune's point
    order = {}      # rungs in the order first met: a climb goes to one not met yet
    order[base["tag"]] = 0
    module = REGISTRY.get(ep.get("module"))
    ladder = {v.tag: i for i, v in enumerate(module.variants)} if module is not None else {}
    moved_on = {}   # rung -> parameters moved on it so far (a tune of one never moved: an open idea)
    last_ok = None  # the last measured step: a last step that re-runs the best after a loss past RESTORE (or a failure) restores it
    lost_at = {}    # rung -> the best's parameters when it was first measured (a climb written again: engine.retries)
    measured = {}   # rung -> its ok measurements so far
    unspilled = set()   # rungs read as written again after a spilled measurement (engine.Episode.unspill: once a rung)
    for s in ep["steps"]:
        p = as_dict(s["params"])
        key = (s["tag"], tuple(sorted(p.items())))
        of_best = s["tag"] == best["tag"] and p == best["params"]
        before = as_dict(prev["params"]) if prev is not None else {}
        slipped = [k for k in knobs.SLIPS if before.get(k)]     # a launch-bound or opt-in slip, written right
        moved = changes({k: v for k, v in before.items() if k not in slipped},
                        {k: v for k, v in p.items() if k not in slipped})
        # a repair: the failed change written right, or (a limit hit) one parameter of it backed off;
        # a step that moves more than that after a failure is the next idea, not its repair
        if of_best and s is ep["steps"][-1] and prev is not None and prev["status"] != "ok":
            why = (f"Put the best back (the file held step {prev['step']}'s code, which failed: "
                   f"{prev.get('failure') or prev['status']}) and run it once more before stopping")
        elif prev is not None and prev["status"] != "ok" and prev["tag"] == s["tag"] and moved.count("->") <= 1:
            why = (f"Repair of step {prev['step']}'s {prev.get('failure') or prev['status']} on the same rung"
                   + (f", backing off {moved}" if moved else ", the same change written right"))
        elif of_best and last_ok is not None and last_ok["time_ms"] > RESTORE * last_ok["best_ms"] \
                and s is ep["steps"][-1]:
            why = (f"Put the best back (the file held step {last_ok['step']}'s code, "
                   f"{last_ok['time_ms'] / last_ok['best_ms']:.2f}x slower) and run it once more before stopping")
        elif s["kind"] == "rebench" or key in runs:     # measured before: only a close call is re-measured
            who = "the best" if of_best else "a close-call candidate"
            why = f"Re-measure {who} to settle a close call inside the noise"
        elif s["tag"] != best["tag"] and ladder.get(s["tag"], 1) < ladder.get(best["tag"], 0) \
                and all(p[k] == best["params"][k] for k in p if k in best["params"]):
            # the best's parameters on a rung below; a lower rung at other values is a contender's
            # tune (kernelinfer's runner-up, search.runner_up), read by the branches below
            why = (f"Ablate the best's technique: its parameters on `{s['tag']}`, a rung below, to learn "
                   "what the technique buys")
        elif s["tag"] != best["tag"] and s["tag"] in lost_at and retried(lost_at[s["tag"]], best["params"], p):
            why = (f"Write `{s['tag']}` again at the best's new parameters ({changes(lost_at[s['tag']], best['params'])} "
                   "since it lost at the old ones)")
        elif s["tag"] != best["tag"] and prev is not None and prev["status"] == "ok" and prev["tag"] == s["tag"] \
                and measured.get(s["tag"]) == 1 and s["tag"] not in unspilled and spilled_step(ep, module, prev):
            # engine.Episode.unspill: the rewrite's only measurement spilled (engine.spilled: its code holds a thread
            # SPILLS x the registers it ran at), so it is written once more, at the next step, at a config that does
            # not. A later step on the rung, or one after a build that did not spill, is a contender's tune (a rung
            # that lost by 2.2x and more in every tune, kernelinfer-s86224-000545 steps 14-16, read as spill fixes)
            unspilled.add(s["tag"])
            why = (f"Write `{s['tag']}` again at a config that does not spill (step {prev['step']}, its only "
                   f"measurement, spilled at {prev['regs']} registers a thread, {prev['time_ms'] / prev['best_ms']:.2f}x "
                   f"the best): {changes(as_dict(prev['params']), p)}")
        elif s["tag"] != best["tag"] and s["tag"] in rung_ms:
            why = f"Tune `{s['tag']}`, a rewrite that came close: {changes(fastest[s['tag']], p) or 'its own parameters'}"
        elif s["tag"] != best["tag"] and s["tag"] not in order and ladder.get(s["tag"], 1) < ladder.get(best["tag"], 0):
            # a rung below never written, at values of its own where the best's do not exist on it
            why = (f"Write `{s['tag']}`, a rung below the best never written (an ablation: what the best's technique "
                   "buys here; or, after a step down won, the next rung down)")
        elif s["tag"] != best["tag"] and s["tag"] not in order:
            why = f"Rewrite onto a new technique, `{s['tag']}` (a climb the last profile's bottleneck points at)"
        elif s["tag"] != best["tag"]:
            why = f"Rewrite onto `{s['tag']}`, a technique met before"
        elif s["kind"] == "joint":
            why = f"Joint move of two or more parameters of the best: {changes(best['params'], p)}"
        else:
            name = next((k for k in p if p[k] != best["params"].get(k)), None)
            fresh = name is not None and name not in moved_on.get(s["tag"], set())
            why = f"Tune the best one parameter: {changes(best['params'], p)}" + (
                " (a parameter not moved on this rung yet)" if fresh else "")
        if s.get("bug"):
            why += " (a risky transformation slipped in)"
        out.append(f"{why}; {versus(s, best_ms, of_best and s['status'] == 'ok' and not s['kept'])}.")
        order.setdefault(s["tag"], len(order))
        moved_on.setdefault(s["tag"], set()).update(k for k in p if p[k] != best["params"].get(k)
                                                    and s["tag"] == best["tag"])
        if s["status"] == "ok":
            measured[s["tag"]] = measured.get(s["tag"], 0) + 1
            if s["tag"] != best["tag"] and not s["kept"]:
                lost_at.setdefault(s["tag"], dict(best["params"]))
            runs.setdefault(key, []).append(s["time_ms"])
            if s["time_ms"] < rung_ms.get(s["tag"], float("inf")):
                rung_ms[s["tag"]], fastest[s["tag"]] = s["time_ms"], p
        if s["kept"]:
            best = {"tag": s["tag"], "params": p}
        if s["status"] == "ok":
            last_ok = s
        best_ms, prev = s["best_ms"], s
    return out


def shortened(code: str, best_code: str, lines: int, seen: dict | None = None) -> str:
    """The kernel as its change against the best's code, at most `lines` changed lines; a kernel
    submitted before (`seen`: code -> the step that first submitted it) is named as that, not
    diffed. A fenced block ends with a newline the row's code does not have: neither is a change."""
    code, best_code = code.rstrip("\n"), best_code.rstrip("\n")
    if code == best_code:
        return "    (the best's code again, byte for byte)"
    if seen and code in seen:
        return f"    (step {seen[code]}'s code again, byte for byte)"
    diff = [d for d in difflib.unified_diff(best_code.split("\n"), code.split("\n"), lineterm="", n=0)
            if not d.startswith(("---", "+++", "@@"))]
    more = f"\n    ... {len(diff) - lines} more changed lines" if len(diff) > lines else ""
    return "\n".join("    " + d for d in diff[:lines]) + more


def render(ep: dict, messages: list[dict], lines: int = 8, feedback: int = 6) -> str:
    steps, why = ep["steps"], reasons(ep)
    base = ep["baseline"]
    shape = ", ".join(f"{d['dim']}={d['value']}" for d in ep["shape"]) if isinstance(ep["shape"], list) else ep["shape"]
    out = [f"# {ep['id']}: {ep['module']} on {ep['gpu']}, {ep['dtype']}, {shape}",
           f"baseline {base['time_ms']:g} ms; best {ep['best']['time_ms']:g} ms at step {ep['best']['step']} "
           f"({ep['best']['speedup']}x); {len(steps)} steps, end `{ep['end']}`, {ep['elapsed_s'] / 3600:.2f} h", ""]
    turns = [m for m in messages if m["role"] != "system"]
    best_code, i, seen = base["code"], 0, {}
    for m in turns:
        if m["role"] == "user":
            text = [x.strip() for x in _CODE.sub("[code]", m["content"]).split("\n") if x.strip()]
            out.append("USER: " + " / ".join(text[:feedback]) + (" / ..." if len(text) > feedback else ""))
            continue
        if i >= len(steps):
            break
        s = steps[i]
        code = _CODE.search(m["content"])
        text = code.group(1) if code else m["content"]
        out.append(f"ASSISTANT step {s['step']} (weight {m.get('weight', '-')}):")
        out.append(shortened(text, best_code, lines, seen))
        out.append(f"  WHY step {s['step']}: {why[i]}")
        seen.setdefault(text.rstrip("\n"), s["step"])
        if s["kept"]:
            best_code = s["code"] if "code" in s else text
        i += 1
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("episode_id", help="an episode's id, or `median` (median_id)")
    ap.add_argument("--lines", type=int, default=8, help="changed lines of each kernel shown")
    ap.add_argument("--feedback", type=int, default=6, help="lines of each user turn shown")
    args = ap.parse_args(argv)
    ep, messages = load(args.data, median_id(args.data) if args.episode_id == "median" else args.episode_id)
    print(render(ep, messages, args.lines, args.feedback))
    return 0


if __name__ == "__main__":
    sys.exit(main())
