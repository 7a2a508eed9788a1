"""A dataset layout as a record (as ops/dialect.py holds a language): its files, how one
episode becomes its rows and back, how its files are checked, what is derived from them at the
end of a run, and its card. The episodes and sessions layouts are two records; every reader
and writer asks the record instead of branching on the layout's name.

>>> LAYOUTS["sessions"].files["sessions"], LAYOUTS["episodes"].streamed[0]
('sessions.jsonl', 'episodes')
>>> sorted(all_files(EPISODES))[:3]
['episodes', 'episodes.validation', 'holdout']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .card import render_episodes_card
from .card_sessions import render_sessions_card
from .episodes import episode_rows
from .profiles import LAYOUTS as LAYOUT_NAMES
from .qa import episode_qa, qa_episodes, qa_sessions
from .sessions import episode_row, session_rows, stored_steps, write_batches
from .validate_episodes import check_training_files
from .validate_sessions import check_sessions_dir, write_qa_reports
from .writers import FILES, SESSION_FILES, SPLIT_CONFIGS, VALIDATION, validation_file


@dataclass(frozen=True)
class Layout:
    name: str
    files: dict            # key (its `datasets` config) -> file name; validation files follow from SPLIT_CONFIGS
    streamed: tuple        # the keys generate streams, the one-row-per-episode file first
    rows: Callable         # (plan, index) -> ({key: rows}, public episode row): one episode's rows
    episode: Callable      # a row of the first streamed file -> the public episode row (code re-rendered)
    check: Callable        # (data, validate.Context, held combos, Findings) -> StatsAccumulator: validate's file checks
    qa: Callable           # data dir -> the qa object over the whole dataset (`kernelstrain qa`)
    card: Callable         # stats -> the dataset card (README.md)
    stored_steps: Callable  # a row of the first streamed file -> its steps with their code as stored (verify)
    qa_file: str | None = None      # where generate writes `qa`'s object (validate compares it)
    cut: Callable | None = None     # (out, batch_size) -> {name: summary}: files cut from the data (batches/)
    batch_qa: Callable | None = None  # (out, stats, workers, written=, plan=) -> None: a QA report per batch (qa_reports/)
    judge: Callable | None = None   # {key: one episode's rows as written} -> its QA figures, which generate
                                    # sums (qa._Acc.merge) into qa_file's report instead of reading the files again

    @property
    def episode_file(self) -> str:
        return self.files[self.streamed[0]]


def _as_stored(row: dict) -> dict:
    """An episodes.jsonl row is the public episode row."""
    return row


def _steps(row: dict) -> list:
    return row["steps"]


EPISODES = Layout(
    name="episodes", files=dict(FILES),
    streamed=("episodes", "sft_multiturn", "sft_steps", "sft_prompt_completion"),
    rows=episode_rows, episode=_as_stored, check=check_training_files, qa=qa_episodes,
    card=render_episodes_card, stored_steps=_steps, qa_file="qa.json", judge=episode_qa)

# one whole session a row (the kernelinfer card), cut into batches/ with a QA report each,
# and the sessions cut into chat windows
SESSIONS = Layout(
    name="sessions", files=dict(SESSION_FILES), streamed=("sessions", "sft_multiturn"),
    rows=session_rows, episode=episode_row, check=check_sessions_dir, qa=qa_sessions,
    card=render_sessions_card, stored_steps=stored_steps, cut=write_batches, batch_qa=write_qa_reports)

LAYOUTS = {layout.name: layout for layout in (EPISODES, SESSIONS)}
assert tuple(LAYOUTS) == LAYOUT_NAMES, "profiles.LAYOUTS names the layouts a profile may choose"


def streamed_keys(layout: Layout) -> tuple:
    """The keys of the files generate streams: each of `streamed`, then the validation file of
    each that SPLIT_CONFIGS names."""
    return layout.streamed + tuple(k + VALIDATION for k in layout.streamed if k in SPLIT_CONFIGS)


def all_files(layout: Layout) -> dict:
    """key -> file name of the files every dataset of the layout holds (a validation file's key
    is its config's + VALIDATION)."""
    return {**layout.files, **{k + VALIDATION: validation_file(layout.files[k])
                               for k in layout.files if k in SPLIT_CONFIGS}}


def layout_of(name: str) -> Layout:
    return LAYOUTS[name]
