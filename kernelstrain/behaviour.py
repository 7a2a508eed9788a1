"""How an episode behaves, read as a kernel engineer reads it (qa's behaviour checks, SPEC §10):
steps after the final best, returns to rungs measured slow, configurations proposed again,
bugs made again, close calls settled by re-measuring the candidate alone or more than once, a
first move no engineer chose, `converged` endings far from the best or on a failure, baselines far
slower than PyTorch eager, and the generator's labels in what the model reads.

>>> row = {"end": "converged", "best": {"step": 1}, "baseline": {"tag": "a", "params": {"t": 1}, "time_ms": 9.0},
...        "steps": [{"step": 1, "tag": "b", "params": {"t": 1}, "kind": "structural", "status": "ok",
...                   "time_ms": 1.0, "best_ms": 1.0, "bug": None, "kept": True},
...                  {"step": 2, "tag": "a", "params": {"t": 2}, "kind": "structural", "status": "ok",
...                   "time_ms": 8.0, "best_ms": 1.0, "bug": None}]}
>>> f = figures(row); f["tail"], f["slow_rung_returns"], f["converged_far"]
(1, 1, 0)
"""
from __future__ import annotations

import functools
import math
import re
from collections import Counter

from . import knobs
from .fields import as_dict

SLOW_RUNG = 2.0      # a rung whose best measurement is this many times the best is not returned to
FAR_END = 1.5        # a `converged` episode none of whose last LAST_STEPS measured steps is within this of its best
LAST_STEPS = 3
EAGER_FAR = 67.0     # a baseline this many times the PyTorch eager reference's time is no engineer's start (search.eager_cap)
LOWER_LOST = 1.1     # a rung below the best whose measurement there lost by this much was ablated: its lesson is learnt
LOST_WAY = 2.0       # a one-value move of the best's parameter that lost by this much (a cliff) is not asked again while
                     # that parameter stands where it stood: a coupled partner's move can turn a loss of tens of percent
                     # around (the engine reopens those: num_stages +1 lost 27% at BLOCK_K 32, won 19% at 64), not 2x
EAGER_NOISE = 1.1    # the engine caps the modelled time; the row holds one measurement of it, which the harness
                     # noise moves (cv 1% over 50 us, where such baselines are: sim.noise_cv): past the cap by 10% is far
KINDS_SEEN = re.compile(r"\b(structural|param_sweep|joint|rebench|endgame)\b")
_FENCE = re.compile(r"```.*?```", re.S)
_TIME = re.compile(r"\b\d+(?:\.\d+)? (us|ms)\b")
# a tool's quote of the candidate's source (the code itself, comments and all, which the model
# reads anyway): Triton's `at L:C:` excerpt down to its caret, and a compiler's line above a caret,
# from the line's start ((?<![^\n]): the same matches as from any position of the line, found
# without scanning the rest of the line again from each of its characters: 5x faster over qa's prompts)
_EXCERPT = re.compile(r"at \d+:\d+:\n.*?\n[ \t]*\^[ \t]*(?:\n|$)|(?<![^\n])[^\n]*\n[ \t]*\^[~ \t]*(?:\n|$)", re.S)
# KINDS_SEEN and _TIME as qa searches them (every prose line, every multi-turn user turn): a pattern that
# opens with \b tries the whole pattern at every position; these open with their first character (a word's
# letter, a digit), which re scans for in C, and check the boundary behind it (\b before a word character
# is (?<!\w)): the same matches (tests/test_caches.py), ~7x faster for the kinds, ~1.4x for the times
_KINDS_FROM = re.compile("(" + "|".join(rf"{k}(?<!\w{k})" for k in ("structural", "param_sweep", "joint", "rebench",
                                                                     "endgame")) + r")\b")
_TIME_FROM = re.compile(r"\d(?<!\w\d)\d*(?:\.\d+)? (us|ms)\b")


def config(tag: str, params) -> tuple:
    """A (rung, parameters) pair as a hashable key, whichever form the row stores params in; a
    launch knob at its default is left out, as the baseline's row leaves every knob out."""
    return tag, tuple(sorted((k, v) for k, v in as_dict(params).items() if v != knobs.default(k)))


