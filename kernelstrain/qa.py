"""`qa`: does the data teach the true loop? Figures a model trainer would check, each with
its threshold: honest keeps, no filler, varied paths, recovery, labels that say what
changed, physical limits, the failure mix and context lengths.

Streams episodes.jsonl, sft_multiturn.jsonl and sft_steps.jsonl (each with its validation file) once each; memory holds
only counters (per module, per path), whatever the dataset size.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

from . import behaviour
from .compilers import classify
from .messages import tokens
from .ops import REGISTRY
from .schema import COMPILE_FAILURES, FAILURES, SCHEMA

AUTHOR = ("syntax", "mismatch", "fault", "type", "constexpr")   # the author's own slips: fixed next
from .sim import noise_cv, register_cap, roofline_floor_ms, simulate
from .knobs import launch
from .limits import demand, overflow
from .tasks import carry, make_task
from .sessions import SESSIONS_FILE, episode_row
from .fields import as_dict
from .slip_memory import repeats, site
from .episodes import kind_mismatch
from .reading import read_jsonl, read_whole
from .rerender import render_code
from .training import in_plan_order
from .writers import FILES, VALIDATION, record_paths
from .episodes import replay

# Path variety is judged where an engineer had a real choice of path: a choice point is a climb (the
# first write of a rung above the best's) made while two or more untried rungs above the best could
# beat it (choice_points: their simulated time at the parameters a climb carries over is faster than
# the best's recorded time beyond the noise). Each episode's first choice point is scored: there the
# habits drawn for the episode (which rung first, a leap to tensor cores) show across engineers, while a
# later one is reached only by the engineers whose earlier choices led there, and asks the same habit
# again. At each such situation (the module, the rung climbed from, the rungs open there) the data must
# not take one rung every time. A module whose first rewrite reaches the floor has that one choice and
# no later one: the engineer who stops there walked the right path, whatever its length; a ladder of
# one rung up has none.
# A situation reached fewer times says nothing: 10 of 10 on one rung is chance at CHOICE_SHARE_MAX
# (0.8^10 = 0.11); 20 of 20 is not (0.01), nor 28 of 30 within two standard errors.
MIN_EPISODES_FOR_PATHS = 20
MIN_SESSIONS_FOR_PATHS = 20
CHOICE_SHARE_MAX = 0.8        # the most common rung taken at a choice point: engineers differ in where they
                              # climb (most take the next rung up: Habits.skip, expert_first), a script always
                              # takes one; passes within two standard errors of the situation's count
TAIL_MAX = 0.334              # steps after the final best: at most a third (kernelinfer sessions: under half)
SESSION_TAIL_MAX = 0.49
MIN_EPISODES_FOR_TAIL = 50    # the tail share is judged on this many episodes (sessions) or more, and passes within
                              # two standard errors of its episodes (behaviour.tail_error): a few episodes' tails are
                              # not a profile's (seed 0's first 30 default episodes on 13da929: 0.479, the full run's
                              # 0.303, the 30 of seeds 1-5 0.23-0.32; 2 standard errors at 30 episodes: 0.08-0.12)
FIRST_TWEAK_FAIL_MAX = 0.5    # first steps on the baseline's rung that fail: the failure mix, not a rule
CONVERGED_FAR_MAX = 0.02      # converged endings far from the best: a last climb that lost, then tunes that did too
FIRST_TWEAK_FAILS_MIN = 2     # ... and this many whatever the share (a sample with one or two such steps)


def _failure(s: dict) -> str | None:
    """The step's failure class; read from the error text for rows made before @2."""
    if "failure" in s:
        return s["failure"]
    if s["status"] == "compile_error":
        return classify(s["error"]) if "MaxDynamicSharedMemorySize" not in s["error"] else "smem"
    if s["status"] == "wrong_result":
        return "fault" if "illegal memory access" in s["error"] else "mismatch"
    return None


