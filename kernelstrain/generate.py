"""`generate`: plan -> episodes (in parallel, in order) -> streamed files -> stats and card.

Output is byte-identical for any worker count: workers compute episodes, the parent
writes them in index order. `--shard I/N` writes a contiguous slice of the episodes;
`merge` concatenates the slices back into the single-run bytes.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .card import render_card
from .episodes import episode_rows
from .errors import UsageError
from .holdout import write_holdout
from .plan import Plan, make_plan
from .profiles import Profile, load_profile
from .stats import StatsAccumulator, dumps_stats
from .writers import FILES, StreamFile, prepare_out_dir, write_text_atomic


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


def _init_worker(profile_path: str, seed: int) -> None:
    global _PLAN
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent handles Ctrl-C and stops the pool
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _PLAN = make_plan(load_profile(profile_path), seed)


def _slim(ep: dict) -> dict:
    """What the stats need of an episode, without the code."""
    keys = ("op", "module", "gpu", "impl", "family", "dtype", "best", "elapsed_s")
    return {**{k: ep[k] for k in keys}, "steps": [{"status": s["status"], "kind": s["kind"]} for s in ep["steps"]]}


def _encode(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _work(index: int):
    """One episode's three blocks of encoded lines (and their row counts) plus its stats."""
    ep_line, mt_lines, step_lines, ep = episode_rows(_PLAN, index)
    return (_encode([ep_line]), (_encode(mt_lines), len(mt_lines)), (_encode(step_lines), len(step_lines)),
            _slim(ep))


def iter_episodes(plan: Plan, indices: range, workers: int):
    """Yield each index's encoded rows (see _work), in index order."""
    if workers <= 1 or len(indices) < 2:
        global _PLAN
        _PLAN = plan
        yield from map(_work, indices)
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(workers, initializer=_init_worker, initargs=(plan.profile.path, plan.seed)) as pool:
        yield from pool.imap(_work, indices, chunksize=4)


class Progress:
    """Episodes done, rate, MB written and ETA on stderr, when stderr is a terminal."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled and sys.stderr.isatty()
        self.start = self.last = time.monotonic()

    def update(self, done: int, written: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.5 and done < self.total):
            return
        self.last = now
        rate = done / max(1e-9, now - self.start)
        eta = (self.total - done) / rate if rate else 0
        sys.stderr.write(f"\r{done:,}/{self.total:,} episodes  {rate:,.1f} ep/s  {written / 1e6:,.1f} MB  "
                         f"ETA {int(eta) // 60}m{int(eta) % 60:02d}s ")
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


CHECKPOINT = ".kernelstrain-resume.json"
DATA_KEYS = ("episodes", "sft_multiturn", "sft_steps")


def generate(profile: Profile, seed: int, out: Path, episodes: int | None = None, workers: int = 1,
             shard: Shard | None = None, force: bool = False, progress: bool = True,
             resume: bool = False) -> dict:
    """Write the dataset of `profile` and `seed` into `out`; returns stats.json's content.

    Progress is checkpointed; after an interruption `resume=True` finishes the run and
    gives the same bytes as an uninterrupted one."""
    if episodes is not None and episodes < 0:
        raise UsageError(f"--episodes must be >= 0, got {episodes}")
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    plan = make_plan(profile, seed)
    total = profile.episodes if episodes is None else episodes
    indices = shard.range(total) if shard else range(total)
    run_id = {"profile": profile.name, "profile_sha": _sha(Path(profile.path)), "seed": seed, "episodes": total,
              "shard": str(shard) if shard else None}
    acc = StatsAccumulator()
    if resume:
        start, files = _resume(out, run_id, acc)
    else:
        prepare_out_dir(out, force)
        for stale in ("stats.json", "README.md", "qa.json", CHECKPOINT):   # never leave an old dataset looking complete
            (out / stale).unlink(missing_ok=True)
        start, files = indices.start, {k: StreamFile(out / FILES[k]) for k in DATA_KEYS}
    todo = range(start, indices.stop)
    bar = Progress(len(todo), progress)
    last_checkpoint = time.monotonic()
    index, marks = start, {k: f.bytes for k, f in files.items()}   # as of the last whole episode
    _checkpoint(out, run_id, index, files, marks)
    try:
        for done, (ep_data, mt_block, step_block, slim) in enumerate(iter_episodes(plan, todo, workers), 1):
            files["episodes"].write_block(ep_data, 1)
            files["sft_multiturn"].write_block(*mt_block)
            files["sft_steps"].write_block(*step_block)
            acc.add(slim)
            index, marks = start + done, {k: f.bytes for k, f in files.items()}
            bar.update(done, sum(marks.values()))
            if time.monotonic() - last_checkpoint > 2.0:
                _checkpoint(out, run_id, index, files, marks)
                last_checkpoint = time.monotonic()
    except BaseException:
        try:
            _checkpoint(out, run_id, index, files, marks)
        except OSError:
            pass
        raise
    for f in files.values():
        f.commit()
    summaries = {f.final.name: f.summary() for f in files.values()}
    summaries[FILES["holdout"]] = write_holdout(plan, out)
    stats = acc.result(profile, seed, len(plan.holdout), summaries, str(shard) if shard else None)
    finish(out, stats)
    (out / CHECKPOINT).unlink(missing_ok=True)
    return stats


def _sha(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checkpoint(out: Path, run_id: dict, next_index: int, files: dict, marks: dict) -> None:
    """Record how far the run got: episodes before next_index fill the first marks[k] bytes."""
    for f in files.values():
        f.flush()
    state = {**run_id, "next": next_index, "bytes": marks}
    write_text_atomic(out / CHECKPOINT, json.dumps(state))


def _resume(out: Path, run_id: dict, acc: StatsAccumulator):
    """Reopen an interrupted run's temporary files at its last checkpoint."""
    try:
        state = json.loads((out / CHECKPOINT).read_text())
    except FileNotFoundError:
        raise UsageError(f"--resume: {out} holds no interrupted run ({CHECKPOINT} missing)") from None
    except json.JSONDecodeError:
        raise UsageError(f"--resume: {out / CHECKPOINT} is corrupt; start again with --force") from None
    mismatch = [k for k in run_id if state.get(k) != run_id[k]]
    if mismatch:
        raise UsageError(f"--resume: the interrupted run in {out} had different {', '.join(mismatch)}")
    files = {k: StreamFile(out / FILES[k], resume_bytes=state["bytes"][k]) for k in DATA_KEYS}
    with open(files["episodes"].tmp, encoding="utf-8") as fh:
        for line in fh:
            acc.add(json.loads(line))
    return state["next"], files


def finish(out: Path, stats: dict) -> None:
    """qa.json and the card, then stats.json — the completion marker — once the data is complete."""
    from .qa import dumps_qa, qa
    write_text_atomic(out / "qa.json", dumps_qa(qa(out)))
    write_text_atomic(out / "README.md", render_card(stats))
    write_text_atomic(out / "stats.json", dumps_stats(stats))


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
