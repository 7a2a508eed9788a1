"""What `validate` re-derives beyond each row's own consistency: every episode (session) is rebuilt from the plan and compared whole — a flipped `end`
or a consistently shifted clock is internally coherent and only the rebuild shows it — and
the files generate derives from the data (the card, qa.json) are compared byte for byte,
each difference named at its file and line. Rows derived from an episode (chat and step rows)
are compared with the plan's rebuild, so an edit is named where it was made."""
from __future__ import annotations

import json
from pathlib import Path

from .episodes import build_episode
from .errors import UsageError
from .qa import dumps_qa
from .sessions import session_row
from .validate import MALFORMED, guarded, row_diff


def plan_row(ctx, index: int, row: dict, where: str, out, sessions: bool = False) -> dict:
    """The plan's public episode row of `index`; a finding at `where` when the dataset's row
    (episode row, or session row when `sessions`) is not the plan's."""
    ep = build_episode(ctx.plan, index).row()
    if sessions:
        want = json.loads(json.dumps(session_row(ep, ctx.plan.profile.output.timestamps)))
        what = "the plan's session"
    else:
        want, what = json.loads(json.dumps(ep)), "the plan's episode"
    if row != want:
        out.add(where, f"not the plan's row for episode {index}: {row_diff(row, want, what)}", "ids_and_task")
    return ep


def check_sessions_plan(path: Path, ctx, out, start: int) -> None:
    """Every session in its place compared with the plan's (validate only: generate's QA
    reports, which read the same file, need not rebuild the run a second time)."""
    prefix = f"{ctx.stats['profile']}-s{ctx.stats['seed']}-"
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                row = json.loads(raw)
            except ValueError:
                continue            # a finding of the row checks already
            index = start + n - 1
            if isinstance(row, dict) and row.get("id") == f"{prefix}{index:06d}":
                where = f"{path.name}:{n}"
                guarded(plan_row, where, out, ctx, index, row, where, out, True)


def check_text(path: Path, name: str, want: str, what: str, out) -> None:
    """A finding at name:LINE (the first line that differs) when the file is not `want`."""
    try:
        got = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        out.add(name, "missing or unreadable", "derived")
        return
    if got == want:
        return
    a, b = got.splitlines(), want.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) + 1
    out.add(f"{name}:{line}", f"differs from {what}", "derived")


def check_derived_files(data: Path, layout, stats: dict, out) -> None:
    """README.md and the layout's qa file (qa.json) against what generate writes."""
    card = guarded(layout.card, "stats.json", out, stats)
    if card:
        check_text(data / "README.md", "README.md", card, "the card generate writes for this stats.json", out)
    if layout.qa_file:
        try:
            report = layout.qa(data)
        except (UsageError, *MALFORMED):
            return      # a row qa cannot read is a finding of its own already
        check_text(data / layout.qa_file, layout.qa_file, dumps_qa(report), "the QA report of the data as it is now", out)
