"""`validate` for the sessions layout: each session row is turned back into its episode row
(sessions.episode_row re-renders every step's code from the trace), checked with every
episode check of validate.py, and rebuilt (sessions.session_row) to compare its messages;
then the stamps, the batches (their concatenation is sessions.jsonl, byte for byte) and the
QA report of every batch (recomputed here, compared with qa_reports/).

The mechanical checks of a batch's QA report are validate's findings on its rows, tallied
into MECHANICAL's named checks (the first pattern a finding's text matches)."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from .messages import clock, hms
from .schema import ROW_CHECKS, SCHEMA, SESSION_KEYS, TRACE_KEYS
from .sessions import BATCH_DIR, QA_DIR, SESSIONS_FILE, episode_row, session_row
from .episodes import multiturn_rows
from .validate_derived import plan_row
from .manifest import read_manifest
from .qa import _Acc
from .qa_reports import batch_reports, dumps_report, report_markdown
from .reading import read_jsonl
from .stats import StatsAccumulator
from .training import chat_figure, is_validation
from .validate import Context, Findings, Peek, check_episode, combo_of, guarded, identical, record_rows, row_diff, rows
from .validate_episodes import check_multiturn
from .writers import FILES, SESSION_FILES, validation_file, write_text_atomic

MECHANICAL = tuple(ROW_CHECKS.items())   # (check, what it checks), as a batch's QA report lists them
_STAMP = re.compile(r"\[t\+(\d+:\d\d:\d\d)\] ")


def _shape_ok(row: dict, where: str, out: Findings) -> bool:
    if tuple(row) != SESSION_KEYS:
        out.add(where, f"session keys {list(row)} != {list(SESSION_KEYS)}", "rows_and_schema")
        return False
    if row["schema"] != SCHEMA["session"]:
        out.add(where, f"schema {row['schema']!r:.40}, expected {SCHEMA['session']!r}", "rows_and_schema")
    trace, base = row["trace"], row["baseline"]
    if not isinstance(trace, list) or not all(isinstance(s, dict) and tuple(s) == TRACE_KEYS for s in trace):
        out.add(where, f"trace must be a list of steps with keys {list(TRACE_KEYS)}", "rows_and_schema")
        return False
    if not isinstance(base, dict) or list(base) != ["tag", "params"] or not isinstance(row["messages"], list):
        out.add(where, "baseline must be {tag, params} and messages a list", "rows_and_schema")
        return False
    return True


def check_stamps(row: dict, where: str, out: Findings) -> None:
    """Each feedback turn opens with its step's elapsed time; the times never go back."""
    feedback = [m.get("content", "") if isinstance(m, dict) else "" for m in row["messages"][3::2]]
    if row["elapsed_hms"] != clock(row["elapsed_s"]):
        out.add(where, f"elapsed_hms {row['elapsed_hms']!r:.20} is not elapsed_s {row['elapsed_s']} as H:MM:SS", "stamps")
    if row["num_steps"] != len(row["trace"]) or len(feedback) != len(row["trace"]):
        out.add(where, f"num_steps {row['num_steps']!r:.20}, {len(feedback)} feedback turns, "
                       f"the trace has {len(row['trace'])} steps", "stamps")
    last = -1
    for s, text in zip(row["trace"], feedback):
        m = _STAMP.match(text)
        if m is None or not text.startswith(hms(s["elapsed_s"])):
            out.add(f"{where} step {s['step']}", f"feedback stamp {m.group(0) if m else 'missing'} != "
                                                 f"{hms(s['elapsed_s'])}(the step's elapsed_s)", "stamps")
        if s["elapsed_s"] < last:
            out.add(f"{where} step {s['step']}", "stamps go backwards", "stamps")
        last = s["elapsed_s"]


def check_session(row: dict, where: str, out: Findings, ctx, index: int | None):
    """Every check of one session row; returns its episode row and the session row rebuilt
    from it, or None when the row is too broken to check further."""
    if not _shape_ok(row, where, out):
        return None
    ep = guarded(episode_row, where, out, row)
    if not ep or not guarded(check_episode, where, out, ep, where, out, ctx, index):
        return None
    if ctx.timestamps:
        guarded(check_stamps, where, out, row, where, out)
    want = guarded(session_row, where, out, ep, ctx.timestamps)
    if not want:
        return None
    if row != want:
        out.add(where, row_diff(row, want, "the trace's"), "code_and_feedback")
    return ep, want


