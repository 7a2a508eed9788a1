"""qa_reports/batch_NNN.json and .md of the sessions layout: each batch of sessions scored on
validate's mechanical checks (schema.ROW_CHECKS: the id a finding carries) and on
the trajectory QA figures of qa.py with their thresholds. `generate` and `merge` write them
(validate_sessions.write_qa_reports); `validate` recomputes them from the rows and compares.
"""
from __future__ import annotations

import json

from .qa import session_report
from .schema import ROW_CHECKS, SCHEMA
from .sessions import batch_name


def batch_reports(checks, stats: dict) -> list[dict]:
    """One report per batch of a validate_sessions.BatchChecks."""
    reports = []
    for k in range(checks.count):
        failures, ids = checks.failures[k], checks.ids[k]
        mech = [{"name": name, "checks": what, "findings": failures[name], "pass": failures[name] == 0}
                for name, what in ROW_CHECKS.items()]
        figures = session_report(checks.accs[k])
        passed = sum(c["pass"] for c in mech), sum(c["pass"] for c in figures["checks"])
        reports.append({
            "schema": SCHEMA["qa_batch"], "profile": stats["profile"], "seed": stats["seed"], "batch": k,
            "file": batch_name(k), "sessions": len(ids), "first_id": ids[0] if ids else None,
            "last_id": ids[-1] if ids else None,
            "mechanical": {"score": f"{passed[0]}/{len(mech)}", "passed": passed[0], "total": len(mech),
                           "checks": mech},
            "qa": {"score": f"{passed[1]}/{len(figures['checks'])}", "passed": passed[1],
                   "total": len(figures["checks"]), "checks": figures["checks"], "info": figures["info"]},
            "pass": passed[0] == len(mech) and figures["pass"],
        })
    return reports


def dumps_report(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


def report_markdown(r: dict) -> str:
    """The short human form of a batch report."""
    mech, figures = r["mechanical"], r["qa"]
    lines = [f"# QA report: {r['file']} ({r['profile']}, seed {r['seed']})", "",
             f"{r['sessions']} sessions, {r['first_id']} .. {r['last_id']}.", "",
             f"- **{mech['score']} mechanical checks passed** (validate's checks on every row of the batch)",
             f"- **{figures['score']} trajectory QA figures within their thresholds**",
             f"- overall: {'pass' if r['pass'] else 'FAIL'}", "",
             "| mechanical check | findings | result |", "|---|---|---|"]
    lines += [f"| {c['name']}: {c['checks']} | {c['findings']} | {'pass' if c['pass'] else 'FAIL'} |"
              for c in mech["checks"]]
    lines += ["", "| QA figure | value | threshold | result |", "|---|---|---|---|"]
    lines += [f"| {c['name']} | {c['value']} | {c['threshold']} | {'pass' if c['pass'] else 'FAIL'} |"
              for c in figures["checks"]]
    info = figures["info"]
    lines += ["", f"Steps: {info['steps']:,} (mean {info['mean_steps']} a session); statuses "
              + ", ".join(f"{k} {v}%" for k, v in info["status_pct"].items())
              + f"; speedup geomean {info['speedup_geomean']}x; session tokens p50 {info['session_tokens']['p50']:,}, "
              f"max {info['session_tokens']['max']:,}.", ""]
    return "\n".join(lines)
