"""What validate's row checks find on the plan's own rows, worked out ahead in the processes
that rebuild them (validate_derived.Rebuilds), so the parent's part of `validate --workers N`
is reading, comparing and the contamination measure (StreamedMeasure).

A dataset row `identical` to the plan's rebuild of it (validate.identical: the same JSON value,
equal with the same types and key order everywhere) gets the very answers a check of the plan's
row gives, for every check is a pure function of the row, its plan index and the run: so when
the plan's row passes them all (`clean`), the parent takes that verdict and the figures computed
ahead instead of checking the row again. Any other row (edited, reordered, malformed, out of
place) is checked in the parent as with one worker: the findings are the same, in the same order.
"""
from __future__ import annotations

from dataclasses import dataclass

from .stats import stats_fields
from .validate import MALFORMED, Findings, check_episode, guarded


@dataclass(frozen=True)
class Ahead:
    clean: bool                   # the plan's row passes every check of its own row (no finding)
    episode: dict | None = None   # sessions: check_session's episode row of the plan's row, as the parent reads it
                                  # where `judged` is made: its stats' fields alone (stats.stats_fields: no code), for
                                  # the stats and the held-out combos; whole where `judged` is None (the parent then
                                  # judges it). The session row check_session rebuilt from it is not sent: it equals
                                  # the plan's row, which a row taking this verdict is identical to. A kernelinfer
                                  # verdict pickled 500 KB with both whole, ~270 KB without (unpickled in the parent)
    windows: list | None = None   # sessions: the chat windows made from it (episodes.multiturn_rows)
    judged: object = None         # its QA figures (qa._Acc): episodes, qa.episode_qa of the plan's rows;
                                  # sessions, its episode and session row judged; None where it raised
    figures: tuple = ()           # training.chat_figure of each row made from it: episodes, of its chat, step
                                  # and prompt-completion rows; sessions, of the session, then of its windows
    measured: tuple | None = None  # its contamination part (contamination.Incremental.part of the public
                                   # episode row the parent would measure), where validate measures as it reads


def ahead(ctx, index: int, rebuilt: tuple, sessions: bool) -> Ahead:
    """The verdicts of plan episode `index`'s rows (`rebuilt`: validate_derived.rebuild's
    (episode row, dataset row, chat rows)), as the parent's checks would give them."""
    from .episodes import multiturn_rows
    from .qa import _Acc, episode_qa
    from .training import chat_figure, prompt_completion_rows
    ep, want, chats = rebuilt
    out = Findings(1)
    if sessions:
        from .validate_sessions import check_session
        checked = check_session(want, "", out, ctx, index)
        if checked is None or out.total:
            return Ahead(False)
        windows = guarded(multiturn_rows, "", out, checked[0], ctx.timestamps, ctx.max_tokens)
        if not windows or out.total:
            return Ahead(False)
        try:      # the QA figures its batch report counts (validate_sessions.BatchChecks.add)
            judged = _Acc()
            judged.episode(checked[0])
            judged.multiturn(checked[1])
        except MALFORMED:
            judged = None
        return Ahead(True, checked[0] if judged is None else stats_fields(checked[0]), windows, judged,
                     (chat_figure(checked[1]), [chat_figure(r) for r in windows]),
                     measured(ctx, checked[0]))
    clean = guarded(check_episode, "", out, want, "", out, ctx, index) and not out.total
    if not clean:
        return Ahead(False)
    try:
        judged = episode_qa({"episodes": [want], "sft_multiturn": chats[0], "sft_steps": chats[1]})
    except MALFORMED:
        judged = None
    figures = tuple([chat_figure(r) for r in rows] for rows in (*chats, prompt_completion_rows(chats[1])))
    return Ahead(True, judged=judged, figures=figures, measured=measured(ctx, want))


def measured(ctx, ep: dict) -> tuple | None:
    """The contamination part of a plan's public episode row, measured in this (worker) process."""
    if ctx.scan is None:
        return None
    try:
        return ctx.scan.scan.part(ep)
    except MALFORMED + (UnicodeDecodeError,):
        return None


class StreamedMeasure:
    """contamination.measure of a dataset's training rows taken as validate's checks read them
    (each row once, in plan order: the figures are maxima, unions and distinct counts, whatever
    the order), instead of reading, parsing (and for sessions re-rendering) them again. `broken`
    once a row cannot be measured (unreadable, malformed): measure then runs on the files
    (validate.measure_splits), and its error names the line as with one worker; so it does where
    the layout's checks did not hand over one row a line (`rows`; see dataset.validate).

    A row identical to the plan's comes with its part measured ahead (Ahead.measured) by the
    worker that rebuilt it. A worker measures each candidate once, in the first row it rebuilds
    that holds it (its rows in plan order), so its parts are whole only together: from the first
    row that comes without one (not the plan's, or out of order), every row is measured here."""

    def __init__(self, scan, as_episode):
        self.scan, self.as_episode, self.broken = scan, as_episode, False
        self.rows = 0
        self.ahead = True          # the rows so far each came with its part measured ahead

    def add_row(self, row, ep: dict | None = None, ahead: tuple | None = None) -> None:
        """Fold in one row of the training files (None: unreadable); `ep` its public episode row
        where the checks made it (else it is made here); `ahead` its part measured ahead."""
        self.rows += 1
        if self.broken:
            return
        self.ahead = self.ahead and ahead is not None
        if self.ahead:
            self.scan.add(ahead)
            return
        if not isinstance(row, dict):
            self.broken = True
            return
        try:
            self.scan.add(self.scan.part(self.as_episode(row) if ep is None else ep))
        except MALFORMED + (UnicodeDecodeError,):
            self.broken = True

    def result(self) -> dict:
        return self.scan.result()
