"""What `validate` re-derives beyond each row's own consistency: when the run's profile is
known, every episode (session) is rebuilt from the plan and compared whole — a flipped `end`
or a consistently shifted clock is internally coherent and only the rebuild shows it — and
the files generate derives from the data (the card, qa.json) are compared byte for byte,
each difference named at its file and line. Rows derived from an episode (chat and step rows)
are compared with the plan's rebuild, so an edit is named where it was made."""
from __future__ import annotations

import json
from pathlib import Path


def plan_row(ctx, index: int, row: dict, where: str, out, sessions: bool = False) -> dict:
    """The plan's public episode row of `index`; a finding at `where` when the dataset's row
    (episode row, or session row when `sessions`) is not the plan's."""
    from .episodes import build_episode
    from .validate import _row_diff
    ep = build_episode(ctx.plan, index).row()
    if sessions:
        from .sessions import session_row
        want = json.loads(json.dumps(session_row(ep, ctx.plan.profile.output.timestamps)))
        what = "the plan's session"
    else:
        want, what = json.loads(json.dumps(ep)), "the plan's episode"
    if row != want:
        out.add(where, f"not the plan's row for episode {index}: {_row_diff(row, want, what)}")
    return ep


def check_text(path: Path, name: str, want: str, what: str, out) -> None:
    """A finding at name:LINE (the first line that differs) when the file is not `want`."""
    try:
        got = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        out.add(name, "missing or unreadable")
        return
    if got == want:
        return
    a, b = got.splitlines(), want.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))) + 1
    out.add(f"{name}:{line}", f"differs from {what}")


def check_derived_files(data: Path, stats: dict, out) -> None:
    """README.md (both layouts) and qa.json (episodes layout) against what generate writes."""
    from .card import render_card
    from .validate import _MALFORMED, _guarded
    card = _guarded(render_card, "stats.json", out, stats)
    if card:
        check_text(data / "README.md", "README.md", card, "the card generate writes for this stats.json", out)
    if stats.get("layout") != "sessions":
        from .errors import UsageError
        from .qa import dumps_qa, qa
        try:
            report = qa(data)
        except (UsageError, *_MALFORMED):
            return      # a row qa cannot read is a finding of its own already
        check_text(data / "qa.json", "qa.json", dumps_qa(report), "the QA report of the data as it is now", out)
