"""behaviour.figures and qa's behaviour checks: each counts what it names, on rows made to show it."""
import json

from kernelstrain import behaviour
from kernelstrain.cli import main
from kernelstrain.fields import as_dict


def _step(k, tag, t, best, params=None, status="ok", kept=False, kind="param_sweep", bug=None):
    return {"step": k, "tag": tag, "params": params or {"t": 1}, "kind": kind, "status": status,
            "time_ms": t if status == "ok" else None, "best_ms": best, "kept": kept, "bug": bug}


def _row(steps, end="converged"):
    best = max((s["step"] for s in steps if s["kept"]), default=0)
    return {"end": end, "best": {"step": best}, "steps": steps,
            "baseline": {"tag": "naive", "params": {"t": 1}, "time_ms": 10.0}}


def test_a_clean_climb_and_tune_counts_nothing():
    f = behaviour.figures(_row([_step(1, "fast", 2.0, 2.0, kept=True, kind="structural"),
                                _step(2, "fast", 1.5, 1.5, {"t": 2}, kept=True),
                                _step(3, "fast", 1.6, 1.5, {"t": 4})]))
    assert (f["tail"], f["slow_rung_returns"], f["reproposed"], f["bugs_remade"], f["converged_far"]) == (1, 0, 0, 0, 0)


def test_each_figure_counts_its_behaviour():
    steps = [_step(1, "fast", 1.0, 1.0, kept=True, kind="structural"),
             _step(2, "naive", 9.0, 1.0, {"t": 2}, kind="structural"),            # back to a rung at 10x
             _step(3, "fast", 1.2, 1.0, {"t": 2}, status="wrong_result", bug="off_by_one"),
             _step(4, "fast", 1.2, 1.0, {"t": 2}),                                  # its repair: no figure
             _step(5, "fast", 1.3, 1.0, {"t": 4}, status="wrong_result", bug="off_by_one"),   # the bug again
             _step(6, "fast", 1.2, 1.0, {"t": 4}),
             _step(7, "fast", 1.2, 1.0, {"t": 2}),                                  # measured at step 4
             _step(8, "fast", 1.0, 1.0, kind="rebench")]                           # a re-measure of the best: fine
    f = behaviour.figures(_row(steps))
    assert (f["slow_rung_returns"], f["bugs_remade"], f["reproposed"], f["tail"]) == (1, 1, 1, 7)
    # a rung's second look (the step right after its one measurement, e.g. re-written where its first config spilled)
    # is not a return; a third step on it, or coming back to it after leaving it, is
    look = [_step(1, "fast", 1.0, 1.0, kept=True), _step(2, "wide", 3.0, 1.0, {"t": 2}),
            _step(3, "wide", 1.1, 1.0, {"t": 4})]
    assert behaviour.figures(_row(look))["slow_rung_returns"] == 0
    assert behaviour.figures(_row(look + [_step(4, "wide", 1.2, 1.0, {"t": 8})]))["slow_rung_returns"] == 0
    left = [_step(1, "fast", 1.0, 1.0, kept=True), _step(2, "wide", 3.0, 1.0, {"t": 2}),
            _step(3, "fast", 1.0, 1.0, {"t": 4}), _step(4, "wide", 2.9, 1.0, {"t": 4})]
    assert behaviour.figures(_row(left))["slow_rung_returns"] == 1
    again = [_step(1, "fast", 1.0, 1.0, kept=True), _step(2, "wide", 3.0, 1.0, {"t": 2}),
             _step(3, "wide", 3.1, 1.0, {"t": 4}), _step(4, "wide", 2.9, 1.0, {"t": 8})]
    assert behaviour.figures(_row(again))["slow_rung_returns"] == 1
    far = behaviour.figures(_row([_step(1, "fast", 1.0, 1.0, kept=True), _step(2, "naive", 9.0, 1.0, {"t": 2}),
                                  _step(3, "naive", 8.0, 1.0, {"t": 3}), _step(4, "naive", 7.0, 1.0, {"t": 4})]))
    assert far["converged_far"] == 1
    first = behaviour.figures(_row([_step(1, "naive", None, 10.0, {"t": 2}, status="compile_error")], end="budget"))
    assert (first["first_tweaks"], first["first_tweaks_failed"], first["converged"]) == (1, 1, 0)
    eager = 10.0 / behaviour.EAGER_FAR       # the baseline at the cap, 1% past it (its measurement's noise), 20% past it, unknown
    counts = [behaviour.figures(_row(steps) | {"torch_eager_ms": e})["baseline_far_from_eager"]
              for e in (eager, eager / 1.01, eager / 1.2, None)]
    assert counts == [0, 0, 1, 0]