def figures(ep: dict) -> Counter:
    """Counters of one public episode row (episodes.jsonl, or a session's episode_row)."""
    f = Counter()
    steps, base = ep["steps"], ep["baseline"]
    best_ms = base["time_ms"]
    base_key = config(base["tag"], base.get("params", {}))
    rung_ms = {base["tag"]: base["time_ms"]}      # fastest measurement of each rung so far
    runs = {base_key: [base["time_ms"]]}           # measurements of each config so far
    best_key, bugs, prev = base_key, set(), None
    measured = Counter()                           # ok measurements of each rung so far
    pos = _ladder(ep.get("module"))                # rung -> its place on the module's ladder (None: unknown)
    below_ms: dict = {}                            # rung -> its fastest measurement made while below the best
    best_params = dict(base_key[1])                # the best's parameters (launch knobs at their defaults left out)
    lost_ways: dict = {}                           # (rung, parameter, from, to) -> its worst loss against the best
    f["steps"] = len(steps)
    eager = ep.get("torch_eager_ms")
    f["baseline_far_from_eager"] += bool(eager) and base["time_ms"] > EAGER_FAR * EAGER_NOISE * eager
    f["tail"] = sum(1 for s in steps if s["step"] > ep["best"]["step"])
    # an episode is one draw of the tail share (its steps are not independent): what tail_error needs
    f["episodes"], f["tail_sq"], f["steps_sq"], f["tail_steps"] = 1, f["tail"] ** 2, len(steps) ** 2, f["tail"] * len(steps)
    for s in steps:
        key = config(s["tag"], s["params"])
        repair = prev is not None and prev["status"] != "ok" and config(prev["tag"], prev["params"]) == key
        # a deliberate re-measure: of the best, or of a close call (measured faster than the best, inside the noise)
        close = key in runs and sum(runs[key]) / len(runs[key]) < best_ms
        # the step right after a rung's one measurement, on that rung, is its second look (the engine re-writes a
        # rung whose only measurement spilled at a configuration that does not), not a return to known-slow code
        second_look = prev is not None and prev["tag"] == s["tag"] and prev["status"] == "ok" and measured[s["tag"]] == 1
        if (s["tag"] != best_key[0] and not repair and not second_look
                and rung_ms.get(s["tag"], 0.0) >= SLOW_RUNG * best_ms):
            f["slow_rung_returns"] += 1
        if key in runs and key != best_key and not close:
            f["reproposed"] += 1
        if close and key != best_key and len(runs[key]) >= len(runs[best_key]):
            f["one_sided_remeasures"] += 1      # the candidate again while the best has no more runs than it
        if s["status"] == "ok" and key in runs:
            f["remeasures"] += 1
            f["close_call_reruns"] += key != best_key and len(runs[key]) >= 2   # a candidate's third run
        # a walk on a rung below the best after its ablation there lost (issue 26: "ablate a feature of the best at
        # most once, to learn from it"): a repair of the step before and a close call's re-measure are not walks
        if pos and pos.get(s["tag"], 0) < pos.get(best_key[0], 0) and not repair and not close \
                and below_ms.get(s["tag"], 0.0) > LOWER_LOST * best_ms:
            f["lower_rung_walks"] += 1
        way = _one_move(best_key[0], best_params, key)
        if way is not None and lost_ways.get(way, 0.0) >= LOST_WAY and not repair:
            f["lost_ways_reasked"] += 1
        if way is not None and s["status"] == "ok" and not s.get("kept"):
            lost_ways[way] = max(lost_ways.get(way, 0.0), s["time_ms"] / best_ms)
        if s.get("bug"):
            f["bugs_remade"] += s["bug"] in bugs
            bugs.add(s["bug"])
        if s["status"] == "ok":
            runs.setdefault(key, []).append(s["time_ms"])
            measured[s["tag"]] += 1
            rung_ms[s["tag"]] = min(rung_ms.get(s["tag"], s["time_ms"]), s["time_ms"])
            if pos and pos.get(s["tag"], 0) < pos.get(best_key[0], 0):
                below_ms[s["tag"]] = min(below_ms.get(s["tag"], s["time_ms"]), s["time_ms"])
        if s.get("kept"):
            best_key, best_params = key, dict(key[1])
        best_ms, prev = s["best_ms"], s
    if steps and steps[0]["tag"] == base["tag"] and config(steps[0]["tag"], steps[0]["params"]) != base_key:
        f["first_tweaks"] += 1
        f["first_tweaks_failed"] += steps[0]["status"] != "ok"
    last = [s["time_ms"] for s in steps if s["status"] == "ok"][-LAST_STEPS:]
    if ep.get("end") == "converged":
        f["converged"] += 1
        f["converged_far"] += bool(last) and min(last) > FAR_END * best_ms
        f["converged_on_failure"] += bool(steps) and steps[-1]["status"] != "ok"
    return f


def _one_move(best_tag: str, best_params: dict, key: tuple) -> tuple | None:
    """(rung, parameter, from, to) where config `key` is the best's rung with one parameter moved, else None."""
    tag, params = key
    if tag != best_tag:
        return None
    params = dict(params)
    moved = [n for n in set(params) | set(best_params)
             if params.get(n, knobs.default(n)) != best_params.get(n, knobs.default(n))]
    if len(moved) != 1:
        return None
    n = moved[0]
    return tag, n, best_params.get(n, knobs.default(n)), params.get(n, knobs.default(n))


