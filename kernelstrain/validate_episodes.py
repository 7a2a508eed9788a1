"""validate's file checks of the episodes layout (layouts.EPISODES.check): episodes.jsonl and
the chat files derived from it, streamed in lockstep — each episode checked and compared with
the plan's, its chat, step and prompt-completion rows rebuilt and compared row by row.
"""
from __future__ import annotations

from pathlib import Path

from .episodes import chat_rows
from .stats import StatsAccumulator
from .training import chat_figure, is_validation, prompt_completion_rows
from .qa import episode_qa
from .validate import (MALFORMED, Context, Findings, Peek, check_episode, combo_of, guarded, identical, identical_rows,
                       record_rows, row_diff, rows)
from .validate_derived import plan_row
from .writers import FILES, RECORDS, SPLIT_CONFIGS, validation_file

CHAT_SPLITS = tuple(k for k in SPLIT_CONFIGS if k not in RECORDS)     # an episode's chat rows, by config


def check_training_files(data: Path, ctx: Context, held: set, out: Findings):
    """episodes, sft_multiturn and sft_steps in lockstep: each episode checked, its chat rows
    rebuilt and compared; returns the stats accumulated from the valid episodes."""
    acc = StatsAccumulator()
    # (train, validation) of each chat config: path and row stream
    split = {k: [(data / name, Peek(rows(data / name, out))) for name in (FILES[k], validation_file(FILES[k]))]
             for k in CHAT_SPLITS}
    for ep_path, n, ep, index in record_rows(data, "episodes", ctx, out):
        where = f"{ep_path.name}:{n}"
        want_id = f"{ctx.id_prefix}{index:06d}"
        in_order = ep is not None and ep.get("id") == want_id
        if ep is not None and not in_order:
            out.add(where, f"episode {ep.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)", "ids_and_task")
        # a row identical to the plan's, whose checks found nothing, takes the verdicts worked out ahead
        ahead = _ahead(ctx, index, ep) if in_order else None
        if in_order and ahead is None and ctx.rebuilds is not None:
            ctx.rebuilds.prepare(index)       # the plan's rebuild first: the row checks find its simulations
        valid = ep is not None and (ahead is not None or
                                    guarded(check_episode, where, out, ep, where, out, ctx, index if in_order else None))
        if valid:
            acc.add(ep)
            if combo_of(ep) in held:
                out.add(where, f"held-out combo {combo_of(ep)[:3]} appears in a training file", "ids_and_task")
        part = int(isinstance(ep, dict) and is_validation(str(ep.get("task_id")), ctx.validation_frac))
        (mt_path, mt_rows), (st_path, st_rows), (pc_path, pc_rows) = (split[k][part] for k in CHAT_SPLITS)
        mt = mt_rows.take()
        expected = None
        if valid and in_order:
            planned = guarded(plan_row, where, out, ctx, index, ep, where, out)
            expected = (planned if planned else guarded(chat_rows, where, out, ep, ctx.timestamps, ctx.max_tokens)) or None
        mts = check_multiturn(mt, mt_rows, mt_path, want_id, expected, out)
        sts = check_steps(st_rows, st_path, want_id, expected, out)
        if valid and ctx.judged is not False:    # qa.json's figures from the rows read here (see Context.judged)
            try:
                judged = ahead.judged if ahead is not None and ahead.judged is not None and expected \
                    and identical_rows(mts, expected[0]) and identical_rows(sts, expected[1]) else \
                    episode_qa({"episodes": [ep], "sft_multiturn": [r for _, r in mts if r is not None],
                                "sft_steps": [r for _, r in sts if r is not None]})
                ctx.judged = judged if ctx.judged is None else ctx.judged.merge(judged)
            except MALFORMED:
                ctx.judged = False
        if ctx.scan is not None:
            ctx.scan.add_row(ep, ahead=ahead and ahead.measured)
        pcs = expected and prompt_completion_rows(expected[1])
        check_steps(pc_rows, pc_path, want_id, expected and (None, pcs), out)
        if expected:
            figures = ahead.figures if ahead is not None else [map(chat_figure, made) for made in (*expected, pcs)]
            for path, figure in zip((mt_path, st_path, pc_path), figures):
                acc.add_chat(path.name, figure)
    for path, peek in (p for k in CHAT_SPLITS for p in split[k]):
        if peek.head is not None:
            out.add(f"{path.name}:{peek.head[0]}", "more rows than episodes and steps in episodes.jsonl", "rows_and_schema")
    return acc




def _ahead(ctx: Context, index: int, ep):
    """validate_ahead.Ahead of plan episode `index` where the row `ep` is identical to the plan's
    and the plan's passed every check, else None."""
    found = ctx.rebuilds.verdicts(index) if ctx.rebuilds is not None and isinstance(ep, dict) else None
    if found is None:
        return None
    (_, want, _), ahead = found
    return ahead if ahead.clean and identical(ep, want) else None


def check_multiturn(mt, mt_rows: "Peek", path: Path, want_id: str, expected, out: Findings) -> list:
    """The multi-turn window rows of one episode (mt is the first, already taken): as many as
    the rebuilt windows, each equal to its rebuilt row. Returns the (line, row) it took."""
    if mt is None:
        out.add(f"{path.name}:EOF", f"no row for episode {want_id}", "code_and_feedback")
        return []
    got = [mt]
    while mt_rows.head is not None and mt_rows.head[1] is not None and mt_rows.head[1].get("id") == want_id \
            and (expected is None or len(got) < len(expected[0])):
        got.append(mt_rows.take())
    for k, (n, row) in enumerate(got):
        if row is None:
            continue
        where = f"{path.name}:{n}"
        if row.get("id") != want_id:
            out.add(where, f"row of episode {row.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)", "ids_and_task")
        elif expected is not None and row != expected[0][k]:
            out.add(where, row_diff(row, expected[0][k]), "code_and_feedback")
    if expected is not None and len(got) < len(expected[0]):
        out.add(f"{path.name}:{got[-1][0]}", f"episode {want_id} has {len(got)} window rows, expected {len(expected[0])}", "code_and_feedback")
    return got


def check_steps(st_rows: Peek, path: Path, want_id: str, expected, out: Findings) -> list:
    """The step rows of one episode: as many as its steps, each the rebuilt row. Returns the
    (line, row) it took."""
    want_rows = expected[1] if expected is not None else None
    got = []
    while st_rows.head is not None and (st_rows.head[1] is None or st_rows.head[1].get("episode_id") == want_id) \
            and (want_rows is None or len(got) < len(want_rows)):
        got.append(st_rows.take())
    if want_rows is None:
        return got
    for k, want in enumerate(want_rows):
        if k >= len(got):
            line = st_rows.head[0] if st_rows.head is not None else "EOF"
            out.add(f"{path.name}:{line}", f"missing the row of {want['id']} ({len(got)} of {len(want_rows)} step rows found)", "code_and_feedback")
            return got
        n, row = got[k]
        if row is None:
            continue
        if row.get("id") != want["id"]:
            out.add(f"{path.name}:{n}", f"row {row.get('id')!r:.40}, expected {want['id']} here (lines swapped, missing or added)", "ids_and_task")
        elif row != want:
            out.add(f"{path.name}:{n}", row_diff(row, want), "code_and_feedback")
    return got
