"""A dataset as a library object (SPEC §13): `kernelstrain.open(dir)` reads its manifest and
stats once, and the commands that read datasets back are its clients.

>>> import tempfile, kernelstrain
>>> out = Path(tempfile.mkdtemp()) / "d"
>>> _ = kernelstrain.generate("kernelstrain", seed=0, out=out, episodes=2)
>>> ds = kernelstrain.open(out)
>>> ds.manifest.profile.output.max_context_tokens, ds.layout.name, ds.stats["episodes"]
(16000, 'episodes', 2)
>>> ep = next(ds.episodes())
>>> ds.code(ep, 0) == ep["baseline"]["code"], len(ds.chat_rows(ep)[1]) == len(ep["steps"])
(True, True)
>>> [s["step"] for s, verdict in ds.replay(ep)] == [s["step"] for s in ep["steps"]]
True
>>> ds.validate(workers=1).total
0
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
from pathlib import Path

from .episodes import chat_rows, replay
from .fused import module as _fused_programs  # noqa: F401 (registers the fused programs' modules: a fused dataset's rows name them)
from .errors import DataError
from .layouts import EPISODES, LAYOUTS, Layout, all_files
from .manifest import Manifest, read_manifest
from .plan import rooms_ahead
from .contamination import Incremental, Targets, read_splits
from .reading import read_stats, read_whole
from .validate import (MALFORMED, Context, Findings, Later, _check_holdout, _check_stats, check_holdout_splits,
                       check_manifest, first_index, measure_splits)
from .validate_ahead import StreamedMeasure, ahead
from .validate_derived import Rebuilds, check_derived_files
from .writers import DATASET_NAMES, FILES, MARKER, SESSION_FILES, record_paths


class Dataset:
    """A dataset directory: its manifest (the run), stats.json and layout record."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.stats: dict = read_stats(self.path)
        self.manifest: Manifest = read_manifest(self.path)
        self.layout: Layout = LAYOUTS[self.manifest.layout]

    def __repr__(self) -> str:
        return f"<Dataset {self.path} ({self.manifest.profile.name}, seed {self.manifest.seed}, {self.layout.name})>"

    @property
    def episode_file(self) -> Path:
        """The file of one row per episode (episodes.jsonl, sessions.jsonl)."""
        return self.path / self.layout.episode_file

    @property
    def chat_file(self) -> Path:
        """The multi-turn chat rows (sft_multiturn.jsonl in both layouts)."""
        return self.path / self.layout.files["sft_multiturn"]

    def rows(self):
        """(line, row) of every episode as stored, streamed: the episode file, then its validation
        file (the validation split's episodes), whose lines are numbered on after the episode
        file's; a corrupt line raises DataError naming its file and line."""
        return enumerate((row for _, row in read_whole(self.episode_file)), 1)

    def episodes(self):
        """Every episode as its public episode row, streamed; a session's code is re-rendered
        from its trace."""
        for _, row in self.rows():
            yield self.layout.episode(row)

    def episode(self, episode_id: str) -> dict:
        """The public row of one episode, by id (DataError when the dataset has none)."""
        for _, row in self.rows():
            if row.get("id") == episode_id:
                return self.layout.episode(row)
        raise DataError(f"{self.episode_file}: no episode {episode_id!r}")

    @staticmethod
    def code(episode: dict, step: int) -> str:
        """The complete candidate source of step `step` of an episode row (0: the baseline)."""
        return episode["baseline"]["code"] if step == 0 else episode["steps"][step - 1]["code"]

    def chat_rows(self, episode: dict) -> tuple[list, list]:
        """(multi-turn window rows, step rows) of an episode, as this run's [output] settings
        write them."""
        out = self.manifest.profile.output
        return chat_rows(episode, out.timestamps, out.max_context_tokens)

    @staticmethod
    def replay(episode: dict) -> list:
        """[(step, episodes.Verdict)]: the ledger's view of each step, replayed from the row."""
        return list(replay(episode))

    def qa(self) -> dict:
        """The trajectory QA object over the whole dataset (`kernelstrain qa`)."""
        return self.layout.qa(self.path)

    def validate(self, limit: int = 50, workers: int = 1) -> Findings:
        return validate(self.path, limit, workers, self)

    def data_files(self) -> list[str]:
        """The data files the dataset must hold: its layout's, any further holdout split files
        its stats.json declares, and the files cut from the data (batches/) it lists."""
        splits = self.stats.get("holdout", {}).get("splits", {}) if isinstance(self.stats.get("holdout"), dict) else {}
        extra = [s.get("file") for s in splits.values() if isinstance(s, dict)]
        cut = [f for f in self.stats["files"] if f.startswith("batches/")] if self.layout.cut else []
        return list(dict.fromkeys([*all_files(self.layout).values(), *(f for f in extra if f in DATASET_NAMES), *cut]))


def open(path: str | Path) -> Dataset:      # noqa: A001 (the library's reader, as sqlite-utils' Database)
    """The dataset in `path` (DataError, exit 2 in the CLI, when it is not one or has no manifest)."""
    return Dataset(path)


def episode_source(data: Path) -> tuple[Path, Path, object]:
    """(episode rows' file, chats' file, row -> public episode row) of a dataset, from its
    manifest. A directory that holds no dataset (held-out task files only: workdir and export
    read those too) gives an episode file that does not exist."""
    if any((data / name).exists() for name in (MARKER, FILES["episodes"], SESSION_FILES["sessions"])):
        ds = Dataset(data)
        return ds.episode_file, ds.chat_file, ds.layout.episode
    return data / FILES["episodes"], data / FILES["sft_multiturn"], EPISODES.episode


