"""`generate`: plan -> episodes (in parallel, in order) -> streamed files -> stats and card.

Output is byte-identical for any worker count: workers compute episodes, the parent
writes them in index order. `--shard I/N` writes a contiguous slice of the episodes;
`merge` concatenates the slices back into the single-run bytes.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from . import solution_store
from .episodes import dumps
from .errors import UsageError, fault_point
from .contamination import (Incremental, Targets, Unmatched, boilerplate, keep_searched, searching, solution_keys,
                            solutions_ahead)
from .dataset import set_up_frozen
from .holdout import holdout_rows, split_figures, with_contamination, write_holdout
from .layouts import LAYOUTS, all_files, streamed_keys
from .manifest import Manifest, write_manifest
from .plan import Plan, make_plan, rooms_ahead
from .pools import ordered_map, running, worker_signals
from .profiles import DEFAULT_PROFILE, Profile, profile_tables
from .progress import Bar, quiet
from .qa import dumps_qa, report
from .stats import StatsAccumulator, dumps_stats, stats_fields
from .reading import read_stats
from .sessions import QA_DIR
from .safety import check_output
from .training import CHAT_KEYS, chat_figure, chat_settings, in_plan_order, split_rows
from .validate_sessions import write_qa_reports
from .validate_written import WrittenChecks, judge as judge_written
from .writers import (JOURNAL, MARKER, VALIDATION, Staging, StreamFile, check_out_dir, check_prefix, write_error,
                      write_text_atomic)

PACKAGE = Path(__file__).resolve().parent     # the installed package: its data files are read, never written


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """'I/N' with 0 <= I < N."""
        try:
            i, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise UsageError(f"--shard must look like I/N (e.g. 0/4), got {text!r}") from None
        if n < 1 or not 0 <= i < n:
            raise UsageError(f"--shard {text}: need 0 <= I < N")
        return cls(i, n)

    def range(self, total: int) -> range:
        return range(total * self.index // self.count, total * (self.index + 1) // self.count)

    def __str__(self):
        return f"{self.index}/{self.count}"


# -- worker side ---------------------------------------------------------------------
_PLAN: Plan | None = None
_SCAN: "Incremental | Unmatched | None" = None   # the holdout's contamination, measured as episodes are built
_JUDGE = False                       # each session row checked as it is built (validate_written)
_HANDOVER: str | None = None         # where an early pool's workers find the matcher once the parent has built it


def _init_worker(profile: Profile, seed: int, scan: bool, judge: bool = False, handover: str | None = None) -> None:
    """A worker's plan, from the resolved profile itself (never re-read from a path that may
    have changed since the run started); a forked worker keeps the parent's plan. `handover`:
    the worker was forked before the contamination matcher was built (generate's early pool):
    it sends its candidates unscanned until the parent writes the matcher there (_scan_part)."""
    global _PLAN, _SCAN, _JUDGE, _HANDOVER
    worker_signals()
    _JUDGE, _HANDOVER = judge, handover
    if _PLAN is None or (_PLAN.profile, _PLAN.seed) != (profile, seed):
        _PLAN = make_plan(profile, seed)
    if handover is not None:
        _SCAN = Unmatched()
    elif scan and _SCAN is None:     # a forked worker inherits the parent's; a spawned one builds its own
        _SCAN = contamination_scan(_PLAN)


def _scan_part(ep: dict):
    """The episode's contamination part (Incremental.part; None where the run measures none), the
    matcher read first where the parent has handed it over since the last episode."""
    global _SCAN
    if isinstance(_SCAN, Unmatched) and os.path.exists(_HANDOVER):
        with open(_HANDOVER, "rb") as f:
            _SCAN = _SCAN.handed(pickle.load(f))
    return _SCAN.part(ep) if _SCAN is not None else None


def hand_over(scan: Incremental, path: str) -> None:
    """Write the scan's matcher where an early pool's workers look for it (whole or not at all: renamed
    into place)."""
    with open(path + ".part", "wb") as f:
        pickle.dump(scan.matcher, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".part", path)


def contamination_scan(plan: Plan, workers: int = 1, lines: dict | None = None) -> Incremental:
    """The plan's held-out rows (`lines`: {split: its holdout_rows}, where the caller has them),
    ready to measure training candidates against (see Incremental)."""
    lines = lines or held_out_lines(plan)
    return Incremental(Targets({split: [json.loads(line) for line in lines[split]] for split in plan.splits}, workers))


def held_out_lines(plan: Plan) -> dict:
    """{split: its holdout_rows}: computed once a run, for the contamination measure and the files, and kept in
    solution_store between runs: the rows are a function of the profile's tables (the splits' tasks, the
    baselines' search caps, the noise's key) and of the package, never of the run's seed, so every seed's run
    of a profile wrote the same rows again (~0.3 s of the default profile's set-up)."""
    key = None if solution_store.store_dir() is None else (
        "holdout_rows", _sha(json.dumps(profile_tables(plan.profile), sort_keys=True)),
        _sha(json.dumps({split: [t.key for t in tasks] for split, tasks in plan.splits.items()})))
    stored = key and solution_store.get(key)
    if stored:
        return json.loads(stored)
    lines = {split: list(holdout_rows(plan, split)) for split in plan.splits}
    if key:
        solution_store.put(key, json.dumps(lines))
    return lines


def _encode(lines: list[str]) -> bytes:
    """Each line and its newline, encoded: one join (a final empty element gives the last newline; no
    line is copied to add its own, which cost ~40% more of an episode's ~300 KB)."""
    return "\n".join([*lines, ""]).encode("utf-8")


def written_checks(layout) -> bool:
    """The layout's batch QA reports take the workers' checks of the rows they build
    (validate_written; the sessions layout's)."""
    return layout.batch_qa is write_qa_reports


def _work(index: int):
    """One episode's blocks of encoded lines and their row counts, one per file of its layout
    (layouts.streamed_keys order), its stats (with its chat rows' figures), its contamination part
    (Incremental.part; None when the run does not measure it as it goes), its QA figures
    (the layout's `judge` of the rows as written; None where the layout has none) and, where
    the run asks it (_JUDGE), validate_written.judge's verdict of its record row."""
    out = _PLAN.profile.output
    layout = LAYOUTS[out.layout]
    rows, ep = layout.rows(_PLAN, index)
    rows = split_rows(rows, ep["task_id"], out.validation_frac)
    names = all_files(layout)
    slim = {**stats_fields(ep), "chat": {names[k]: [chat_figure(r) for r in rs] for k, rs in rows.items() if k in CHAT_KEYS}}
    keys = streamed_keys(layout)
    blocks = tuple((_encode([dumps(r) for r in rows.get(k, ())]), len(rows.get(k, ()))) for k in keys)
    # the rows themselves are the rows as written: each holds JSON's own types alone (str keys, lists,
    # no tuples), so json.loads gives back equal rows (tests/test_generation_judge.py); decoding them
    # again cost ~6% of an episode
    judged = layout.judge and layout.judge({k: list(rows.get(k, ())) for k in keys})
    verdict = None
    if _JUDGE:      # the record row: in its split's file (one of the first streamed key's two)
        verdict = next((judge_written(_PLAN, index, block, names[k]) for k, (block, count) in zip(keys, blocks)
                        if count == 1 and k in (layout.streamed[0], layout.streamed[0] + VALIDATION)), None)
    return blocks, slim, _scan_part(ep), judged, verdict


def _work_chunk(indices: range) -> list:
    return [_work(i) for i in indices]


EPISODES_A_TASK = 4     # episodes a pool task computes (fewer round trips)
TASKS_AHEAD = 4         # tasks queued a worker: enough to keep it busy, few enough to bound memory
# tasks handed to an early pool before the parent asks for the first result: its workers build episodes while the
# parent writes the held-out rows and builds the contamination matcher (~1 s on idle cores after the workers' share
# of the held-out search; an episode ~20 ms, ~350 KB of rows held until written: 64 episodes ~22 MB at most)
TASKS_PRIMED = 8
PRIMED_MAX = 16


def iter_episodes(plan: Plan, indices: range, workers: int, scan: Incremental | None = None, judge: bool = False):
    """Yield each index's encoded rows (see _work), in index order; with `scan`, each
    episode's contamination part too; with `judge`, its record row's verdict."""
    global _PLAN, _SCAN, _JUDGE
    _PLAN, _SCAN, _JUDGE = plan, scan, judge
    if workers <= 1 or len(indices) < 2:
        yield from map(_work, indices)
        return
    with episode_pool(plan, workers, scan is not None, judge) as pool:
        yield from pooled(pool, indices, workers)


def episode_pool(plan: Plan, workers: int, scan: bool, judge: bool, handover: str | None = None):
    """pools.running's pool of `workers` episode workers (forked where the platform can: they share the
    parent's plan and scan, the module globals set before this is called)."""
    method = "fork" if can_fork() else "spawn"
    # SIGINT / SIGTERM stop the pool promptly, never inside its own locks (pools.running)
    return running(lambda: multiprocessing.get_context(method).Pool(
        workers, initializer=_init_worker, initargs=(plan.profile, plan.seed, scan, judge, handover)))


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def pooled(pool, indices: range, workers: int, primed: int = 0):
    """The episodes of `indices` (_work's tuples, in order) computed by an episode pool, `primed` tasks
    handed to it at once (pools.ordered_map)."""
    chunks = (indices[i:i + EPISODES_A_TASK] for i in range(0, len(indices), EPISODES_A_TASK))
    return itertools.chain.from_iterable(ordered_map(pool, _work_chunk, chunks, TASKS_AHEAD * workers, primed))


@contextlib.contextmanager
def episodes_ahead(plan: Plan, todo: range, workers: int, fresh: bool, judge: bool):
    """(the held-out rows (held_out_lines), the contamination measure (a fresh run's; else None), the
    episodes of `todo` (iter_episodes' items)). With an early pool (more than one worker, fork, a spare core), the workers are
    forked first: they search the held-out solutions, then build episodes, while this process writes the
    held-out rows, finds the boilerplate and builds the matcher from the solutions (~2 s on idle cores,
    where both workers used to wait); the matcher is then handed to them by file (hand_over), and the
    candidates of the episodes they built before it came are scanned here (contamination.Waiting). Tally's
    figures are maxima, unions and distinct counts: where a candidate is scanned, and in which order the
    parts are merged, changes nothing."""
    if workers <= 1 or len(todo) < 2 or not can_fork() or not spare_core(workers):
        with solutions_ahead(solution_keys(t for ts in plan.splits.values() for t in ts) if fresh else [], workers):
            held = held_out_lines(plan)
            if fresh:
                boilerplate()
        scan = contamination_scan(plan, workers, held) if fresh else None
        # the set-up (plan, matcher, caches) frozen before the pool forks: see dataset.set_up_frozen
        with set_up_frozen(), closing(iter_episodes(plan, todo, workers, scan, judge)) as items:
            yield held, scan, items
        return
    global _PLAN, _SCAN, _JUDGE
    _PLAN, _SCAN, _JUDGE = plan, None, judge
    folder = tempfile.mkdtemp(prefix="kernelstrain-")
    handover = os.path.join(folder, "matcher.pickle")
    try:
        with set_up_frozen(), episode_pool(plan, workers, fresh, judge, handover if fresh else None) as pool:
            # handed to the pool first: its workers search before they build episodes
            search = searching(pool, solution_keys(t for ts in plan.splits.values() for t in ts), workers) \
                if fresh else None
            items = pooled(pool, todo, workers, min(TASKS_PRIMED * workers, PRIMED_MAX))
            held = held_out_lines(plan)
            scan = None
            if fresh:
                boilerplate()
                keep_searched(search)
                scan = contamination_scan(plan, workers, held)
                hand_over(scan, handover)
            yield held, scan, items     # (an exception in the body stops the pool: pools.running)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def spare_core(workers: int) -> bool:
    """Whether the early pool pays: a core beyond the workers for the parent's set-up (held-out rows,
    boilerplate, matcher) and its scans of the episodes built before the hand-over. Where the workers
    take every core, the parent's work of the early pool only takes turns with theirs on the same
    cores, and the hand-over and the unscanned episodes' round trips are extra (issue 32: the lead's
    idle 2-core bench, one run each, 1.67x before the early pool and 1.62x with it; paired here at
    load ~18, 300 default episodes, 2 workers: parent + workers CPU 18.76 -> 17.65 s, the parent's
    peak RSS 138 -> 124 MB; docs/speed_issue32_s13.md section 2)."""
    return default_workers() > workers


CHECKPOINT_SECONDS = 2.0


def _checkpoint_episodes() -> int:
    """Checkpoint at least every this many episodes (tests lower it to resume mid-file)."""
    try:
        return max(1, int(os.environ.get("KERNELSTRAIN_CHECKPOINT_EPISODES", "256")))
    except ValueError:
        return 256


def generate(profile: Profile, seed: int, out: Path, episodes: int | None = None, workers: int | None = None,
             shard: Shard | None = None, force: bool = False, progress: bool = True,
             resume: bool = False) -> dict:
    """Write the dataset of `profile` and `seed` into `out`; returns stats.json's content.

    The run is built in a hidden sibling directory and checkpointed; after an interruption
    `resume=True` finishes it (or says it is already complete) with the same bytes as an
    uninterrupted run. A plain rerun refuses to start over an interrupted one. `progress`:
    each phase's bar on stderr when it is a terminal."""
    with quiet(not progress):
        return _generate(profile, seed, out, episodes, workers, shard, force, resume)


def _generate(profile: Profile, seed: int, out: Path, episodes: int | None, workers: int | None,
              shard: Shard | None, force: bool, resume: bool) -> dict:
    total = check_episodes(profile, episodes)
    workers = check_workers(workers)
    indices = shard.range(total) if shard else range(total)
    if not indices:
        raise UsageError(f"--shard {shard} of {total} episodes holds no episode")
    check_output(out, [Path(profile.path)])
    manifest = Manifest(profile, seed)
    run_id = {"profile": profile.name, "profile_sha": _sha(json.dumps(profile_tables(profile), sort_keys=True)),
              "seed": seed, "episodes": total,
              "shard": str(shard) if shard else None}
    again = recovery_command(profile, seed, out, total, shard)
    stage = Staging(out)
    acc = StatsAccumulator()
    layout = LAYOUTS[profile.output.layout]
    keys, names = streamed_keys(layout), all_files(layout)
    if resume:
        state = _resume_state(stage, run_id, indices, again, keys)
        if state is None:
            return read_stats(out)
    if resume and "fresh" not in state:
        start = state["next"]
        files = _reopen(stage.dir, state, indices, acc, again, keys, names)
    else:
        fault_point("start")
        _fresh(stage, out, force, resume)
        start = indices.start
        files = {k: StreamFile(stage.dir / names[k]) for k in keys}
    rooms_ahead(profile, workers)          # (make_plan's costliest part, in the pool where there is one)
    plan = make_plan(profile, seed)
    todo = range(start, indices.stop)
    try:
        # resumable from here: setting up the contamination measure takes seconds. A resumed
        # run has episodes it does not build again: it measures the finished files instead.
        _checkpoint(stage, run_id, start, files)
        fresh = todo.start == indices.start
        # the QA figures summed as the episodes stream past (a resumed run's qa reads its files instead)
        # a fresh run's session rows checked as they are built, for the batch QA reports (validate_written)
        written = WrittenChecks(plan, profile.output.batch_size, todo.start) if fresh and written_checks(layout) else None
        # the held-out rows and the contamination measure (set up from the held-out solutions, searched in the
        # workers) made while the workers start on the episodes
        with episodes_ahead(plan, todo, workers, fresh, written is not None) as (held, scan, items):
            judged = _write_episodes(todo, items, files, stage, run_id, acc, scan, written)
        if todo.start != indices.start:
            judged = None
        for f in files.values():
            f.close()
        fault_point("data-closed")
        summaries = {names[k]: f.summary() for k, f in files.items()}
        with Bar("writing the held-out tasks"):
            summaries.update(write_holdout(plan, stage.dir, lines=held))
        fault_point("holdout-written")
        if layout.cut:
            summaries.update(layout.cut(stage.dir, profile.output.batch_size))
        holdout = with_contamination(split_figures(plan), stage.dir, layout, scan.result() if scan else None)
        stats = acc.result(profile, seed, len(plan.holdout), summaries, str(shard) if shard else None, holdout,
                           layout.name, profile.output.batch_size if layout.cut else None,
                           chat_settings(profile.output))
        if shard:
            stats["run"] = run_id
        finish(stage.dir, stats, manifest, judged, workers, written, plan)
        fault_point("stats-written")
        stage.swap(run_id)
    except OSError as e:
        if package_file(e):
            raise RuntimeError(f"cannot read {e.filename}, a data file of the installed package ({e.strerror}); "
                               f"{recovery_advice(stage, 'reinstall kernelstrain')}") from None
        raise UsageError(f"{write_error(out, e)}; {recovery_advice(stage)}") from None
    return stats


def package_file(e: OSError) -> bool:
    """The failed file is one of the installed package's own (a corpus, a calibration): a broken
    install, an internal error, not a full disk to free."""
    return bool(e.filename) and Path(os.fsdecode(e.filename)).resolve().is_relative_to(PACKAGE)


def recovery_advice(stage: Staging, fix: str = "free space") -> str:
    """What to do after a failed write: --resume only where a checkpoint exists to resume from
    (else a run that failed before its first checkpoint would loop on "holds no interrupted run")."""
    try:
        resumable = stage.journal() is not None
    except UsageError:
        resumable = False
    if resumable:
        return f"the partial run is kept: {fix} and rerun with --resume to finish it"
    stage.remove()
    return f"nothing was kept: {fix} and rerun the same command (with or without --resume)"


def check_episodes(profile: Profile, episodes: int | None) -> int:
    if episodes is None:
        return profile.episodes
    if episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {episodes}")
    if episodes > profile.episodes:
        raise UsageError(f"--episodes {episodes} is more than the profile's {profile.episodes:,} episodes "
                         f"(profile.episodes in {profile.path}; raise it there for a longer run)")
    return episodes


def check_workers(workers: int | None) -> int:
    """Worker processes: >= 1, capped at the cores this process may use (with a note)."""
    cores = default_workers()
    if workers is None:
        return cores
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers} (leave it out to use all {cores} cores)")
    if workers > cores:
        print(f"kernelstrain: note: --workers {workers} capped at the {cores} available core{'s' * (cores > 1)}",
              file=sys.stderr)
        return cores
    return workers