def test_labels_are_found_in_prose_not_in_code():
    tags = ("row_per_thread", "warp_shuffle")
    assert behaviour.labels_in("Step 6 (structural): 1.2 ms", tags) == ["structural"]
    assert behaviour.labels_in("tried warp_shuffle at 256 threads", tags) == ["warp_shuffle"]
    assert behaviour.labels_in("```cuda\n// warp_shuffle reduction\n```\n1.2 ms", tags) == []


def test_qa_fails_a_return_to_a_slow_rung(dataset_copy, capsys):
    path = dataset_copy / "episodes.jsonl"
    lines = path.read_text().splitlines()
    i, ep = next((i, e) for i, e in enumerate(map(json.loads, lines))
                 if any(s["kept"] and s["tag"] != e["baseline"]["tag"] for s in e["steps"])
                 and e["baseline"]["time_ms"] > 2 * e["best"]["time_ms"])
    last = ep["steps"][-1]
    back = dict(last, step=last["step"] + 1, tag=ep["baseline"]["tag"], params=ep["baseline"]["params"],
                kind="structural", status="ok", time_ms=ep["baseline"]["time_ms"], kept=False, failure=None,
                error=None, bug=None, typo=None, code=ep["baseline"]["code"])
    ep["steps"].append(back)
    lines[i] = json.dumps(ep)
    path.write_text("\n".join(lines) + "\n")
    assert main(["qa", str(dataset_copy)]) == 1
    out = capsys.readouterr().out
    assert any(l.startswith("slow_rung_returns") and "FAIL" in l for l in out.splitlines())
    assert any(l.startswith("reproposed_configs") and "FAIL" in l for l in out.splitlines())


def test_labels_in_reads_prose_not_the_tools_quotes_of_the_code():
    """A compiler quoting the candidate's source (a comment naming a technique) is the tool's
    text, not a generator label; a rung tag or step kind in the prose is."""
    from kernelstrain.behaviour import labels_in
    triton = ("Step 1: compile error.\ntriton.compiler.errors.CompilationError: at 3:10:\n"
              "def k(x_ptr):\n    # persistent: the grid fills the SMs once\n    y = bh + 1\n          ^\n"
              "NameError('bh is not defined')\ndecision: not kept")
    nvcc = 'candidate.cu(7): error: identifier "x" is undefined\n      // persistent loop\n      ^\n'
    assert labels_in(triton, ("persistent",)) == [] and labels_in(nvcc, ("persistent",)) == []
    assert labels_in(triton + "\nnext: the persistent rung", ("persistent",)) == ["persistent"]
    assert labels_in("Step 6 (param_sweep): correct", ()) == ["param_sweep"]


def test_a_close_call_re_measured_on_one_side_is_counted():
    """A candidate measured faster than the best inside the noise may be re-measured (a close
    call, not a re-proposal), but only while the best has more runs than it: settling a close
    call means re-measuring both."""
    close = [_step(1, "fast", 1.0, 1.0, kept=True, kind="structural"),
             _step(2, "fast", 0.99, 1.0, {"t": 2})]                               # faster, not kept
    one_sided = behaviour.figures(_row(close + [_step(3, "fast", 0.98, 1.0, {"t": 2})]))
    both = behaviour.figures(_row(close + [_step(3, "fast", 1.01, 1.005, kind="rebench"),
                                           _step(4, "fast", 0.98, 1.005, {"t": 2})]))
    assert (one_sided["one_sided_remeasures"], one_sided["reproposed"]) == (1, 0)
    assert (both["one_sided_remeasures"], both["reproposed"]) == (0, 0)
    slower = behaviour.figures(_row([_step(1, "fast", 1.0, 1.0, kept=True, kind="structural"),
                                     _step(2, "fast", 1.2, 1.0, {"t": 2}), _step(3, "fast", 1.1, 1.0, {"t": 2})]))
    assert slower["reproposed"] == 1                  # slower than the best: no close call to settle


