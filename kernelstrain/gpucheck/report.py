"""`gpu-check`'s report: correctness labels against the hardware, and the simulator's times and
rankings against measured ones, beside the hardware's own repeatability. Pure functions of the
per-candidate results, so CI tests them without a GPU.

A result row: id, episode, module, variant, label ('ok' | 'wrong_result'), ok (matched the
reference), error (None, or why it did not run / crashed), time_ms (measured), sim_ms (the
simulator on the local GPU's profile), time_ms_2 (a re-time, on a subset).
"""
from __future__ import annotations

from ..calibration.metrics import agreement, episode_spearmans, standard_error

NOT_RUN = ("not run", "worker could not", "compile error", "timeout")

# the bar for a simulator that labels and ranks like the hardware (issue 30, "Done when")
TARGETS = (("ok candidates matching", "ok_match", 1.0), ("wrong_result candidates failing", "wrong_fail", 1.0),
           ("within-episode Spearman mean", "spearman_mean", 0.88), ("pair-order agreement", "pair_agreement", 0.91),
           ("candidates within 0.8-1.25x", "within_0.8_1.25", 0.80))
MODULE_GEOMEAN = (0.67, 1.5)      # every module's sim/measured geomean inside this band


def outcome(r: dict) -> str:
    """'match', 'mismatch' (ran, wrong numbers), 'fault' (launch / kernel error, crash) or 'notrun'."""
    err = r.get("error") or ""
    if r.get("ok"):
        return "match"
    if err.startswith(NOT_RUN):
        return "notrun"
    if err and not err.startswith(("wrong after", "timing pass: wrong")):
        return "fault"
    return "mismatch"


def summarize(results: list) -> dict:
    """Everything the report prints, as one JSON-ready dict."""
    counts = {"ok": {}, "wrong_result": {}}
    for r in results:
        c = counts[r["label"]]
        o = outcome(r)
        c[o] = c.get(o, 0) + 1
    ran_ok = sum(v for k, v in counts["ok"].items() if k != "notrun")
    ran_wrong = sum(v for k, v in counts["wrong_result"].items() if k != "notrun")
    timed = [dict(r, measured_ms=r["time_ms"]) for r in results
             if r["label"] == "ok" and r.get("ok") and r.get("time_ms") and r.get("sim_ms")]
    # the Spearman mean's standard error over the episodes: how far a sample of this size can say it is from a target
    fig = dict(agreement(timed), spearman_se=standard_error(episode_spearmans(timed))) if timed else {"n": 0}
    repeat_rows = [dict(r, sim_ms=r["time_ms_2"]) for r in timed if r.get("time_ms_2")]
    repeat = (dict(agreement(repeat_rows), spearman_se=standard_error(episode_spearmans(repeat_rows)))
              if repeat_rows else {"n": 0})
    out = {"counts": counts,
           "ok_match": counts["ok"].get("match", 0) / ran_ok if ran_ok else None,
           "wrong_fail": (ran_wrong - counts["wrong_result"].get("match", 0)) / ran_wrong if ran_wrong else None,
           "timing": {k: v for k, v in fig.items() if k != "module_spearman"},
           "repeat": {k: v for k, v in repeat.items() if k != "module_spearman"},
           "modules": _per_module(results, fig.get("module_spearman", {})),
           "problems": [_problem(r) for r in results if r["label"] == "ok" and outcome(r) in ("mismatch", "fault")]
           + [_problem(r) for r in results if r["label"] == "wrong_result" and outcome(r) == "match"]}
    flat = {**out["timing"], "ok_match": out["ok_match"], "wrong_fail": out["wrong_fail"]}
    out["targets"] = [{"what": what, "value": flat.get(key), "target": bar,
                       "met": flat.get(key) is not None and flat[key] >= bar} for what, key, bar in TARGETS]
    gm = flat.get("geomean")
    out["targets"].append({"what": "geomean sim/measured in 0.9-1.1", "value": gm, "target": "0.9-1.1",
                           "met": gm is not None and 0.9 <= gm <= 1.1})
    neg = sorted(m for m, s in fig.get("module_spearman", {}).items() if s < 0)
    out["targets"].append({"what": "modules with a negative pooled Spearman", "value": len(neg), "target": 0,
                           "met": not neg, "modules": neg})
    lo, hi = MODULE_GEOMEAN
    off = sorted(m for m, v in out["modules"].items() if v["geomean"] is not None and not lo <= v["geomean"] <= hi)
    out["targets"].append({"what": f"modules with sim/measured geomean outside {lo}-{hi}", "value": len(off),
                           "target": 0, "met": not off, "modules": off})
    return out


