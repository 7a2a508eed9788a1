"""What `validate` re-derives beyond each row's own consistency: every episode (session) is rebuilt from the plan and compared whole — a flipped `end`
or a consistently shifted clock is internally coherent and only the rebuild shows it — and
the files generate derives from the data (the card, qa.json) are compared byte for byte,
each difference named at its file and line. Rows derived from an episode (chat and step rows)
are compared with the plan's rebuild, so an edit is named where it was made."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .episodes import build_episode
from .errors import UsageError
from .qa import dumps_qa, report as qa_report
from .sessions import session_row
from .validate import MALFORMED, guarded, row_diff


def rebuild(plan, index: int, sessions: bool) -> tuple:
    """The plan's episode `index` as validate compares it: (public episode row, the dataset row
    it must equal — episode or session row, as built —, its chat rows).

    The row as built, not as JSON gives it back: its values are JSON's types (tests/test_generation_judge.py),
    so the round trip (json_value: an encoding and a decoding of the whole row, ~5% of a worker's time) gives an
    identical row. Where it would not (a tuple left in a row), nothing is lost: a dataset row read from JSON is
    then not `identical` to it, so it takes no verdict worked out ahead (validate_ahead) and is checked in the
    parent, and plan_row compares it with the round trip."""
    from .episodes import chat_rows
    output = plan.profile.output
    ep = build_episode(plan, index).row()
    want = session_row(ep, output.timestamps) if sessions else ep
    return ep, want, None if sessions else chat_rows(ep, output.timestamps, output.max_context_tokens)


def json_value(row):
    """`row` as JSON gives it back (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(row))


_AHEAD: tuple = ()     # (validate.Context, verdicts) a forked Rebuilds pool builds from


def _rebuild(index: int, sessions: bool) -> tuple:
    """In a pool worker: (True, rebuild, the verdicts of its rows), or (False, the exception, None)."""
    ctx, verdicts_of = _AHEAD
    try:
        rebuilt = rebuild(ctx.plan, index, sessions)
    except Exception as e:       # raised again in the parent, at the row it belongs to
        return False, e, None
    verdicts = verdicts_of(ctx, index, rebuilt, sessions)
    return True, (None, *rebuilt[1:]), verdicts     # (the parent reads no public episode row: less to send)


class Rebuilds:
    """The plan's rebuilds of episodes start.. in order (rebuild), computed `ahead` in forked
    processes while validate checks the rows, with what the row checks find on the plan's own
    rows (validate_ahead): the engine's rerun and the checks of rows equal to the plan's, the
    costliest work, run on the other cores. An index asked out of order (a dataset with rows
    missing or moved) is rebuilt here. Without a pool (one worker, no fork) every rebuild is
    computed when asked."""

    def __init__(self, ctx, start: int, count: int, sessions: bool, workers: int, verdicts_of):
        """`verdicts_of(ctx, index, rebuild, sessions)`: the verdicts of a rebuild's rows
        (validate_ahead.ahead), computed in the workers."""
        from .pools import fork_pool, ordered_map, running
        global _AHEAD
        self.plan, self.sessions, self.next = ctx.plan, sessions, start
        self.last = None             # (index, its pool answer): asked again by plan_row after `verdicts`
        self.early = None            # without a pool: (index, rebuilt, its rebuild or what it raised): `prepare`
        _AHEAD = (ctx, verdicts_of)  # set before the fork: the pool's workers hold it
        self.stack = contextlib.ExitStack()    # the pool's `running`: its workers stopped on close()
        self.pool = self.stack.enter_context(running(lambda: fork_pool(workers) if workers > 0 and count > 1 else None))
        self.ahead = None if self.pool is None else ordered_map(
            self.pool, _rebuild_star, ((i, sessions) for i in range(start, start + count)), 4 * workers)

    def _answer(self, index: int):
        """The pool's (ok, value, Ahead) for `index`, None where the pool has none for it."""
        if self.last is not None and self.last[0] == index:
            return self.last[1]
        while self.ahead is not None and self.next <= index:
            answer = next(self.ahead, None)
            self.next += 1
            if self.next - 1 == index and answer is not None:
                self.last = (index, answer)
                return answer
        return None

    def prepare(self, index: int) -> None:
        """Without a pool: rebuild `index` now, before validate checks its row, so that the row checks' own
        re-simulation and slips (rerender.simulated, with_typo) find the answers the rebuild's engine asked in
        the candidate caches (pure functions of each step's recipe) instead of computing them a second time.
        `get` hands the rebuild over, or raises what it raised, where it would have raised it."""
        if self.pool is not None or self.early is not None and self.early[0] == index:
            return
        try:
            self.early = (index, True, rebuild(self.plan, index, self.sessions))
        except Exception as e:       # (any: raised again by get, to the caller that guards it)
            self.early = (index, False, e)

    def get(self, index: int) -> tuple:
        if self.early is not None and self.early[0] == index:
            _, rebuilt, value = self.early
            self.early = None
            if not rebuilt:
                raise value
            return value
        answer = self._answer(index)
        if answer is None:
            return rebuild(self.plan, index, self.sessions)
        ok, value, _ = answer
        if not ok:
            raise value
        return value

    def verdicts(self, index: int):
        """(rebuild, validate_ahead.Ahead) of `index` from the pool, None where it has none
        (asked out of order, or its rebuild raised: the checks run here, as with one worker)."""
        answer = self._answer(index)
        return None if answer is None or not answer[0] else answer[1:]

    def close(self) -> None:
        # an interrupt's way out (dataset.py's finally) stops the pool as one (pools.running)
        self.stack.__exit__(*sys.exc_info())


def _rebuild_star(args: tuple) -> tuple:
    return _rebuild(*args)


def plan_row(ctx, index: int, row: dict, where: str, out, sessions: bool = False) -> tuple:
    """The plan's (multi-turn rows, step rows) of `index` (None for a session); a finding at `where`
    when the dataset's row (episode row, or session row when `sessions`) is not the plan's."""
    _, want, chats = ctx.rebuilds.get(index) if ctx.rebuilds is not None else \
        rebuild(ctx.plan, index, sessions)
    # a row read from JSON equal to the plan's row as built is equal to it as JSON gives it back (the
    # built row's values are JSON's types, or tuples, which equal no list): the round trip, ~1% of
    # validate's CPU, only where they differ
    if row != want and row != (want := json_value(want)):
        what = "the plan's session" if sessions else "the plan's episode"
        out.add(where, f"not the plan's row for episode {index}: {row_diff(row, want, what)}", "ids_and_task")
    return chats


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


def check_derived_files(data: Path, layout, stats: dict, out, judged=None) -> None:
    """README.md and the layout's qa file (qa.json) against what generate writes. `judged`: the
    QA figures of every row, summed as the file checks read them (Context.judged), used only on
    data with no finding (there they equal qa's reading of the files); else qa reads the files."""
    card = guarded(layout.card, "stats.json", out, stats)
    if card:
        check_text(data / "README.md", "README.md", card, "the card generate writes for this stats.json", out)
    if layout.qa_file:
        try:
            report = qa_report(judged) if judged and not out.total else layout.qa(data)
        except (UsageError, *MALFORMED):
            return      # a row qa cannot read is a finding of its own already
        check_text(data / layout.qa_file, layout.qa_file, dumps_qa(report), "the QA report of the data as it is now", out)