def recovery_command(profile: Profile, seed: int, out: Path, total: int, shard: Shard | None) -> str:
    """The command that starts this run over, for messages that refuse to resume it."""
    config = "" if Path(profile.path).resolve() == DEFAULT_PROFILE.resolve() else f" --config {profile.path}"
    part = f" --shard {shard}" if shard else ""
    return f"kernelstrain generate --seed {seed} --out {out}{config} --episodes {total}{part} --force"


def _fresh(stage: Staging, out: Path, force: bool, resume: bool = False) -> None:
    """Start the run over in a new staging directory; `resume`: one that holds no checkpoint."""
    if (stage.dir.exists() or stage.old.exists()) and not force and not resume:
        raise UsageError(f"{out} has an interrupted run (in {stage.dir.name}): finish it with --resume, "
                         "or start over with --force")
    check_out_dir(out, force, resumable=not resume)
    try:
        shutil.rmtree(stage.old, ignore_errors=True)
        stage.create()
        fault_point("staging-created")
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None


def _write_episodes(todo: range, items, files: dict, stage: Staging, run_id: dict,
                    acc: StatsAccumulator, scan: Incremental | None, written: WrittenChecks | None = None):
    """Stream the episodes of `todo` (`items`: iter_episodes' tuples, in order) into the staging files,
    checkpointing at whole-episode boundaries; returns the episodes' QA figures summed in plan order (None
    where the layout judges none). `written`: takes each record row's verdict (validate_written)."""
    bar = Bar("generate", len(todo), "episodes")
    judged = None
    every, last = _checkpoint_episodes(), time.monotonic()
    index = todo.start
    _checkpoint(stage, run_id, index, files)
    boundary = True
    try:
        for done, (blocks, slim, part, episode_judged, verdict) in enumerate(items, 1):
            boundary = False
            for f, block in zip(files.values(), blocks):
                f.write_block(*block)
            boundary = True
            acc.add(slim)
            if scan is not None:
                scan.add(part)
            if episode_judged is not None:
                judged = episode_judged if judged is None else judged.merge(episode_judged)
            if written is not None:
                written.add(verdict)
            index = todo.start + done
            fault_point("episode")
            bar.update(done, f"{sum(f.bytes for f in files.values()) / 1e6:,.1f} MB written")
            if done % every == 0 or time.monotonic() - last > CHECKPOINT_SECONDS:
                _checkpoint(stage, run_id, index, files)
                last = time.monotonic()
        bar.close()
    except BaseException:
        if boundary:     # else the last checkpoint stays: its prefix is still intact
            try:
                _checkpoint(stage, run_id, index, files)
            except OSError:
                pass
        raise
    _checkpoint(stage, run_id, index, files)
    return judged