@functools.lru_cache(maxsize=None)
def _ladder(module: str | None) -> dict | None:
    """{rung tag: its place on the module's ladder}, None for a row without a registered module."""
    from .ops import REGISTRY
    if module is None or module not in REGISTRY:
        return None
    return {v.tag: i for i, v in enumerate(REGISTRY[module].variants)}


def labels_in(text: str, tags) -> list[str]:
    """The generator's words (step kinds, rung tags) in a prompt's prose, code blocks left out:
    a harness prints code, compiler, checker and timer output, never these."""
    prose = without_fences(text)
    if "^" in prose:        # every excerpt has a caret line (the pattern tries each position of each line)
        prose = _EXCERPT.sub("", prose)
    tags = tuple(tags)
    found, seen = [], set()
    # line by line: no label spans a line (the words have no newline, and a line's ends read as a
    # newline does to the patterns' boundaries), so the lines' findings in order are the prose's.
    # A step's prompt repeats the episode's task and the history before it, and qa reads every
    # prompt: each distinct line is scanned once (_line_labels), not once a prompt it is in
    known = _LINES.get(tags)
    if known is None or len(known) >= LINES_MAX:
        _LINES.clear()          # one ladder's lines at a time: qa judges an episode's rows together
        known = _LINES[tags] = {}
    for line in prose.split("\n"):
        hit = known.get(line)
        if hit is None:
            hit = known[line] = _line_labels(line, tags)
        if hit is not _NONE:
            found += hit[0]
            seen.update(hit[1])
    return found + [t for t in tags if t in seen]


_LINES: dict = {}           # the last ladder's tags -> {a line of prose: _line_labels of it}
LINES_MAX = 1 << 12         # lines kept (an episode's prompts share most of their lines)
_NONE = ((), ())


def _line_labels(line: str, tags: tuple) -> tuple:
    """(the step kinds in one line of prose, in order; the tags in it), _NONE for neither."""
    words = _tag_words(tags)
    if words is None:
        tagged = tuple(t for t in tags if re.search(rf"(?<![\w.]){re.escape(t)}(?!\w)", line))
    else:
        tagged = tuple(set(words.findall(line)))
    kinds = tuple(_KINDS_FROM.findall(line))
    return (kinds, tagged) if kinds or tagged else _NONE


def without_fences(text: str) -> str:
    """`text` less its code blocks: each ``` to the next, as _FENCE.sub("", text) removes them,
    found by str.find (the pattern's lazy scan tries every character: 5x slower over qa's prompts).

    >>> without_fences("a ```x``` b ```y"), without_fences("``````` c")
    ('a  b ```y', '` c')
    """
    parts, at = [], 0
    while True:
        i = text.find("```", at)
        j = text.find("```", i + 3) if i >= 0 else -1
        if j < 0:
            break
        parts.append(text[at:i])
        at = j + 3
    return "".join(parts) + text[at:] if parts else text


@functools.lru_cache(maxsize=512)
def _tag_words(tags: tuple):
    """One pattern for a ladder's tags (qa asks every prompt of every step): a match of a tag of
    word characters is a whole word, so the whole words this finds are the tags one search each
    would find; None where a tag has another character (searched one by one)."""
    if not all(re.fullmatch(r"\w+", t) for t in tags):
        return None
    if not tags:
        return None
    # each tag's boundary behind it checked after its literal (see _KINDS_FROM): (?<![\w.]) before it
    alternatives = "|".join(rf"{re.escape(t)}(?<![\w.]{re.escape(t)})" for t in tags)
    return re.compile(rf"(?:{alternatives})(?!\w)")


def time_units(text: str) -> set:
    """The units times are printed in, in a prompt's prose (code blocks left out).

    >>> sorted(time_units("time: 20.84 us, vs best 21.84 us ```cuda // 3 ms ```"))
    ['us']
    """
    return set(_TIME_FROM.findall(without_fences(text)))


def tail_share(f: Counter) -> float:
    return round(f["tail"] / max(1, f["steps"]), 4)


def tail_error(f: Counter) -> float:
    """The standard error of tail_share over the episodes summed in `f`: a ratio of sums whose draws
    are episodes, not steps (an episode's steps after its best come together), so the ratio
    estimator's sqrt(sum_i (tail_i - r steps_i)^2 / (n (n - 1))) / mean steps; 0 where `f` does not
    count its episodes (figures summed before they did) or holds fewer than two.

    >>> f = Counter(episodes=2, tail=3, steps=10, tail_sq=5, steps_sq=52, tail_steps=16)   # 1 of 4 and 2 of 6
    >>> round(tail_error(f), 4)
    0.04
    """
    n, steps = f["episodes"], f["steps"]
    if n < 2 or not steps:
        return 0.0
    r = f["tail"] / steps
    spread = f["tail_sq"] - 2 * r * f["tail_steps"] + r * r * f["steps_sq"]
    return math.sqrt(max(0.0, spread) / (n * (n - 1))) / (steps / n)