def _ahead(ctx, index: int, row: dict):
    """validate_ahead.Ahead of plan session `index` where `row` is identical to the plan's and
    the plan's passed every check, else None."""
    found = ctx.rebuilds.verdicts(index) if ctx.rebuilds is not None else None
    if found is None:
        return None
    (_, want, _), ahead = found
    return ahead if ahead.clean and identical(row, want) else None


class BatchChecks:
    """Per batch of `size` rows of sessions.jsonl: its findings by mechanical check, its ids
    and its QA accumulator (qa._Acc)."""

    def __init__(self, size: int):
        self.size = size
        self.failures, self.accs, self.ids = defaultdict(Counter), defaultdict(_Acc), defaultdict(list)
        self.count = 0          # batches seen

    def _batch(self, n: int) -> int:
        k = (n - 1) // self.size
        self.count = max(self.count, k + 1)
        return k

    def failed(self, where: str, what: str, check: str) -> None:
        m = re.match(rf"{re.escape(SESSIONS_FILE)}:(\d+)", where)
        if m:
            self.failures[self._batch(int(m.group(1)))][check] += 1

    def add(self, n: int, row: dict | None, checked: tuple | None, judged=None) -> None:
        """Row n of the file; checked = (episode row, rebuilt session row) when its checks ran
        (the QA figures count the rebuilt messages: a row that differs is a finding already).
        `judged`: those figures worked out ahead (validate_ahead), taken where no earlier row of
        the batch has this id (a session's windows are judged against the unworthy steps of every
        episode of the batch with its id)."""
        k = self._batch(n)
        rid = row.get("id") if row is not None else None
        ahead = judged is not None and rid not in self.ids[k]
        self.ids[k].append(rid)
        if checked is not None and ahead:
            self.accs[k].merge(judged)
            self.accs[k].unworthy |= judged.unworthy
        elif checked is not None:
            self.accs[k].episode(checked[0])
            self.accs[k].multiturn(checked[1])


def check_sessions_file(data: Path, ctx, held: set, out: Findings, batch_size: int, each=None,
                        lines: range | None = None):
    """Check every session of a dataset's sessions.jsonl and its validation file, in plan order;
    returns (stats accumulator, BatchChecks of sessions.jsonl's rows: the batches cut that file).
    each(row, want_id, checked, ahead), when given, sees every row (checked as BatchChecks.add takes it;
    ahead: its validate_ahead.Ahead where it was taken, else None);
    validate's (`each` given) also compares each session in its place with the plan's rebuild
    (generate's QA reports, which read the same files, need not rebuild the run a second time).
    `lines`: check only these lines of sessions.jsonl (the files are still read in order); the
    BatchChecks of their batches are whole, the rest are not (see batch_checks)."""
    acc, checks = StatsAccumulator(), BatchChecks(batch_size)
    out.listener = checks.failed
    try:
        for path, n, row, index in record_rows(data, "sessions", ctx, out):
            if lines is not None and not (path.name == SESSIONS_FILE and n in lines):
                continue
            where = f"{path.name}:{n}"
            checked = ahead = None
            if row is not None:
                want_id = f"{ctx.id_prefix}{index:06d}"
                in_order = row.get("id") == want_id
                if not in_order:
                    out.add(where, f"session {row.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)", "ids_and_task")
                # a row identical to the plan's, whose checks found nothing, takes the verdicts worked out ahead
                ahead = _ahead(ctx, index, row) if in_order else None
                # (taken: the session row check_session rebuilds equals the plan's, and so this row)
                checked = (ahead.episode, row) if ahead is not None else \
                    check_session(row, where, out, ctx, index if in_order else None)
                if checked is not None:
                    acc.add(checked[0])
                    if combo_of(checked[0]) in held:
                        out.add(where, f"held-out combo {combo_of(checked[0])[:3]} appears in a training file", "ids_and_task")
                if each is not None:
                    if in_order and ctx.plan is not None:
                        guarded(plan_row, where, out, ctx, index, row, where, out, True)
                    each(row, want_id, checked, ahead)
            if ctx.scan is not None:       # (an Ahead's episode row may be its stats' fields alone: not measured)
                ctx.scan.add_row(row, checked and checked[0] if ahead is None else None, ahead and ahead.measured)
            if path.name == SESSIONS_FILE:
                checks.add(n, row, checked, ahead and ahead.judged)
    finally:
        out.listener = None
    return acc, checks