def test_qa_fails_a_conversation_that_mixes_time_units(dataset_copy, capsys):
    """One time unit per conversation (issue 26 item 3): a prompt printing a time in the other
    unit fails `conversations_mixing_time_units`; the same time inside a code block does not."""
    path = dataset_copy / "sft_multiturn.jsonl"
    rows = [json.loads(l) for l in path.read_text().splitlines()]
    assert main(["qa", str(dataset_copy)]) in (0, 1)
    before = capsys.readouterr().out
    assert any(l.startswith("conversations_mixing_time_units") and "pass" in l for l in before.splitlines())
    user = next(m for m in rows[0]["messages"] if m["role"] == "user")
    other = "ms" if behaviour.time_units(user["content"]) == {"us"} else "us"
    user["content"] += f"\n```\n// 1.5 {other}\n```"              # in code: not the harness's words
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(["qa", str(dataset_copy)])
    assert any(l.startswith("conversations_mixing_time_units") and "pass" in l for l in capsys.readouterr().out.splitlines())
    user["content"] += f"\nlaunch overhead: 1.5 {other}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["qa", str(dataset_copy)]) == 1
    assert any(l.startswith("conversations_mixing_time_units") and "FAIL" in l for l in capsys.readouterr().out.splitlines())


def test_a_candidates_third_run_and_a_converged_ending_on_a_failure_are_counted():
    """A close call is re-measured once on each side, then decided: a candidate's third run is a
    `close_call_reruns`; a `converged` episode whose last step failed (an arch failure or a limit
    hit left as the last word) is a `converged_on_failure`, and qa fails either."""
    from kernelstrain.qa import _Acc, report
    once = [_step(1, "fast", 1.0, 1.0, kept=True, kind="structural"),
            _step(2, "fast", 0.99, 1.0, {"t": 2}),
            _step(3, "fast", 1.0, 1.0, kind="rebench"),
            _step(4, "fast", 0.985, 1.0, {"t": 2})]
    f = behaviour.figures(_row(once))
    assert (f["remeasures"], f["close_call_reruns"], f["converged_on_failure"]) == (2, 0, 0)
    again = behaviour.figures(_row(once + [_step(5, "fast", 1.0, 1.0, kind="rebench"),
                                           _step(6, "fast", 0.99, 1.0, {"t": 2})]))
    assert (again["remeasures"], again["close_call_reruns"]) == (4, 1)
    failed = once + [_step(5, "tma", None, 1.0, {"t": 1}, status="compile_error", kind="structural")]
    assert behaviour.figures(_row(failed))["converged_on_failure"] == 1
    assert behaviour.figures(_row(failed, end="budget"))["converged_on_failure"] == 0
    for counts, name in (({"close_call_reruns": 1}, "close_call_reruns"),
                         ({"converged": 10, "converged_on_failure": 1}, "converged_on_failure")):
        acc = _Acc()
        assert next(c for c in report(acc)["checks"] if c["name"] == name)["pass"]
        acc.behaviour.update(counts)
        assert not next(c for c in report(acc)["checks"] if c["name"] == name)["pass"]


def test_every_behaviour_check_of_issue_26_can_fail():
    """Each of issue 26's item-6 checks (and the two close-call / ending checks beside them) has a
    threshold that the defect it names trips: it passes on nothing and fails on the counts given."""
    from kernelstrain.qa import _Acc, report, session_report
    defects = {
        "post_best_tail_share": ({"tail": 60, "steps": 100}, {}),
        "slow_rung_returns": ({"slow_rung_returns": 1}, {}),
        "reproposed_configs": ({"reproposed": 1}, {}),
        "one_sided_remeasures": ({"one_sided_remeasures": 1}, {}),
        "close_call_reruns": ({"close_call_reruns": 1}, {}),
        "bugs_remade": ({"bugs_remade": 1}, {}),
        "first_tweak_failures": ({"first_tweaks": 10, "first_tweaks_failed": 6}, {}),
        "converged_far_from_best": ({"converged": 1000, "converged_far": 40}, {}),
        "converged_on_failure": ({"converged": 10, "converged_on_failure": 1}, {}),
        "baselines_far_from_eager": ({"baseline_far_from_eager": 1}, {}),
        "weight1_slower_than_best": ({}, {"weight1_unworthy": 1}),
        "prompts_with_generator_labels": ({}, {"prompts_labelled": 1}),
        "conversations_mixing_time_units": ({}, {"mt_mixed_units": 1}),
        "tune_bugs_off_their_lines": ({}, {"tune_bugs": 1, "tune_bugs_off_lines": 1}),
        "limit_rewrites_off_carry": ({}, {"limit_rewrites": 1, "limit_rewrites_off_carry": 1}),
        "climbs_past_the_profile": ({}, {"climbs": 1, "climbs_off_bound": 1, "climbs_past_answer": 1}),
        "tunes_starving_the_grid": ({}, {"grid_tunes": 1, "grid_tunes_fewer_ctas": 1}),
    }

    for judge in (report, session_report):          # the default profile's qa, and kernelinfer's (sessions, batches)
        def check(acc, name):
            return next(c for c in judge(acc)["checks"] if c["name"] == name)

        for name, (b, c) in defects.items():
            acc = _Acc()
            assert check(acc, name)["pass"], name
            acc.behaviour.update(b)
            acc.c.update(c)
            assert not check(acc, name)["pass"], name


