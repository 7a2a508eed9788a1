"""generate's batch QA reports (the sessions layout, validate_sessions.write_qa_reports) from the
checks of each session made in the worker that built it, instead of reading, re-rendering and
checking every session again once the files are written.

A batch's report is what validate's checks find on its rows, and their QA figures (qa._Acc).
Every check of a session row is a pure function of the row, its plan index and the run (stats'
profile, seed and generator, the manifest's plan and [output] settings: the same argument as
validate_ahead's). So the worker that builds session `index` checks the row it encodes, from the
encoded line itself (json.loads of the bytes written, as validate reads them), with a Context of
the run made from its plan (written_context), and hands back the line's digest, the row's id
and combo, and its QA figures when every check passed (`judge`). The parent sums the figures of
each batch in plan order as the rows are written (WrittenChecks.add: BatchChecks.add's own sums).
At the end (WrittenChecks.checks) they stand for the report only where nothing can differ from
a check of the files: the run's context is the one the workers assumed, every session of the
run was judged clean in this run (not a resumed one), each line of sessions.jsonl and of its
validation file is byte for byte a line a worker judged, in order, with no line repeating the
one before it, no id repeating within a batch and no combo held out. Otherwise (None) the files
are checked as before (validate_sessions.batch_checks): the reports are the same bytes either
way (tests/test_batch_checks.py compares the two).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from .qa import _Acc
from .sessions import SESSIONS_FILE
from .training import is_validation
from .validate import MALFORMED, Context, Findings, combo_of, first_index
from .writers import validation_file

_CONTEXTS: dict = {}        # id(plan) -> (plan, its Context): one a worker process


def digest(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=16).digest()


def written_context(plan) -> Context:
    """The validate.Context of a run of `plan` as generate writes it: stats.json's profile,
    seed and generator (all a row check reads of stats) and the run's manifest."""
    from .manifest import GENERATOR, Manifest      # (stats.json's generator is the same string)
    found = _CONTEXTS.get(id(plan))
    if found is None or found[0] is not plan:
        stats = {"profile": plan.profile.name, "seed": plan.seed, "generator": GENERATOR}
        _CONTEXTS.clear()
        found = _CONTEXTS[id(plan)] = plan, Context(stats, Manifest(plan.profile, plan.seed), plan)
    return found[1]


def context_key(ctx: Context) -> tuple:
    """What a session row's checks read of the run (see the module docstring): the plan's profile
    whole but for the file it was read from (a dataset's manifest.json, the run's .toml)."""
    return (ctx.stats.get("profile"), ctx.stats.get("seed"), ctx.stats.get("generator"), ctx.id_prefix,
            ctx.timestamps, ctx.max_tokens, ctx.validation_frac, replace(ctx.plan.profile, path=""), ctx.plan.seed)


def judge(plan, index: int, line: bytes, name: str) -> tuple:
    """In generate's worker: (file name, the line's digest, the row's id, its combo, its QA figures)
    of plan session `index` written as `line` into file `name`; id, combo and figures None unless
    every check of the row passed (validate_sessions.check_session, its id in place and its split's
    file) and its figures were made."""
    from .validate_sessions import check_session
    ctx = written_context(plan)
    row = json.loads(line)
    out = Findings(1)
    in_place = isinstance(row, dict) and row.get("id") == f"{ctx.id_prefix}{index:06d}" and "task_id" in row \
        and int(is_validation(str(row["task_id"]), ctx.validation_frac)) == (name != SESSIONS_FILE)
    checked = check_session(row, name, out, ctx, index) if in_place else None
    if checked is None or out.total:
        return name, digest(line), None, None, None
    try:
        figures = _Acc()
        figures.episode(checked[0])
        figures.multiturn(checked[1])
    except MALFORMED:
        return name, digest(line), None, None, None
    return name, digest(line), row["id"], combo_of(checked[0]), figures


class WrittenChecks:
    """The workers' verdicts of a run's sessions, folded into validate_sessions.BatchChecks of
    sessions.jsonl as they are written (plan order); see the module docstring."""

    def __init__(self, plan, batch_size: int, start: int):
        from .validate_sessions import BatchChecks
        self.key, self.start = context_key(written_context(plan)), start
        self.batches = BatchChecks(batch_size)
        self.digests = {SESSIONS_FILE: [], validation_file(SESSIONS_FILE): []}
        self.combos: set = set()
        self.clean = True

    def add(self, verdict: tuple | None) -> None:
        if verdict is None or verdict[4] is None or verdict[0] not in self.digests:
            self.clean = False
        if not self.clean:
            return
        name, line, rid, combo, figures = verdict
        self.digests[name].append(line)
        self.combos.add(combo)
        if name != SESSIONS_FILE:
            return
        k = self.batches._batch(len(self.digests[name]))
        if rid in self.batches.ids[k]:       # BatchChecks.add judges such a row with its batch's: check the files
            self.clean = False
            return
        self.batches.ids[k].append(rid)
        self.batches.accs[k].merge(figures)
        self.batches.accs[k].unworthy |= figures.unworthy

    def checks(self, data: Path, ctx: Context, held: set):
        """The BatchChecks of sessions.jsonl where the files are what the workers judged, else None."""
        if not self.clean or context_key(ctx) != self.key or first_index(ctx.stats) != self.start \
                or ctx.stats.get("batch_size") != self.batches.size or self.combos & held:
            return None
        for name, want in self.digests.items():
            if not same_lines(data / name, want):
                return None
        return self.batches


def same_lines(path: Path, want: list) -> bool:
    """The file's lines (each with its newline) are those of digests `want`, in order, none
    equal to the line before it."""
    prev, n = None, 0
    try:
        with open(path, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                d = digest(raw)
                if n > len(want) or d != want[n - 1] or d == prev or not raw.endswith(b"\n"):
                    return False
                prev = d
    except OSError:
        return False
    return n == len(want)