class _Acc:
    def __init__(self):
        self.c = Counter()
        self.fail = Counter()
        self.repeats = Counter()     # slip_memory.repeats of every session, summed
        self.rebench_run_max = 0
        self.mt_tokens, self.step_tokens = Counter(), Counter()    # token count (16s) -> rows
        self.speedup_log, self.speedup_max = 0.0, 0.0
        self.behaviour = Counter()   # behaviour.figures of every episode, summed
        self.unworthy = set()        # (episode id, step) of steps no target should teach: failed, or
                                     # their code's mean slower than the best before them beyond the keep margin
        self.tags = {}               # module -> its rung tags (the labels a prompt must not show)
        self.paths = defaultdict(Counter)   # choice point (module: from rung, open rungs) -> rung climbed to

    def merge(self, other: "_Acc") -> "_Acc":
        """Add another accumulator's figures (an episode's, judged apart: episode_qa). Its
        `unworthy` steps are its own episode's, already counted against its rows."""
        for mine, theirs in ((self.c, other.c), (self.fail, other.fail), (self.repeats, other.repeats),
                             (self.mt_tokens, other.mt_tokens), (self.step_tokens, other.step_tokens),
                             (self.behaviour, other.behaviour)):
            mine.update(theirs)
        for module, paths in other.paths.items():
            self.paths[module].update(paths)
        self.rebench_run_max = max(self.rebench_run_max, other.rebench_run_max)
        self.speedup_log += other.speedup_log      # in plan order, as qa() adds the episodes: the same float
        self.speedup_max = max(self.speedup_max, other.speedup_max)
        self.tags.update(other.tags)
        return self

    def episode(self, ep: dict) -> None:
        """Judge one episode from its own flags (kept, best_ms), so data of any generator
        version can be measured; rows without the @2 fields are read by _failure()."""
        c = self.c
        module = REGISTRY[ep["module"]]
        task = make_task(module, ep["gpu"], ep["dtype"], ep["shape"])
        cap = register_cap(task.gpu)
        base = ep["baseline"]
        best_tag, best_code, best_ms = base["tag"], base["code"], base["time_ms"]
        best_params = base.get("params", module.variant(base["tag"]).defaults())
        run, fixed = 0, set()
        steps = ep["steps"]
        c["episodes"] += 1
        c["steps"] += len(steps)
        self.behaviour.update(behaviour.figures(ep))
        verdicts = [v for _, v in replay(ep)]
        for i, s in enumerate(steps):
            failure = _failure(s)
            v = verdicts[i]         # the mean of this code's runs against the best before it, as a keep is judged
            if s["status"] != "ok" or v.mean_ms > v.prev_best_ms * (1 + v.needed):
                self.unworthy.add((ep["id"], s["step"]))
            c["kind_" + s["kind"]] += 1
            c["status_" + s["status"]] += 1
            if failure:
                self.fail[failure] += 1
            if kind_mismatch(s, best_tag, best_params, best_code, module):
                c["kind_mismatch"] += 1
            run = run + 1 if s["kind"] == "rebench" else 0
            self.rebench_run_max = max(self.rebench_run_max, run)
            if s.get("bug") and (s["tag"], s["bug"]) in fixed:
                c["bug_reinjected"] += 1
            if failure in AUTHOR:
                if i + 1 < len(steps):
                    c["slips"] += 1
                    c["slips_retried"] += any(t["tag"] == s["tag"] and t["params"] == s["params"]
                                              and t.get("bug") is None and t.get("typo") is None
                                              and _failure(t) not in AUTHOR
                                              for t in steps[i + 1:])
                if s.get("bug"):
                    fixed.add((s["tag"], s["bug"]))
            if s["status"] == "ok":
                if s["time_ms"] < roofline_floor_ms(module, task, module.variant(s["tag"]).path):
                    c["roofline"] += 1
                if s["regs"] > cap:
                    c["registers"] += 1
            if s["kept"]:
                c["keeps"] += 1
                c["identical_keeps"] += s["code"] == best_code
                c["noise_keeps"] += (1 - s["best_ms"] / best_ms) < 2 * noise_cv(best_ms)
                best_tag, best_params, best_code = s["tag"], s["params"], s["code"]
            best_ms = s["best_ms"]
        self.repeats.update(repeats(slip_sites(ep)))
        c.update(written_where_it_writes(module, task, ep))
        c.update(climbs_against_the_profile(module, task, ep))
        c.update(tunes_against_the_grid(module, task, ep))
        for point, rung in choice_points(module, task, ep)[:1]:
            self.paths[point][rung] += 1
        c["converged"] += ep.get("end") == "converged"
        self.speedup_log += math.log(ep["best"]["speedup"])
        self.speedup_max = max(self.speedup_max, ep["best"]["speedup"])

    def multiturn(self, row: dict) -> None:
        """A multi-turn window, or a whole session (its assistant turns are its steps 1..n)."""
        self.mt_tokens[_bucket(row)] += 1
        self.c["mt_rows"] += 1
        step, units = 0, set()
        for m in row["messages"]:
            if m["role"] == "assistant":
                step += 1
                self.c["mt_assistant"] += 1
                self.c["mt_weighted"] += m.get("weight") in (0, 1) and "status" in m
                self.c["mt_weight1"] += m.get("weight") == 1
                if "trace" in row:
                    self.c["weight1_unworthy"] += m.get("weight") == 1 and (row["id"], step) in self.unworthy
            elif m["role"] == "user":
                self.prompt(row["module"], m["content"])
                units |= behaviour.time_units(m["content"])
                self.c["feedback_contradictions"] += contradictions(m["content"])
        self.c["mt_mixed_units"] += len(units) > 1

    def prompt(self, module: str, text: str) -> None:
        if module not in self.tags:
            self.tags[module] = tuple(v.tag for v in REGISTRY[module].variants)
        self.c["prompts"] += 1
        self.c["prompts_labelled"] += bool(behaviour.labels_in(text, self.tags[module]))

    def step_row(self, row: dict) -> None:
        prompt = row["messages"][1]["content"]
        self.step_tokens[_bucket(row)] += 1
        if row["step"] > 1:
            self.c["step_rows_after_first"] += 1
            self.c["step_rows_with_last"] += "\nLast result:\n" in prompt
        self.c["step_rows_weighted"] += row.get("weight") in (0, 1) and row["messages"][-1].get("weight") == row.get("weight")
        self.c["weight1_unworthy"] += row.get("weight") == 1 and (row["episode_id"], row["step"]) in self.unworthy
        self.prompt(row["module"], prompt)


