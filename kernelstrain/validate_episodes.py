"""validate's file checks of the episodes layout (layouts.EPISODES.check): episodes.jsonl and
the chat files derived from it, streamed in lockstep — each episode checked and compared with
the plan's, its chat, step and prompt-completion rows rebuilt and compared row by row.
"""
from __future__ import annotations

from pathlib import Path

from .episodes import chat_rows
from .stats import StatsAccumulator
from .training import chat_figure, is_validation, prompt_completion_rows
from .validate import Context, Findings, Peek, check_episode, combo_of, first_index, guarded, row_diff, rows
from .validate_derived import plan_row
from .writers import FILES, SPLIT_CONFIGS, VALIDATION, validation_file


def check_training_files(data: Path, ctx: Context, held: set, out: Findings):
    """episodes, sft_multiturn and sft_steps in lockstep: each episode checked, its chat rows
    rebuilt and compared; returns the stats accumulated from the valid episodes."""
    acc = StatsAccumulator()
    names = {**FILES, **{k + VALIDATION: validation_file(FILES[k]) for k in SPLIT_CONFIGS}}
    ep_path = data / FILES["episodes"]
    # (train, validation) of each split config: path and row stream
    split = {k: [(data / names[k + v], Peek(rows(data / names[k + v], out))) for v in ("", VALIDATION)]
             for k in SPLIT_CONFIGS}
    start = first_index(ctx.stats)
    prefix = f"{ctx.stats['profile']}-s{ctx.stats['seed']}-"
    for n, ep in rows(ep_path, out):
        where = f"{ep_path.name}:{n}"
        index = start + n - 1
        want_id = f"{prefix}{index:06d}"
        in_order = ep is not None and ep.get("id") == want_id
        if ep is not None and not in_order:
            out.add(where, f"episode {ep.get('id')!r:.40}, expected {want_id} here (lines swapped, missing or added)", "ids_and_task")
        valid = ep is not None and guarded(check_episode, where, out, ep, where, out, ctx, index if in_order else None)
        if valid:
            acc.add(ep)
            if combo_of(ep) in held:
                out.add(where, f"held-out combo {combo_of(ep)[:3]} appears in a training file", "ids_and_task")
        part = int(isinstance(ep, dict) and is_validation(str(ep.get("task_id")), ctx.validation_frac))
        (mt_path, mt_rows), (st_path, st_rows), (pc_path, pc_rows) = (split[k][part] for k in SPLIT_CONFIGS)
        mt = mt_rows.take()
        expected = None
        if valid and in_order:
            source = guarded(plan_row, where, out, ctx, index, ep, where, out) or ep
            expected = guarded(chat_rows, where, out, source, ctx.timestamps, ctx.max_tokens) or None
        check_multiturn(mt, mt_rows, mt_path, want_id, expected, out)
        check_steps(st_rows, st_path, want_id, expected, out)
        pcs = expected and prompt_completion_rows(expected[1])
        check_steps(pc_rows, pc_path, want_id, expected and (None, pcs), out)
        if expected:
            for path, made in zip((mt_path, st_path, pc_path), (*expected, pcs)):
                acc.add_chat(path.name, map(chat_figure, made))
    for path, peek in (p for k in SPLIT_CONFIGS for p in split[k]):
        if peek.head is not None:
            out.add(f"{path.name}:{peek.head[0]}", "more rows than episodes and steps in episodes.jsonl", "rows_and_schema")
    return acc




def check_multiturn(mt, mt_rows: "Peek", path: Path, want_id: str, expected, out: Findings) -> None:
    """The multi-turn window rows of one episode (mt is the first, already taken): as many as
    the rebuilt windows, each equal to its rebuilt row."""
    if mt is None:
        out.add(f"{path.name}:EOF", f"no row for episode {want_id}", "code_and_feedback")
        return
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


def check_steps(st_rows: Peek, path: Path, want_id: str, expected, out: Findings) -> None:
    """The step rows of one episode: as many as its steps, each the rebuilt row."""
    want_rows = expected[1] if expected is not None else None
    got = []
    while st_rows.head is not None and (st_rows.head[1] is None or st_rows.head[1].get("episode_id") == want_id) \
            and (want_rows is None or len(got) < len(want_rows)):
        got.append(st_rows.take())
    if want_rows is None:
        return
    for k, want in enumerate(want_rows):
        if k >= len(got):
            line = st_rows.head[0] if st_rows.head is not None else "EOF"
            out.add(f"{path.name}:{line}", f"missing the row of {want['id']} ({len(got)} of {len(want_rows)} step rows found)", "code_and_feedback")
            return
        n, row = got[k]
        if row is None:
            continue
        if row.get("id") != want["id"]:
            out.add(f"{path.name}:{n}", f"row {row.get('id')!r:.40}, expected {want['id']} here (lines swapped, missing or added)", "ids_and_task")
        elif row != want:
            out.add(f"{path.name}:{n}", row_diff(row, want), "code_and_feedback")