def test_the_tail_share_is_judged_as_its_sample_allows():
    """qa's post_best_tail_share on a small run: under MIN_EPISODES_FOR_TAIL episodes it says so and does
    not fail (seed 0's first 30 default episodes on 13da929 read 0.479 where the full run reads 0.303); from
    there it passes within two standard errors of its episodes (behaviour.tail_error), and a tail past that
    fails. Figures that do not count their episodes are judged as they stand."""
    from kernelstrain.qa import MIN_EPISODES_FOR_TAIL, TAIL_MAX, _Acc, report

    def tail(episodes):                 # [(tail, steps)] of each episode
        acc = _Acc()
        for t, n in episodes:
            acc.behaviour.update({"episodes": 1, "tail": t, "steps": n, "tail_sq": t * t, "steps_sq": n * n,
                                  "tail_steps": t * n})
        return next(c for c in report(acc)["checks"] if c["name"] == "post_best_tail_share")

    few = tail([(6, 12)] * 10 + [(2, 12)] * 19)             # 29 episodes at 0.38
    assert few["pass"] and "too few episodes to judge" in few["note"], few
    spread = [(8, 12), (0, 12)] * (MIN_EPISODES_FOR_TAIL // 2 + 5)   # 60 episodes at 0.33, 2 s.e. 0.08
    noisy = spread[:-10] + [(8, 12)] * 5 + [(5, 12)] * 5             # 0.368: over the threshold, within the error
    assert tail(noisy)["value"] > TAIL_MAX and tail(noisy)["pass"], tail(noisy)
    assert not tail([(6, 12)] * MIN_EPISODES_FOR_TAIL)["pass"]       # 0.5 on every one of 50 episodes
    acc = _Acc()
    acc.behaviour.update({"tail": 40, "steps": 100})
    assert not next(c for c in report(acc)["checks"] if c["name"] == "post_best_tail_share")["pass"]


# --- kernelinfer's batch reports (qa_reports/batch_NNN.json): every behaviour check, fed its defect ---

def _ki_sessions(tmp_path_factory):
    import json as _json
    out = tmp_path_factory.mktemp("ki") / "k"
    # a clean batch must pass every check: six sessions of seed 5 (tail 0.32, near the profile's 0.35); seed 3's four had
    # a tail of 0.6 once the profile's climbing habits changed (a few sessions' tail is noise, not a defect)
    assert main(["generate", "--seed", "5", "--config", "kernelinfer", "--episodes", "6", "--workers", "1",
                 "--out", str(out), "--quiet"]) in (0, 1)
    rows = [_json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    return rows, _json.loads((out / "stats.json").read_text())


def _after(ep, **fields):
    """A step appended after the episode's last, measured (or failed) as `fields` say."""
    last = ep["steps"][-1]
    s = dict(last, step=last["step"] + 1, kept=False, bug=None, typo=None, failure=None, error=None,
             status="ok", best_ms=last["best_ms"])
    s.update(fields)
    if s["status"] != "ok":
        s["time_ms"] = None
    ep["steps"].append(s)
    return s


def _far(ep, row):          # three last steps all 2x the best: a `converged` ending far from it
    for _ in range(3):
        _after(ep, time_ms=2 * ep["best"]["time_ms"], params={**as_dict(ep["steps"][-1]["params"]), "_far": len(ep["steps"])})


def _tail(ep, row):         # as many fruitless steps after the final best as the session had before it
    for i in range(len(ep["steps"]) + 2):
        _after(ep, time_ms=1.3 * ep["best"]["time_ms"], params={**as_dict(ep["steps"][-1]["params"]), "_t": i})


def _slow_rung(ep, row):    # back to the baseline's rung and code (measured >= 2x the best): also a re-proposal
    _after(ep, tag=ep["baseline"]["tag"], params=ep["baseline"]["params"], code=ep["baseline"]["code"],
           time_ms=ep["baseline"]["time_ms"], kind="structural")


def _close(ep, runs):       # a close call's candidate measured `runs` times, the best never re-run
    best = ep["steps"][-1]["best_ms"]
    at = next((s for s in ep["steps"] if s["step"] == ep["best"]["step"]), ep["baseline"])
    for _ in range(runs):
        _after(ep, tag=at["tag"], params={**as_dict(at["params"]), "_close": 1}, time_ms=best * 0.999)


def _bug(ep, row):
    _after(ep, status="wrong_result", bug="no_bounds_check", failure="mismatch")
    _after(ep, status="wrong_result", bug="no_bounds_check", failure="mismatch", params={**as_dict(ep["steps"][-1]["params"]), "_b": 1})


def _first(ep, row):        # the first step retunes the baseline's rung, and fails
    ep["steps"][0] = dict(ep["steps"][0], tag=ep["baseline"]["tag"], kind="param_sweep", status="compile_error",
                          time_ms=None, kept=False, failure="syntax", params={**as_dict(ep["baseline"]["params"]), "_f": 1})


def _last_fails(ep, row):
    _after(ep, status="compile_error", failure="syntax")


def _eager(ep, row):
    ep["torch_eager_ms"] = ep["baseline"]["time_ms"] / 1000


def _weight1(ep, row):      # weight 1 on a step that failed (a target that teaches a failure)
    i = next(i for i, s in enumerate(ep["steps"]) if s["status"] != "ok" or not s["kept"])
    turns = [m for m in row["messages"] if m["role"] == "assistant"]
    turns[i]["weight"] = 1
    ep["steps"][i] = dict(ep["steps"][i], status="compile_error", time_ms=None, kept=False, failure="syntax")


def _label(ep, row):
    user = [m for m in row["messages"] if m["role"] == "user"][-1]
    user["content"] += f"\nnext: try {ep['baseline']['tag']}"


def _units(ep, row):
    user = [m for m in row["messages"] if m["role"] == "user"][-1]
    user["content"] += "\ntime: 1.5 ms\ntime: 20.0 us"


KI_DEFECTS = {
    "post_best_tail_share": _tail,
    "slow_rung_returns": _slow_rung,
    "reproposed_configs": _slow_rung,
    "one_sided_remeasures": lambda ep, row: _close(ep, 3),
    "close_call_reruns": lambda ep, row: _close(ep, 3),
    "bugs_remade": _bug,
    "first_tweak_failures": _first,
    "converged_far_from_best": _far,
    "converged_on_failure": _last_fails,
    "baselines_far_from_eager": _eager,
    "weight1_slower_than_best": _weight1,
    "prompts_with_generator_labels": _label,
    "conversations_mixing_time_units": _units,
}


def test_every_behaviour_check_fails_on_a_kernelinfer_batch_report_fed_its_defect(tmp_path_factory):
    """Issue 26 item 6 on kernelinfer's batch reports (qa_reports/, qa_reports.batch_reports of a
    validate_sessions.BatchChecks, as generate writes them): each behaviour check passes on the
    sessions as generated and fails once every session of the batch carries the defect it names
    (made on the episode rows and messages the batch's QA figures read)."""
    import copy
    from kernelstrain.qa_reports import batch_reports
    from kernelstrain.sessions import episode_row
    from kernelstrain.qa import MIN_EPISODES_FOR_TAIL
    from kernelstrain.validate_sessions import BatchChecks
    rows, stats = _ki_sessions(tmp_path_factory)
    eps = [episode_row(r) for r in rows]

    def verdicts(defect=None, copies=1):
        checks = BatchChecks(100)
        for n, (row, ep) in enumerate(list(zip(rows, eps)) * copies, 1):
            row, ep = copy.deepcopy(row), copy.deepcopy(ep)
            if defect is not None:
                defect(ep, row)
                ep["end"] = "converged"
            checks.add(n, row, (ep, row))
        (report,) = batch_reports(checks, stats)
        return {c["name"]: c["pass"] for c in report["qa"]["checks"]}

    clean = verdicts()
    for name, defect in KI_DEFECTS.items():
        # the tail share is judged on MIN_EPISODES_FOR_TAIL sessions or more: six are too few (qa.tail_check)
        copies = -(-MIN_EPISODES_FOR_TAIL // len(rows)) if name == "post_best_tail_share" else 1
        assert clean[name], name
        assert not verdicts(defect, copies)[name], name
    assert verdicts(_tail)["post_best_tail_share"]        # six sessions: too few to judge, not a failure