def check_sessions_dir(data: Path, ctx, held: set, out: Findings):
    """sessions.jsonl, its batches and its QA reports; returns the stats accumulator."""
    stats = ctx.stats
    size = stats.get("batch_size")
    if type(size) is not int or size < 1:
        out.add("stats.json", f"batch_size must be a positive integer, got {size!r:.20}", "stats")
        size = 100
    windows = WindowChecks(data, ctx, out)
    acc, checks = check_sessions_file(data, ctx, held, out, size, windows.check)
    windows.finish(acc)
    check_batches(data, stats, size, out)
    for k, report in enumerate(batch_reports(checks, stats)):
        for path, text in ((data / QA_DIR / f"batch_{k:03d}.json", dumps_report(report)),
                           (data / QA_DIR / f"batch_{k:03d}.md", report_markdown(report))):
            try:
                same = path.read_text(encoding="utf-8") == text
            except (OSError, UnicodeDecodeError):
                out.add(f"{QA_DIR}/{path.name}", "missing or unreadable", "derived")
                continue
            if not same:
                out.add(f"{QA_DIR}/{path.name}", f"differs from the QA report of batch {k}'s rows as they are now", "derived")
    return acc


class WindowChecks:
    """The chat windows of the sessions (sft_multiturn.jsonl and its validation file), in
    lockstep with sessions.jsonl: each session's windows rebuilt from its episode row and
    compared; the figures of the sessions and the windows for stats.json."""

    def __init__(self, data: Path, ctx, out: Findings):
        chats = SESSION_FILES["sft_multiturn"]
        self.ctx, self.out = ctx, out
        self.parts = [(data / name, Peek(rows(data / name, out))) for name in (chats, validation_file(chats))]
        self.sessions = [SESSIONS_FILE, validation_file(SESSIONS_FILE)]
        self.figures = {name: [] for name in self.sessions + [path.name for path, _ in self.parts]}

    def check(self, row: dict, want_id: str, checked, ahead=None) -> None:
        """`ahead`: the session's validate_ahead.Ahead (its windows and their figures), else made here."""
        part = int(is_validation(str(row.get("task_id")), self.ctx.validation_frac))
        path, peek = self.parts[part]
        expected = None
        if checked is not None:
            if ahead is not None:
                made, (session, windows) = ahead.windows, ahead.figures
            else:
                made = guarded(multiturn_rows, want_id, self.out, checked[0], self.ctx.timestamps, self.ctx.max_tokens)
                session, windows = chat_figure(checked[1]), made and map(chat_figure, made)
            self.figures[self.sessions[part]].append(session)
            if made:
                expected = (made,)
                self.figures[path.name] += windows
        check_multiturn(peek.take(), peek, path, want_id, expected, self.out)

    def finish(self, acc) -> None:
        for path, peek in self.parts:
            if peek.head is not None:
                self.out.add(f"{path.name}:{peek.head[0]}", "more rows than sessions in the sessions files", "rows_and_schema")
        for name, figures in self.figures.items():
            acc.add_chat(name, figures)


def check_batches(data: Path, stats: dict, size: int, out: Findings) -> None:
    """batches/ holds exactly the files stats.json lists, in order, each `size` sessions but
    the last, and their concatenation is sessions.jsonl."""
    listed = [f for f in stats["files"] if f.startswith(f"{BATCH_DIR}/")]
    on_disk = sorted(f"{BATCH_DIR}/{p.name}" for p in (data / BATCH_DIR).glob("*")) if (data / BATCH_DIR).is_dir() else []
    if on_disk != listed:
        out.add(BATCH_DIR, f"holds {on_disk[:3]}... ({len(on_disk)} files), stats.json lists {len(listed)}", "files")
        return
    whole = open(data / SESSIONS_FILE, "rb")
    with whole:
        for k, name in enumerate(listed):
            rows_in, same = _next_part(data / name, whole)
            if name != f"{BATCH_DIR}/batch_{k:03d}.jsonl" or (rows_in != size and k != len(listed) - 1):
                out.add(name, f"batch {k} should be {BATCH_DIR}/batch_{k:03d}.jsonl of {size} sessions "
                              f"(it holds {rows_in})", "files")
            if not same:
                out.add(name, f"is not bytes {k * size}.. of {SESSIONS_FILE}: the batches do not concatenate to it", "files")
                return
        if whole.read(1):
            out.add(SESSIONS_FILE, "holds more than its batches' concatenation", "files")