_DECISION = re.compile(r": ([+-]\d+(?:\.\d+)?)% \(noise ±[\d.]+% per run; a keep needs -(\d+(?:\.\d+)?)%\)\n"
                       r"decision: (kept|not kept)")
_UNSHARED = re.compile(r" 0 B shared memory(?: \(mean of [^)]*\))?\nprofile[^\n]*limited by shared memory")


def contradictions(text: str) -> int:
    """Feedback whose printed figures say otherwise than it does, as a reader checks them: a decision whose change
    and keep threshold read the other way (`-2.8% (... a keep needs -2.8%)`, `not kept`: rounding), a profile that
    names shared memory as the limit of a candidate that has none (main 90dadf3: 14 decisions and 19 profiles of
    seeds 16161 / 16262).

    >>> contradictions("vs best 1 ms: -2.8% (noise ±1.0% per run; a keep needs -2.8%)\\ndecision: not kept")
    1
    >>> contradictions("time: 1 us, 8 registers, 0 B shared memory\\nprofile: 9 CTAs (3 of 48 warps per SM, limited by shared memory)")
    1
    """
    n = 0
    if "a keep needs" in text:
        for change, needed, decision in _DECISION.findall(text):
            gain, needed = -float(change), float(needed)
            n += not ((gain > needed) if decision == "kept" else (gain < needed))
    if "limited by shared memory" in text:
        n += len(_UNSHARED.findall(text))
    return n


def slip_sites(ep: dict) -> list:
    """(step, rung, kind, line text) of each slip of an episode row, the site read from the
    clean render of its candidate (slip_memory.site)."""
    impl, shape = REGISTRY[ep["module"]].impl, tuple(as_dict(ep["shape"]).items())
    out = []
    for s in ep["steps"]:
        if s.get("typo") is not None:
            clean = render_code(ep["module"], ep["gpu"], ep["dtype"], shape, s["tag"],
                                tuple(as_dict(s["params"]).items()), s["bug"])
            out.append((s["step"], s["tag"], *(site(clean, impl, s["typo"]) or ("?", ""))))
    return out


def written_where_it_writes(module, task, ep: dict) -> Counter:
    """Failures an engineer makes where they write (issue 26, eng seventh pass), read from an episode row:
    `tune_bugs` (wrong results of a tune of the best's rung) and of them `tune_bugs_off_lines`, whose bug
    (the lines of the clean render the bug changes) is on none of the lines the tune changed in the best's
    code; `limit_rewrites` (first writes of a rung that fail on shared memory or resources) and of them
    `limit_rewrites_off_carry`, departing from the config a climb carries (tasks.carry: the best's values)
    in a parameter that, put back alone, does not lower the demand that overflowed (limits.demand)."""
    f = Counter()
    shape = tuple(as_dict(ep["shape"]).items())
    base = ep["baseline"]
    best_tag, best_code = base["tag"], base["code"]
    best_params = as_dict(base.get("params", {})) or module.variant(best_tag).defaults()
    tried = {best_tag}
    for s in ep["steps"]:
        params = as_dict(s["params"])
        if s["status"] == "wrong_result" and s.get("bug") and s["tag"] == best_tag:
            clean = render_code(ep["module"], ep["gpu"], ep["dtype"], shape, s["tag"], tuple(params.items()), None)
            site = set(clean.split("\n")) - set(s["code"].split("\n"))
            f["tune_bugs"] += 1
            f["tune_bugs_off_lines"] += not site & (set(clean.split("\n")) - set(best_code.split("\n")))
        if s["tag"] not in tried and s["status"] == "compile_error" and s.get("failure") in ("smem", "resources") \
                and s.get("typo") is None:
            v = module.variant(s["tag"])
            over, carried = overflow(module, v, params, task), carry(v, best_params)
            f["limit_rewrites"] += 1
            f["limit_rewrites_off_carry"] += over is not None and any(
                demand(module, v, {**params, n: carried[n]}, task)[over[0]] >= over[1]
                for n, x in params.items() if x != carried.get(n, x))
        tried.add(s["tag"])
        if s["kept"]:
            best_tag, best_params, best_code = s["tag"], params, s["code"]
    return f