def _sha(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()


def _checkpoint(stage: Staging, run_id: dict, next_index: int, files: dict) -> None:
    """Record how far the run got: episodes before next_index fill exactly these prefixes."""
    for f in files.values():
        f.flush()
    state = {**run_id, "phase": "write", "next": next_index, "files": {k: f.summary() for k, f in files.items()}}
    write_text_atomic(stage.dir / JOURNAL, json.dumps(state))
    fault_point("checkpoint")


def _resume_state(stage: Staging, run_id: dict, indices: range, again: str, keys: tuple) -> dict | None:
    """The checkpoint to continue from, or None when the run is (now) complete."""
    state = stage.journal()
    out = stage.out
    if state is None:
        done = _json_or_none(out / JOURNAL)
        if isinstance(done, dict) and done.get("phase") == "swap":
            _same_run(done, run_id, out, again)
            stage.finish_swap()          # killed after the rename: only the cleanup was left
            return None
        if (out / MARKER).exists():
            stats = read_stats(out)
            have = (stats.get("profile"), stats.get("seed"), stats.get("episodes"), stats.get("shard"))
            if have != (run_id["profile"], run_id["seed"], len(indices), run_id["shard"]):
                raise UsageError(f"--resume: {out} holds a complete dataset of another run "
                                 f"(profile {have[0]}, seed {have[1]}, {have[2]} episodes)")
            print(f"kernelstrain: note: {out} already holds this complete run; nothing to do", file=sys.stderr)
            return None
        return {"fresh": True}     # killed before its first checkpoint, or never started: start it now
    _same_run(state, run_id, out, again)
    if state.get("phase") == "swap":
        stage.finish_swap()
        return None
    ok = (state.get("phase") == "write" and isinstance(state.get("next"), int)
          and indices.start <= state["next"] <= indices.stop and isinstance(state.get("files"), dict)
          and all(_summary_ok(state["files"].get(k)) for k in keys))
    if not ok:
        raise UsageError(f"--resume: the checkpoint {stage.dir / JOURNAL} is corrupt; start over with: {again}")
    return state


def _same_run(state: dict, run_id: dict, out: Path, again: str) -> None:
    mismatch = [k for k in run_id if state.get(k) != run_id[k]]
    if mismatch:
        raise UsageError(f"--resume: the interrupted run in {out} had different {', '.join(mismatch)} "
                         f"(start over with: {again})")


def _summary_ok(s) -> bool:
    return (isinstance(s, dict) and type(s.get("bytes")) is int and type(s.get("rows")) is int
            and s["bytes"] >= 0 and s["rows"] >= 0 and isinstance(s.get("sha256"), str))


def _json_or_none(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _reopen(stage_dir: Path, state: dict, indices: range, acc: StatsAccumulator, again: str, keys: tuple,
            names: dict) -> dict:
    """The staging files cut back to the checkpoint, each checked against it, and the stats
    of the episodes already written."""
    files = {}
    try:
        for k in keys:                   # all checked before any is cut back
            check_prefix(stage_dir / names[k], state["files"][k])
        for k in keys:
            files[k] = StreamFile(stage_dir / names[k], resume=state["files"][k])
        # (a chat file holds any number of rows an episode: only the record's two files count episodes)
        record = [files[keys[0]], files[keys[0] + VALIDATION]]
        if sum(f.rows for f in record) != state["next"] - indices.start:
            raise UsageError(f"{record[0].path} and its validation file hold {sum(f.rows for f in record)} episodes, "
                             f"the checkpoint says {state['next'] - indices.start}")
        for row in in_plan_order(*map(_written_rows, record)):     # the stats' sums in generate's order
            acc.add(row)
        for k, f in files.items():
            if k in CHAT_KEYS:
                acc.add_chat(names[k], map(chat_figure, _written_rows(f)))
    except FileNotFoundError as e:
        raise UsageError(f"--resume: {e.filename} is missing; start over with: {again}") from None
    except (UsageError, ValueError) as e:
        for f in files.values():
            f.close()
        raise UsageError(f"--resume: {e}; start over with: {again}") from None
    return files


def _written_rows(f: StreamFile):
    """The rows a reopened staging file holds up to its checkpoint."""
    with open(f.path, "rb") as fh:
        for _, line in zip(range(f.rows), fh):
            yield json.loads(line)


def finish(out: Path, stats: dict, manifest: Manifest, judged=None, workers: int = 1,
           written: WrittenChecks | None = None, plan: Plan | None = None) -> None:
    """The run manifest, the layout's QA files (qa.json; a report per batch, checked in `workers`
    processes) and the card, then stats.json — the completion marker — once the data is complete.
    `judged`: the QA figures of every episode, summed as they were written (layouts.Layout.judge;
    else qa reads the files); `written`: the batch reports' checks made as the rows were built;
    `plan`: the run's plan (the batch reports take it where it is the manifest's, not made again)."""
    write_manifest(out, manifest)
    layout = LAYOUTS[manifest.layout]
    if layout.qa_file:
        write_text_atomic(out / layout.qa_file, dumps_qa(layout.qa(out) if judged is None else report(judged)))
    if layout.batch_qa:
        layout.batch_qa(out, stats, workers, written=written, plan=plan)
    with Bar("writing the dataset card"):
        write_text_atomic(out / "README.md", layout.card(stats))
    fault_point("card-written")
    write_text_atomic(out / MARKER, dumps_stats(stats))


def qa_failures(out: Path) -> str | None:
    """What generate's own qa found failing in `out` (qa.json, or the sessions layout's batch
    reports) and what to do about it; None when every check passed."""
    if (out / "qa.json").is_file():
        qa = json.loads((out / "qa.json").read_text(encoding="utf-8"))
        if qa["pass"]:
            return None
        failed = ", ".join(f"{c['name']} {c['value']} (wants {c['threshold']})" for c in qa["checks"] if not c["pass"])
        return (f"the dataset's own qa fails: {failed} (qa.json). The data is written; `kernelstrain qa {out}` "
                "shows every check. A failing check is a property of these trajectories, not of the sample's size "
                "(the thresholds allow for it): report it if the profile is a bundled one")
    reports = sorted((out / QA_DIR).glob("batch_*.json")) if (out / QA_DIR).is_dir() else []
    failed = [p.stem for p in reports if not json.loads(p.read_text(encoding="utf-8"))["pass"]]
    if not failed:
        return None
    return (f"{len(failed)} of {len(reports)} batches fail their qa report ({', '.join(failed[:5])}"
            f"{', ...' if len(failed) > 5 else ''}): see {out / QA_DIR}/<batch>.md; the data is written")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