def validate(data: Path, limit: int = 50, workers: int = 1, ds: Dataset | None = None) -> Findings:
    """All problems found in a dataset directory (the first `limit` kept, all counted). With
    `workers` > 1 the plan's episodes are rebuilt, and what the row checks find on them worked
    out, ahead in `workers` forked processes while this one reads the files, takes those
    verdicts for the rows identical to the plan's and checks the others (the findings are the
    same, in the same order). The holdout contamination is measured from the rows as the checks
    read them (validate_ahead.StreamedMeasure)."""
    if limit < 1:
        raise DataError(f"--max-problems must be >= 1, got {limit}")
    ds = ds or Dataset(data)
    out, stats = Findings(limit), ds.stats
    names = ds.data_files()
    for name in names:
        if not (data / name).is_file():
            out.add(str(data / name), "missing", "files")
    if out:
        return out
    # the files' digests and the held-out rows' check run where this process would wait on its workers
    # (the plan's room checks, the held-out solutions' search), their findings and errors taken in the
    # plain order (validate.Later): the same findings, in the same order, as running each in its place
    files = Later(lambda found: _check_files(data, names, stats, found))
    try:
        # the plan's room checks (kernelinfer's min_room: ~3 s of one process) in `workers` forked processes,
        # as generate makes it: the plan is the same (has_room's own answers)
        rooms_ahead(ds.manifest.profile, workers, files.run)
        ctx = Context(stats, ds.manifest)
        held_rows = Later(lambda found: _check_holdout(data / FILES["holdout"], ctx, found))
        # set up first, the held-out solutions searched in `workers` forked processes (a fork beside the
        # rebuilds' pool threads is unsafe; while it ran, the rebuilds would stop 4 a worker ahead)
        ctx.scan = streamed_measure(data, stats, ds.layout, workers, lambda: (files.run(), held_rows.run()))
    except Exception:
        files.result(out)        # what the files' check raises comes first, as where it ran first
        raise
    actual = files.result(out)
    check_manifest(stats, ds.manifest, out)
    with set_up_frozen():
        # with one worker, no pool: each episode rebuilt here as its row is read (Rebuilds.prepare)
        ctx.rebuilds = Rebuilds(ctx, first_index(stats), stats["episodes"], ds.layout.name == "sessions",
                                workers if workers > 1 else 0, ahead)
        try:
            held = held_rows.result(out)
            acc = ds.layout.check(data, ctx, held, out)
        finally:
            if ctx.rebuilds is not None:
                ctx.rebuilds.close()
    _check_stats(stats, acc, actual, len(held), out, ctx, ds.layout.cut is not None)
    check_derived_files(data, ds.layout, stats, out, ctx.judged)
    lines = sum(actual.get(path.name, {}).get("rows", -1) for path in record_paths(data / ds.layout.episode_file))
    streamed = ctx.scan is not None and not ctx.scan.broken and ctx.scan.rows == lines   # each line's row measured
    out.notes = check_holdout_splits(data, stats, out, ctx.scan.result() if streamed else
                                     measure_splits(data, stats, ds.layout, workers))
    return out


@contextlib.contextmanager
def set_up_frozen():
    """The body run with every object made so far (the plan, the contamination matcher, the caches: the set-up)
    out of the cyclic garbage collector's reach (gc.freeze), and put back on leaving it; left as it is where a
    caller froze objects of its own. Reading and rebuilding the rows makes many containers, and each full
    collection walked the whole set-up again: ~0.45 of validate's 1.2 s of collections over 300 default episodes,
    ~0.26 with it frozen. Forked before the rows (Rebuilds), the workers leave it frozen too (Python's own advice
    for a fork: their collections then write to none of the parent's pages)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def streamed_measure(data: Path, stats: dict, layout: Layout, workers: int = 1,
                     meanwhile=None) -> StreamedMeasure | None:
    """The holdout contamination measured from the training rows as the checks read them (the
    held-out solutions searched in `workers` processes, `meanwhile()` run here during the search
    where one is made: it must raise nothing); None where measure_splits must read the files
    itself: no split, or a file missing or unreadable."""
    try:
        splits = {name: s["file"] for name, s in stats.get("holdout", {}).get("splits", {}).items()}
        if not splits or any(not (data / f).exists() for f in splits.values()):
            return None
        return StreamedMeasure(Incremental(Targets(read_splits(data, splits), workers, meanwhile)), layout.episode)
    except MALFORMED + (UnicodeDecodeError,):
        return None


def _check_files(data: Path, names: list, stats: dict, out: Findings) -> dict:
    """Each data file's summary (rows, bytes, sha256); a finding where stats.json's differs."""
    actual = {name: _summary(data / name) for name in names}
    for name, summary in stats["files"].items():
        if name not in actual:
            out.add("stats.json", f"files lists {name!r}, which is not a dataset file", "files")
        elif {k: summary.get(k) for k in ("bytes", "sha256")} != {k: actual[name][k] for k in ("bytes", "sha256")}:
            out.add(name, "sha256/bytes differ from stats.json (modified or truncated?)", "files")
    return actual


def _summary(path: Path) -> dict:
    digest, size, lines = hashlib.sha256(), 0, 0
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
            lines += chunk.count(b"\n")
    return {"rows": lines, "bytes": size, "sha256": digest.hexdigest()}