def climbs_against_the_profile(module, task, ep: dict) -> Counter:
    """Climbs read against the profile printed before them (issue 26, eng eighth pass), from an episode row:
    `climbs` (first writes of a rung above the best's that build and run), `climbs_off_bound` (of them, those
    that do not answer the bound the best's profile printed: engine.moves_toward, the rung's uncalibrated
    roofline term on that side, or its grid), and `climbs_past_answer` (of those, the ones made while a rung
    the episode wrote later, above the best then and not written yet, would have answered it at the best's
    carried values: the engineer passed over the move the profile pointed at and made it afterwards)."""
    from .engine import Candidate, moves_toward        # (the engine's own test of a rewrite against a bound)
    from .profiler import bound_of
    f = Counter()
    pos = {v.tag: i for i, v in enumerate(module.variants)}
    base = ep["baseline"]
    best = Candidate(module.variant(base["tag"]), as_dict(base.get("params", {})) or module.variant(base["tag"]).defaults())
    steps, written = ep["steps"], {base["tag"]}
    firsts = {}
    for s in steps:
        firsts.setdefault(s["tag"], s["step"])
    for s in steps:
        v = module.variant(s["tag"])
        if s["tag"] not in written and pos[s["tag"]] > pos[best.variant.tag] and simulate(module, v, as_dict(s["params"]),
                                                                                        task).ok:
            bound = bound_of(module, best.variant, best.params, task)
            f["climbs"] += 1
            if not moves_toward(module, task, best, Candidate(v, as_dict(s["params"])), bound):
                f["climbs_off_bound"] += 1
                later = [module.variant(t) for t, k in firsts.items() if k > s["step"] and pos[t] > pos[best.variant.tag]]
                f["climbs_past_answer"] += any(
                    simulate(module, u, carry(u, best.params), task).ok
                    and moves_toward(module, task, best, Candidate(u, carry(u, best.params)), bound) for u in later)
        written.add(s["tag"])
        if s["kept"]:
            best = Candidate(v, as_dict(s["params"]))
    return f


def tunes_against_the_grid(module, task, ep: dict) -> Counter:
    """Tunes read against the grid the best's profile printed (issue 26, eng ninth pass), from an episode row:
    `grid_tunes` (steps on the best's rung at other parameters that built, made while the best's profile printed
    `bound: grid`, fewer CTAs than SMs: profiler.bound_of) and of them `grid_tunes_fewer_ctas`, which launch fewer
    CTAs than the best (a bigger tile, fewer splits): a move against what the profiler says (engine.Episode.starves).
    A build that failed (a tile over a limit) launched nothing and is not counted."""
    from .profiler import bound_of
    f = Counter()
    base = ep["baseline"]
    best_tag = base["tag"]
    best_params = as_dict(base.get("params", {})) or module.variant(best_tag).defaults()
    for s in ep["steps"]:
        params = as_dict(s["params"])
        if s["tag"] == best_tag and params != best_params and s["status"] != "compile_error":
            v = module.variant(best_tag)
            if bound_of(module, v, best_params, task) == "occupancy":
                f["grid_tunes"] += 1
                f["grid_tunes_fewer_ctas"] += launch(module, v, params, task).grid < launch(module, v, best_params, task).grid
        if s["kept"]:
            best_tag, best_params = s["tag"], params
    return f


def answers_bound(module, task, best_tag: str, best_params: dict, v) -> bool:
    """A climb onto `v` at the best's carried values answers the bound the best's profile printed
    (engine.moves_toward: the engineer's own test, Episode.answers)."""
    from .engine import Candidate, moves_toward
    from .profiler import bound_of
    here = Candidate(module.variant(best_tag), best_params or module.variant(best_tag).defaults())
    return moves_toward(module, task, here, Candidate(v, carry(v, here.params)),
                        bound_of(module, here.variant, here.params, task))


