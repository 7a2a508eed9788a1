"""`generate`: plan -> episodes (in parallel, in order) -> streamed files -> stats and card.

Output is byte-identical for any worker count: workers compute episodes, the parent
writes them in index order. `--shard I/N` writes a contiguous slice of the episodes;
`merge` concatenates the slices back into the single-run bytes.
"""
from __future__ import annotations

import multiprocessing
import os
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
    _PLAN = make_plan(load_profile(profile_path), seed)


def _slim(ep: dict) -> dict:
    """What the stats need of an episode, without the code."""
    keys = ("op", "module", "gpu", "impl", "family", "dtype", "best", "elapsed_s")
    return {**{k: ep[k] for k in keys}, "steps": [{"status": s["status"], "kind": s["kind"]} for s in ep["steps"]]}


def _work(index: int):
    ep_line, mt_line, step_lines, ep = episode_rows(_PLAN, index)
    return ep_line, mt_line, step_lines, _slim(ep)


def iter_episodes(plan: Plan, indices: range, workers: int):
    """Yield (episode, multiturn, steps, slim) for each index, in order."""
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


def generate(profile: Profile, seed: int, out: Path, episodes: int | None = None, workers: int = 1,
             shard: Shard | None = None, force: bool = False, progress: bool = True) -> dict:
    """Write the dataset of `profile` and `seed` into `out`; returns stats.json's content."""
    if episodes is not None and episodes < 0:
        raise UsageError(f"--episodes must be >= 0, got {episodes}")
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    plan = make_plan(profile, seed)
    total = profile.episodes if episodes is None else episodes
    indices = shard.range(total) if shard else range(total)
    prepare_out_dir(out, force)
    files = {name: StreamFile(out / fname) for name, fname in FILES.items() if name != "holdout"}
    acc = StatsAccumulator()
    bar = Progress(len(indices), progress)
    try:
        for done, (ep_line, mt_line, step_lines, slim) in enumerate(iter_episodes(plan, indices, workers), 1):
            files["episodes"].write(ep_line)
            files["sft_multiturn"].write(mt_line)
            for line in step_lines:
                files["sft_steps"].write(line)
            acc.add(slim)
            bar.update(done, sum(f.bytes for f in files.values()))
    except BaseException:
        for f in files.values():
            f.abort()
        raise
    for f in files.values():
        f.commit()
    summaries = {f.final.name: f.summary() for f in files.values()}
    summaries[FILES["holdout"]] = write_holdout(plan, out)
    stats = acc.result(profile, seed, len(plan.holdout), summaries, str(shard) if shard else None)
    finish(out, stats)
    return stats


def finish(out: Path, stats: dict) -> None:
    """The card, then stats.json — the completion marker — once the data is complete."""
    write_text_atomic(out / "README.md", render_card(stats))
    write_text_atomic(out / "stats.json", dumps_stats(stats))


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
