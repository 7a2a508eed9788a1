"""The report's HTML page: summary, chart sections, QA and holdout tables, and the episode
browser (inline CSS and JS; the sampled episodes ride along as one JSON script block)."""
from __future__ import annotations

import json
from html import escape

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1320px;margin:0 auto;padding:18px 24px 60px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:14px;margin:14px 0 6px}
.sub{color:#555}.note{color:#555;font-size:13px;margin:4px 0 10px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(470px,1fr));gap:14px}
.ladders{display:grid;grid-template-columns:repeat(auto-fill,minmax(226px,1fr));gap:6px}
.card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:10px}
.card h3{margin-top:0}
svg.chart{max-width:100%;height:auto;display:block}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #e3e3e3;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.figures td:first-child{font-weight:600}
.pass{color:#2e7d32;font-weight:600}.fail{color:#c62828;font-weight:600}
#steps-table tbody tr{cursor:pointer}#steps-table tbody tr:hover{background:#f0f6ff}
#steps-table tr.sel{background:#dbeaff}
.st-ok{color:#2e7d32}.st-wrong_result{color:#e65100}.st-compile_error{color:#c62828}
.d-kept{font-weight:700;color:#2e7d32}.d-failed{color:#c62828}.d-reverted{color:#777}.d-rebench{color:#1565c0}
pre{background:#fff;border:1px solid #e3e3e3;padding:8px;overflow:auto;max-height:460px;font-size:12px;margin:4px 0}
pre .add{color:#1b5e20;background:#e8f5e9;display:block}pre .del{color:#b71c1c;background:#ffebee;display:block}
pre .hunk{color:#1565c0;display:block}
.browser-top{display:flex;gap:10px;align-items:center;flex-wrap:wrap}
select{font:inherit;padding:3px;max-width:100%}
.twocol{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:14px}
.scroll{overflow-x:auto;max-height:720px;overflow-y:auto}
#steps-table{font-size:11.5px;width:100%}#steps-table td,#steps-table th{padding:2px 4px}
.browser{display:grid;grid-template-columns:minmax(0,1.45fr) minmax(0,1fr);gap:14px}
#step-feedback{white-space:pre-wrap}
#step-title{margin-top:0}
@media (max-width:900px){.twocol{grid-template-columns:1fr}}
"""

JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("episode-data").textContent);
  var select = document.getElementById("episode-select");
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function ms(v) { return v === null || v === undefined ? "\u2014" : v < 0.1 ? v.toFixed(4) : v < 10 ? v.toFixed(3) : v.toFixed(1); }
  function hms(s) {
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
    return h + ":" + (m < 10 ? "0" : "") + m + ":" + (x < 10 ? "0" : "") + x;
  }
  function decision(s) {
    if (s.kept) return "kept";
    if (s.status !== "ok") return "failed";
    return s.kind === "rebench" ? "rebench" : "reverted";
  }
  var last = null, group = null;
  data.forEach(function (ep, i) {
    if (ep.module !== last) { group = el("optgroup"); group.label = ep.module; select.appendChild(group); last = ep.module; }
    var o = el("option", null, ep.id + " \u00b7 " + ep.gpu + " \u00b7 " + ep.dtype + " \u00b7 " + ep.steps.length +
               " steps \u00b7 " + ep.best.speedup + "x");
    o.value = String(i);
    group.appendChild(o);
  });
  var current = null, currentStep = 0;
  function fillPre(pre, text, isDiff) {
    pre.textContent = "";
    if (!isDiff) { pre.textContent = text; return; }
    text.split("\n").forEach(function (line) {
      var c = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
      pre.appendChild(el("span", c || "ctx", line + "\n"));
    });
  }
  function showStep(k) {
    var ep = current, s = ep.steps[k];
    currentStep = k;
    var rows = document.querySelectorAll("#steps-table tbody tr");
    rows.forEach(function (r, i) { r.className = i === k ? "sel" : ""; });
    document.getElementById("step-title").textContent = "Step " + s.step + " (" + s.kind + ", " + s.tag + "): " +
      s.status + (s.failure ? " \u2014 " + s.failure : "") + ", " + decision(s);
    fillPre(document.getElementById("step-feedback"), s.feedback || s.error || "(the episode ends here: no feedback turn)", false);
    var diff = document.getElementById("step-diff");
    document.getElementById("diff-title").textContent = "Candidate against the best before it (step " + s.against + ")";
    fillPre(diff, s.diff || "(identical to the best)", !!s.diff);
  }
  function showEpisode(i) {
    var ep = data[i];
    current = ep;
    document.getElementById("episode-head").textContent = ep.module + " on " + ep.gpu + " (" + ep.arch + "), " +
      ep.dtype + ", " + ep.shape + " \u2014 " + ep.steps.length + " steps, baseline " + ep.baseline_tag + " " +
      ms(ep.baseline_ms) + " ms, best " + ms(ep.best.time_ms) + " ms at step " + ep.best.step + " (" +
      ep.best.speedup + "x), simulated " + hms(ep.elapsed_s);
    document.getElementById("episode-desc").textContent = ep.desc;
    fillPre(document.getElementById("baseline-code"), ep.baseline_code, false);
    var body = document.querySelector("#steps-table tbody");
    body.textContent = "";
    ep.steps.forEach(function (s, k) {
      var tr = el("tr");
      [["num", s.step], [null, "t+" + hms(s.elapsed_s)], [null, s.kind], [null, s.tag], [null, s.params],
       ["st-" + s.status, s.status], ["num", ms(s.time_ms)], ["num", ms(s.best_ms)],
       ["d-" + decision(s), decision(s)]].forEach(function (c) { tr.appendChild(el("td", c[0], c[1])); });
      tr.addEventListener("click", function () { showStep(k); });
      body.appendChild(tr);
    });
    showStep(0);
  }
  select.addEventListener("change", function () { showEpisode(Number(select.value)); });
  document.getElementById("prev-step").addEventListener("click", function () { if (currentStep > 0) showStep(currentStep - 1); });
  document.getElementById("next-step").addEventListener("click", function () {
    if (currentStep + 1 < current.steps.length) showStep(currentStep + 1);
  });
  if (data.length) showEpisode(0);
})();
"""


def _cell(key, value) -> str:
    if isinstance(value, bool):
        cls = "pass" if value == (key not in ("fail", "failed")) else "fail"
        return f'<td class="{cls}">{"pass" if cls == "pass" else "fail"}</td>'
    if isinstance(value, (int, float)):
        return f'<td class="num">{value:,}</td>' if isinstance(value, int) else f'<td class="num">{value:.4g}</td>'
    if isinstance(value, (dict, list)):
        return f"<td><code>{escape(json.dumps(value, ensure_ascii=False)[:300])}</code></td>"
    return f"<td>{escape(str(value))}</td>"


def table(obj) -> str:
    """A table for any JSON value: rows of dicts (dict of dicts, or list of dicts), else key | value."""
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        obj = [{"": k, **v} for k, v in obj.items()]
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        cols = list(dict.fromkeys(k for row in obj for k in row))
        head = "".join(f"<th>{escape(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(_cell(c, row.get(c, "")) for c in cols) + "</tr>" for row in obj)
        return f'<table class="figures"><tr>{head}</tr>{body}</table>'
    if isinstance(obj, dict):
        body = "".join(f"<tr><td>{escape(str(k))}</td>{_cell(k, v)}</tr>" for k, v in obj.items())
        return f'<table class="figures">{body}</table>'
    return f"<p>{escape(json.dumps(obj))}</p>"


def _json_section(obj: dict) -> str:
    """Scalars of a JSON object in one table, then each nested value under its key."""
    scalars = {k: v for k, v in obj.items() if not isinstance(v, (dict, list))}
    parts = [table(scalars)] if scalars else []
    for k, v in obj.items():
        if isinstance(v, (dict, list)) and v:
            parts.append(f"<h3>{escape(str(k))}</h3>{table(v)}")
    return "".join(parts)


def _card(title: str, svg_text: str) -> str:
    return f'<div class="card"><h3>{escape(title)}</h3>{svg_text}</div>'


SPLIT_KEYS = ("splits", "holdout", "contamination")


def render_page(stats: dict, qa: dict | None, summary: dict, charts: dict, browser: list, per_module: int) -> str:
    profile, seed = stats.get("profile", "?"), stats.get("seed", "?")
    pct, sp = stats.get("status_pct", {}), stats.get("speedup", {})
    facts = {"episodes": summary["episodes"], "steps": summary["steps"], "op modules": summary["modules"],
             "GPUs": ", ".join(stats.get("by_gpu", {})), "generator": stats.get("generator", "?"),
             "step statuses": ", ".join(f"{k} {v}%" for k, v in pct.items()),
             "speedup over baseline": f"mean {sp.get('mean', '?')}x, geomean {sp.get('geomean', '?')}x",
             "holdout tasks": stats.get("holdout_tasks", "?")}
    files = {name: {"rows": f.get("rows"), "MB": round(f.get("bytes", 0) / 1e6, 1)}
             for name, f in stats.get("files", {}).items()}
    splits = {k: stats[k] for k in SPLIT_KEYS if isinstance(stats.get(k), (dict, list))}
    sections = [
        f"<h1>KernelStrain report \u2014 {escape(str(profile))}, seed {escape(str(seed))}</h1>",
        f'<p class="sub">{escape(stats.get("profile_description", ""))}. All times are simulated.</p>',
        f'<div class="twocol"><div>{table(facts)}</div><div>{table(files) if files else ""}</div></div>',
        "<h2>Steps and statuses</h2>",
        '<div class="grid">' + _card("Step status by GPU and impl", charts["status"])
        + _card("Step status by step kind", charts["kinds"])
        + _card("Steps per episode", charts["lengths"]) + _card("Simulated wall time per episode", charts["hours"])
        + "</div>",
        "<h2>Speedups</h2>",
        '<p class="note">Best time over baseline per episode; box p25\u2013p75, whiskers p10\u2013p90, bar the '
        "median, dot the geometric mean.</p>",
        '<div class="grid">' + _card("By op family", charts["speedup_family"])
        + _card("By GPU and impl", charts["speedup_gpu"]) + "</div>",
        "<h2>Ladders</h2>",
        '<p class="note">Per module: best time so far over the baseline against step (log scale), median line, '
        "p25\u2013p75 and p10\u2013p90 bands over its episodes, up to the 90th-percentile episode length "
        "(an episode that ended keeps its final best).</p>",
        f'<div class="ladders">{charts["ladders"]}</div>',
    ]
    if "failures" in charts:
        sections += ["<h2>Failures</h2>",
                     '<p class="note">Compile errors classified by their compiler text; wrong results by the '
                     "injected bug when the step records it, else by the report's first words.</p>",
                     '<div class="grid">' + _card("Failed steps by kind", charts["failures"])
                     + (_card("Compile errors by GPU", charts["compile_gpu"]) if "compile_gpu" in charts else "")
                     + "</div>"]
    if qa:
        sections += ["<h2>Trajectory QA</h2>", '<p class="note">From qa.json.</p>', _json_section(qa)]
    if splits:
        sections += ["<h2>Holdout splits and contamination</h2>", '<p class="note">From stats.json.</p>']
        sections += [f"<h3>{escape(k)}</h3>{table(v)}" for k, v in splits.items()]
    data = json.dumps(browser, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")
    sections += [
        "<h2>Episode browser</h2>",
        f'<p class="note">{len(browser)} of {summary["episodes"]:,} episodes: up to {per_module} of each module, '
        "those with the smallest sha256 of their id (fewer when the page would pass its size budget). Click a step to see the feedback it got and its candidate's diff "
        "against the best before it.</p>",
        '<div class="browser-top"><label for="episode-select">Episode</label> <select id="episode-select"></select>'
        '<button id="prev-step" type="button">\u2190 step</button><button id="next-step" type="button">step \u2192'
        "</button></div>",
        '<p id="episode-head"></p><p class="note" id="episode-desc"></p>',
        '<details><summary>Baseline code</summary><pre id="baseline-code"></pre></details>',
        '<div class="browser"><div class="scroll"><table id="steps-table"><thead><tr><th>step</th><th>clock</th><th>kind</th>'
        "<th>variant</th><th>params</th><th>status</th><th>ms</th><th>best ms</th><th>decision</th></tr></thead>"
        '<tbody></tbody></table></div><div><h3 id="step-title"></h3><h3>Feedback</h3><pre id="step-feedback"></pre>'
        '<h3 id="diff-title"></h3><pre id="step-diff"></pre></div></div>',
        f'<script type="application/json" id="episode-data">{data}</script>',
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>KernelStrain report \u2014 {escape(str(profile))}, seed {escape(str(seed))}</title>"
            '<link rel="icon" href="data:,"><meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{CSS}</style></head><body><main>" + "\n".join(sections) + f"</main><script>{JS}</script>"
            "</body></html>\n")