def choice_points(module, task, ep: dict) -> list[tuple[str, str]]:
    """(situation, rung climbed to) of each climb of an episode row made while two or more rungs
    were open: the first write of a rung above the best's, and open the untried rungs above the
    best, offered for the dtype and runnable on the GPU, whose simulated time at the parameters a
    climb carries over (tasks.carry) beats the best's recorded time beyond two sigma of the noise; of
    them, where the best launches at most a quarter as many CTAs as SMs, those that launch at least
    twice its CTAs (the profile's verdict answered), if any; and of those, the ones that answer the bound the
    best's profile printed (answers_bound, as Episode.climbable picks), if any: where the printed evidence
    singles out one rung, climbing to it is the engineer's reason, and no choice is left for variety to judge.
    The situation names the module, the rung climbed from and the open rungs."""
    pos = {v.tag: i for i, v in enumerate(module.variants)}
    rungs = [v for v in module.variants if v.offered(task.dtype) and not (v.needs - task.gpu.features)]
    best_tag, best_params, best_ms = ep["baseline"]["tag"], as_dict(ep["baseline"].get("params", {})), ep["baseline"]["time_ms"]
    tried, out = {best_tag}, []
    for s in ep["steps"]:
        if s["tag"] not in tried and pos[s["tag"]] > pos[best_tag]:
            limit = best_ms / (1 + 2 * noise_cv(best_ms))
            open_ = [v for v in rungs if pos[v.tag] > pos[best_tag] and v.tag not in tried
                     and _beats(module, v, carry(v, best_params), task, limit)]
            # a profile showing most SMs idle (at most a quarter as many CTAs as SMs) leaves open only the
            # rungs that launch at least twice the CTAs, where there are any (Episode.propose_structural)
            ctas = launch(module, module.variant(best_tag), best_params, task).grid
            if 4 * ctas <= task.gpu.sms:
                open_ = [v for v in open_ if launch(module, v, carry(v, best_params), task).grid >= 2 * ctas] or open_
            # of them, those answering the bound the best's profile printed (Episode.climbable), where there are any:
            # a rung the printed evidence singles out is the engineer's reason, not a choice
            open_ = [v for v in open_ if answers_bound(module, task, best_tag, best_params, v)] or open_
            open_ = [v.tag for v in open_]
            if len(open_) >= 2:
                out.append((f"{module.name}: from {best_tag}, open {' '.join(open_)}", s["tag"]))
        tried.add(s["tag"])
        if s["kept"]:
            best_tag, best_params = s["tag"], as_dict(s["params"])
        best_ms = s["best_ms"]
    return out


def _beats(module, variant, params: dict, task, limit_ms: float) -> bool:
    r = simulate(module, variant, params, task)
    return r.ok and r.time_ms < limit_ms


def _bucket(row: dict) -> int:
    return sum(tokens(m["content"]) for m in row["messages"]) // 16 * 16 + 16


def _pct(hist: Counter, q: float) -> int:
    """The q-quantile of a histogram (upper edge of its 16-token bucket)."""
    n, seen = sum(hist.values()), 0
    for value in sorted(hist):
        seen += hist[value]
        if seen >= q * n:
            return value
    return 0


def qa_sessions(data: Path) -> dict:
    """The qa object of a sessions dataset over all its sessions (each batch has its own in
    qa_reports/): the layouts' `qa` (layouts.SESSIONS)."""
    acc = _Acc()
    for _, row in read_whole(data / SESSIONS_FILE):
        acc.episode(episode_row(row))
        acc.multiturn(row)
    return session_report(acc)


def qa_episodes(data: Path) -> dict:
    """The qa object of an episodes dataset (also written as qa.json by generate): the
    layouts' `qa` (layouts.EPISODES)."""
    acc = _Acc()
    parts = [(row for _, row in read_jsonl(path)) for path in record_paths(data / FILES["episodes"])]
    for ep in in_plan_order(*parts):
        acc.episode(ep)        # in plan order: generate sums each episode's figures (episode_qa) in that order
    for _, row in read_whole(data / FILES["sft_multiturn"]):
        acc.multiturn(row)
    for _, row in read_whole(data / FILES["sft_steps"]):
        acc.step_row(row)
    return report(acc)


def episode_qa(written: dict) -> _Acc:
    """One episode's QA figures from its rows as written ({file key: rows}, the validation
    files' keys included): what generate's workers judge (layouts.EPISODES.judge), so the parent
    merges them (_Acc.merge) in plan order and writes qa.json (report) without reading the files again."""
    acc = _Acc()
    both = {k: written.get(k, []) + written.get(k + VALIDATION, []) for k in ("episodes", "sft_multiturn", "sft_steps")}
    acc.episode(both["episodes"][0])
    for row in both["sft_multiturn"]:
        acc.multiturn(row)
    for row in both["sft_steps"]:
        acc.step_row(row)
    acc.unworthy = set()       # judged: nothing left to carry back
    return acc