PART_CHUNK = 1 << 20


def _next_part(path: Path, whole) -> tuple[int, bool]:
    """(lines of the file at `path`, whether its bytes are the next ones of the open file `whole`), read in
    chunks: a batch is ~14 MB of kernelinfer's sessions, and reading it and its share of sessions.jsonl whole
    made the peak RSS of `validate` 28 MB higher than generate's. `whole` is read on by the file's length in
    every case (as reading it whole would), unless a chunk differs: the caller stops there."""
    lines = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(PART_CHUNK), b""):
            lines += chunk.count(b"\n")
            if whole.read(len(chunk)) != chunk:
                return lines + sum(c.count(b"\n") for c in iter(lambda: fh.read(PART_CHUNK), b"")), False
    return lines, True


def write_qa_reports(out: Path, stats: dict, workers: int = 1, written=None, plan=None) -> list[dict]:
    """Check every session of out/sessions.jsonl (and its validation file) and write each batch's
    report (json and md); `workers` processes check a share of the batches each. `written`:
    generate's checks of the rows as its workers built them (validate_written.WrittenChecks),
    taken where the files are exactly those rows (the same reports). `plan`: generate's plan of
    the run, taken where it is the manifest's (validate.run_plan), instead of making it again."""
    held = {combo_of(row) for _, row in read_jsonl(out / FILES["holdout"])}
    ctx = Context(stats, read_manifest(out), plan)
    checks = written.checks(out, ctx, held) if written is not None else None
    if checks is None:
        checks = batch_checks(out, ctx, held, stats["batch_size"], stats["files"][SESSIONS_FILE]["rows"], workers)
    reports = batch_reports(checks, stats)
    (out / QA_DIR).mkdir(exist_ok=True)
    for k, r in enumerate(reports):
        write_text_atomic(out / QA_DIR / f"batch_{k:03d}.json", dumps_report(r))
        write_text_atomic(out / QA_DIR / f"batch_{k:03d}.md", report_markdown(r))
    return reports


_CHECKING: tuple = ()      # (data, ctx, held, batch size) for a forked pool's batch_checks


def batch_checks(data: Path, ctx, held: set, size: int, rows: int, workers: int) -> BatchChecks:
    """check_sessions_file's BatchChecks of the `rows` lines of sessions.jsonl, from `workers`
    forked processes that each check a contiguous share of the batches (each reads the files
    through, to keep the plan order; a batch's figures come from the process that checked it)."""
    from .pools import fork_pool, result, running, submitted
    global _CHECKING
    batches = -(-rows // size)
    shares = [range(batches * i // workers, batches * (i + 1) // workers) for i in range(workers)]
    shares = [b for b in shares if b]
    _CHECKING = (data, ctx, held, size)      # set before the fork: the pool's workers hold it
    try:
        with running(lambda: fork_pool(len(shares)) if len(shares) > 1 else None) as pool:
            if pool is None:
                return check_sessions_file(data, ctx, held, Findings(1), size)[1]
            parts = result(submitted(pool.map_async, _check_share, shares, chunksize=1))
    finally:
        _CHECKING = ()
    whole = BatchChecks(size)
    for share, part in zip(shares, parts):
        for k in share:
            for mine, theirs in ((whole.failures, part.failures), (whole.accs, part.accs), (whole.ids, part.ids)):
                if k in theirs:
                    mine[k] = theirs[k]
    whole.count = batches
    return whole


def _check_share(share: range) -> BatchChecks:
    data, ctx, held, size = _CHECKING
    lines = range(share.start * size + 1, share.stop * size + 1)
    return check_sessions_file(data, ctx, held, Findings(1), size, lines=lines)[1]