def _problem(r: dict) -> str:
    err = (r.get("error") or "").splitlines()[0][:120] if r.get("error") else ""
    return f"{r['label']} {r['id']} {r['module']}/{r['variant']} {r.get('params')}: {outcome(r)} {err}".rstrip()


def _per_module(results: list, pooled: dict) -> dict:
    rows = {}
    for r in results:
        m = rows.setdefault(r["module"], {"ok": 0, "ok_match": 0, "wrong": 0, "wrong_fail": 0, "timed": []})
        o = outcome(r)
        if o == "notrun":
            continue
        if r["label"] == "ok":
            m["ok"] += 1
            m["ok_match"] += o == "match"
            if o == "match" and r.get("time_ms") and r.get("sim_ms"):
                m["timed"].append(dict(r, measured_ms=r["time_ms"]))
        else:
            m["wrong"] += 1
            m["wrong_fail"] += o != "match"
    out = {}
    for name, m in sorted(rows.items()):
        timed = m.pop("timed")
        fig = agreement(timed) if timed else {}
        out[name] = {**m, "timed": len(timed), "geomean": fig.get("geomean"), "p10": fig.get("p10"),
                     "p90": fig.get("p90"), "spearman_pooled": pooled.get(name),
                     "spearman_episode": fig.get("spearman_mean")}
    return out


def _f(x, spec=".3f") -> str:
    return "-" if x is None else format(x, spec)


def render(summary: dict, device: str = "") -> str:
    """The report as text: totals, targets, then one line per module."""
    t, rp, c = summary["timing"], summary["repeat"], summary["counts"]
    lines = [f"gpu-check{' on ' + device if device else ''}",
             f"ok candidates: {c['ok']}  -> matching {_f(summary['ok_match'])}",
             f"wrong_result candidates: {c['wrong_result']}  -> failing {_f(summary['wrong_fail'])}",
             f"timed ok candidates: {t.get('n', 0)}; sim/measured geomean {_f(t.get('geomean'))}, "
             f"p10-p90 {_f(t.get('p10'), '.2f')}-{_f(t.get('p90'), '.2f')}, within 0.8-1.25x "
             f"{_f(t.get('within_0.8_1.25'))}, within 0.5-2x {_f(t.get('within_0.5_2'))}",
             f"ranking within episodes ({t.get('groups', 0)} episodes with >= 3 timed): Spearman mean "
             f"{_f(t.get('spearman_mean'))} (standard error {_f(t.get('spearman_se'))}), median "
             f"{_f(t.get('spearman_median'))}, <= 0 in "
             f"{t.get('groups_nonpositive', 0)}; pair-order agreement {_f(t.get('pair_agreement'))} (the simulator's ties "
             f"as wrong: {_f(t.get('pair_agreement_ties_wrong'))})",
             f"repeat ceiling ({rp.get('n', 0)} re-timed, {rp.get('groups', 0)} episodes): Spearman mean "
             f"{_f(rp.get('spearman_mean'))} (standard error {_f(rp.get('spearman_se'))}), pair-order {_f(rp.get('pair_agreement'))}, "
             f"re-time/first geomean {_f(rp.get('geomean'))}, within 0.8-1.25x {_f(rp.get('within_0.8_1.25'))}",
             "", "targets:"]
    for g in summary["targets"]:
        value = g["value"] if isinstance(g["value"], int) else _f(g["value"])
        lines.append(f"  [{'x' if g['met'] else ' '}] {g['what']}: {value} (target {g['target']})"
                     + (f" {', '.join(g['modules'])}" if g.get("modules") else ""))
    lines += ["", f"{'module':28} {'ok':>7} {'wrong':>7} {'timed':>5} {'sim/meas':>8} {'p10-p90':>11} "
              f"{'rho pool':>8} {'rho ep':>7}"]
    for name, m in summary["modules"].items():
        lines.append(f"{name:28} {m['ok_match']:>3}/{m['ok']:<3} {m['wrong_fail']:>3}/{m['wrong']:<3} "
                     f"{m['timed']:>5} {_f(m['geomean'], '8.2f'):>8} "
                     f"{_f(m['p10'], '.2f') + '-' + _f(m['p90'], '.2f'):>11} "
                     f"{_f(m['spearman_pooled'], '8.2f'):>8} {_f(m['spearman_episode'], '7.2f'):>7}")
    if summary["problems"]:
        lines += ["", "labels the hardware contradicts:"] + [f"  {p}" for p in summary["problems"]]
    return "\n".join(lines)