def sampling_tolerance(share: float, n: int) -> float:
    """Two standard errors of a share measured on n draws: a sample whose true share is at the
    threshold lands above it by less than this 97.7 % of the time.

    >>> round(sampling_tolerance(0.6, 207), 3), round(sampling_tolerance(0.6, 9600), 3)
    (0.068, 0.01)
    """
    return 2 * math.sqrt(share * (1 - share) / n) if n else 0.0


def report(acc: _Acc, min_paths: int = MIN_EPISODES_FOR_PATHS, tail_max: float = TAIL_MAX) -> dict:
    c, fail, rep, b = acc.c, acc.fail, acc.repeats, acc.behaviour
    steps = max(1, c["steps"])
    compile_errors = sum(fail[f] for f in COMPILE_FAILURES)
    shares = {m: max(p.values()) / sum(p.values()) for m, p in acc.paths.items()
              if sum(p.values()) >= min_paths}
    runs = {m: sum(acc.paths[m].values()) for m in shares}
    # the choice point furthest over the threshold, given the sampling noise of its count
    worst = max(shares, key=lambda m: shares[m] - sampling_tolerance(CHOICE_SHARE_MAX, runs[m])) if shares else None
    mt, st = acc.mt_tokens, acc.step_tokens

    def check(name, value, op, threshold, note="", tolerance=0.0):
        ok = {"==": value == threshold, "<=": value <= threshold + tolerance, ">=": value >= threshold - tolerance}[op]
        return {"name": name, "value": value, "threshold": f"{op} {threshold}", "pass": ok, "note": note}

    def tail_check():
        """post_best_tail_share, judged as its sample allows (MIN_EPISODES_FOR_TAIL, behaviour.tail_error);
        figures that do not count their episodes are judged as they stand."""
        value, note = behaviour.tail_share(b), f"{b['tail']}/{b['steps']} steps come after their episode's final best"
        if 0 < b["episodes"] < MIN_EPISODES_FOR_TAIL:
            return {**check("post_best_tail_share", value, "<=", tail_max), "pass": True,
                    "note": f"{note}; too few episodes to judge ({b['episodes']} < {MIN_EPISODES_FOR_TAIL})"}
        if not b["episodes"]:
            return check("post_best_tail_share", value, "<=", tail_max, note)
        error = 2 * behaviour.tail_error(b)
        return check("post_best_tail_share", value, "<=", tail_max,
                     f"{note}; passes within {error:.3f} of it (2 standard errors of {b['episodes']} episodes)", error)

    checks = [
        check("identical_code_keeps", c["identical_keeps"], "==", 0, "kept steps whose code is the best's"),
        check("noise_keeps", c["noise_keeps"], "==", 0, "keeps gaining < 2 sigma of the noise"),
        check("longest_rebench_run", acc.rebench_run_max, "<=", 2),
        check("max_choice_share", round(shares[worst], 3) if worst else 0.0, "<=", CHOICE_SHARE_MAX,
              f"most common climb at a choice point ({worst}): {max(acc.paths[worst].values())}/{runs[worst]} "
              f"episodes, passes within {sampling_tolerance(CHOICE_SHARE_MAX, runs[worst]):.3f} of it (2 standard "
              f"errors)" if worst else f"no choice point (two or more rungs that could beat the best) reached "
              f"{min_paths} times", sampling_tolerance(CHOICE_SHARE_MAX, runs[worst]) if worst else 0.0),
        check("slips_retried", round(c["slips_retried"] / max(1, c["slips"]), 4), ">=", 0.9,
              f"{c['slips_retried']}/{c['slips']} typo/bug failures (not the last step) retried"),
        check("bug_reinjected_after_fix", c["bug_reinjected"], "==", 0),
        check("slip_repeats", rep["repeats"], "==", 0,
              f"{rep['repeats']}/{rep['slips']} slips repeat a (kind, line) slip the session made before; "
              f"{rep['back_to_back']} on the next step; {rep['sessions_3x']} sessions make one 3+ times"),
        check("kind_mismatches", c["kind_mismatch"], "==", 0),
        check("roofline_violations", c["roofline"], "==", 0, "ok steps faster than DRAM/compute roofline"),
        check("register_violations", c["registers"], "==", 0, "ok steps over 255 (NVIDIA) / 512 (AMD) registers"),
        check("compile_errors_typo_share", round(fail["syntax"] / max(1, compile_errors), 4), "<=", 0.6,
              f"passes within {sampling_tolerance(0.6, compile_errors):.3f} of it: 2 standard errors of a share "
              f"of {compile_errors:,} compile errors", sampling_tolerance(0.6, compile_errors)),
        check("step_prompts_with_last_result", round(c["step_rows_with_last"] / max(1, c["step_rows_after_first"]), 4),
              "==", 1.0),
        check("assistant_messages_weighted", round(c["mt_weighted"] / max(1, c["mt_assistant"]), 4), "==", 1.0),
        check("step_rows_weighted", round(c["step_rows_weighted"] / max(1, sum(st.values())), 4), "==", 1.0),
        check("multiturn_tokens_p99", _pct(mt, 0.99), "<=", 32768, "messages.tokens (README: Context windows)"),
        # behaviour (behaviour.py): what an engineer with a plan does and does not do
        tail_check(),
        check("slow_rung_returns", b["slow_rung_returns"], "==", 0,
              f"steps onto a rung already measured at >= {behaviour.SLOW_RUNG}x the best (repairs and a rung's second look, "
              "the step right after its one measurement, not counted)"),
        check("reproposed_configs", b["reproposed"], "==", 0,
              "steps whose (rung, params) was measured before, other than a re-measure of the best or of a close call"),
        check("one_sided_remeasures", b["one_sided_remeasures"], "==", 0,
              "re-measures of a close call's candidate while the best had no more runs than it (a close call is "
              "settled by re-measuring both)"),
        check("close_call_reruns", b["close_call_reruns"], "==", 0,
              f"re-measures of a candidate that had two runs already, of {b['remeasures']} re-measures (a close call "
              "is re-measured once on each side at most, then decided)"),
        check("bugs_remade", b["bugs_remade"], "==", 0, "a bug made again in the episode, on any rung"),
        check("tune_bugs_off_their_lines", c["tune_bugs_off_lines"], "==", 0,
              f"of {c['tune_bugs']} wrong results of a tune of the best's rung, those whose bug is on none of the lines "
              "the tune changed (a one-value change rewrites its own lines; a bug elsewhere is a rewrite's)"),
        check("limit_rewrites_off_carry", c["limit_rewrites_off_carry"], "==", 0,
              f"of {c['limit_rewrites']} first writes of a rung that overflow shared memory or resources, those departing "
              "from the best's carried values in a parameter that does not raise what overflowed"),
        check("climbs_past_the_profile", c["climbs_past_answer"], "==", 0,
              f"of {c['climbs']} climbs (first writes of a rung above the best that run), {c['climbs_off_bound']} do not "
              "answer the bound the best's profile printed (more CTAs, less memory or compute time: the rung's roofline "
              "terms); those made while a rung the episode wrote later would have answered it"),
        check("tunes_starving_the_grid", c["grid_tunes_fewer_ctas"], "==", 0,
              f"of {c['grid_tunes']} tunes of a best whose profile printed a grid short of the SMs (bound: grid), those "
              "launching fewer CTAs than the best (a bigger tile, fewer splits)"),
        check("first_tweak_failures", b["first_tweaks_failed"], "<=",
              max(FIRST_TWEAK_FAILS_MIN, int(FIRST_TWEAK_FAIL_MAX * b["first_tweaks"])),
              f"{b['first_tweaks_failed']}/{b['first_tweaks']} first steps that retune the baseline's rung fail "
              f"(an artifact of failure injection when near all; allowed: {FIRST_TWEAK_FAIL_MAX:.0%} or "
              f"{FIRST_TWEAK_FAILS_MIN})"),
        check("converged_far_from_best", round(b["converged_far"] / max(1, b["converged"]), 4), "<=", CONVERGED_FAR_MAX,
              f"{b['converged_far']}/{b['converged']} converged endings whose last {behaviour.LAST_STEPS} measured steps "
              f"are all > {behaviour.FAR_END}x the best (a last climb and tunes that lost); passes within "
              f"{sampling_tolerance(CONVERGED_FAR_MAX, b['converged']):.3f} of it (2 standard errors)",
              sampling_tolerance(CONVERGED_FAR_MAX, b["converged"])),
        check("converged_on_failure", b["converged_on_failure"], "==", 0,
              f"of {b['converged']} converged endings, those whose last step failed to build or check (a limit "
              "failure is backed off until it fits; after any other the best is restored and re-run)"),
        check("baselines_far_from_eager", b["baseline_far_from_eager"], "==", 0,
              f"baselines over {behaviour.EAGER_FAR:g}x the PyTorch eager reference's time (search.eager_cap), beyond "
              f"the timing noise of their one measurement ({behaviour.EAGER_NOISE:g}x)"),
        check("weight1_slower_than_best", c["weight1_unworthy"], "==", 0,
              "weight-1 targets that failed or whose mean ran slower than the best before them beyond the keep margin"),
        check("conversations_mixing_time_units", c["mt_mixed_units"], "==", 0,
              "conversations whose prompts print times in more than one unit (us and ms)"),
        check("feedback_contradictions", c["feedback_contradictions"], "==", 0,
              "user turns whose printed figures read against the text beside them (a decision against its change and "
              "keep threshold, a shared-memory limit of a candidate with none)"),
        check("prompts_with_generator_labels", c["prompts_labelled"], "==", 0,
              f"of {c['prompts']} user messages: step kinds or rung tags outside code blocks"),
    ]
    info = {
        "episodes": c["episodes"], "steps": c["steps"], "mean_steps": round(c["steps"] / max(1, c["episodes"]), 2),
        "converged_share": round(c["converged"] / max(1, c["episodes"]), 3),
        "status_pct": {k: round(100 * c["status_" + k] / steps, 2) for k in ("ok", "wrong_result", "compile_error")},
        "kind_pct": {k: round(100 * c["kind_" + k] / steps, 2)
                     for k in ("structural", "param_sweep", "joint", "rebench", "endgame")},
        # the slip classes past the first six are listed only where they occur (the default's bytes)
        "failures": {f: fail[f] for f in FAILURES if f in FAILURES[:6] or fail[f]},
        "keeps": c["keeps"],
        "slip_repeats": {k: rep[k] for k in ("slips", "repeats", "rung_repeats", "back_to_back", "sessions_3x")},
        "speedup_geomean": round(math.exp(acc.speedup_log / max(1, c["episodes"])), 3),
        "speedup_max": round(acc.speedup_max, 3),
        "weight1_share": round(c["mt_weight1"] / max(1, c["mt_assistant"]), 3),
        "multiturn_rows": c["mt_rows"],
        "multiturn_tokens": {q: _pct(mt, p) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        "step_row_tokens": {q: _pct(st, p) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
        # measured, not judged (session 14): each also counts moves an engineer's evidence licenses -- a rung below the
        # best within a knob step of it (engine.out_of_reach), a move re-asked after a coupled partner moved
        "behaviour": {k: b[k] for k in ("tail", "slow_rung_returns", "lower_rung_walks", "lost_ways_reasked", "reproposed", "one_sided_remeasures", "remeasures",
                                        "close_call_reruns", "bugs_remade", "first_tweaks", "first_tweaks_failed", "converged",
                                        "converged_far", "converged_on_failure", "baseline_far_from_eager")},
        "choice_share_top5": dict(sorted(((m, round(v, 3)) for m, v in shares.items()),
                                         key=lambda x: -x[1])[:5]),
    }
    return {"schema": SCHEMA["qa"], "pass": all(ch["pass"] for ch in checks), "checks": checks, "info": info}


# what does not apply to whole sessions: they have no step rows and no context-window limit
SESSION_SKIP = ("step_prompts_with_last_result", "step_rows_weighted", "multiturn_tokens_p99")


def session_report(acc: _Acc) -> dict:
    """report() of sessions (their messages counted as multi-turn rows), without SESSION_SKIP;
    path variety judged on modules with MIN_SESSIONS_FOR_PATHS sessions."""
    r = report(acc, MIN_SESSIONS_FOR_PATHS, SESSION_TAIL_MAX)
    checks = [ch for ch in r["checks"] if ch["name"] not in SESSION_SKIP]
    info = {k: v for k, v in r["info"].items() if k not in ("step_row_tokens", "multiturn_rows", "multiturn_tokens")}
    info["session_tokens"] = r["info"]["multiturn_tokens"]
    return {"schema": r["schema"], "pass": all(ch["pass"] for ch in checks), "checks": checks, "info": info}


def summary(result: dict) -> str:
    lines = [f"{'check':34} {'value':>10}  {'threshold':>10}  result"]
    for ch in result["checks"]:
        lines.append(f"{ch['name']:34} {ch['value']!s:>10}  {ch['threshold']:>10}  "
                     f"{'pass' if ch['pass'] else 'FAIL'}  {ch['note']}")
    lines.append(json.dumps(result["info"], indent=1))
    lines.append("qa: all checks pass" if result["pass"] else "qa: some checks FAIL")
    return "\n".join(lines)


def dumps_qa(result: dict) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
