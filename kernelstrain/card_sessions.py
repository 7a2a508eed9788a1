"""The dataset card of the sessions layout (the kernelinfer card's files): YAML configs
`sessions` and the holdout splits, then the figures of stats.json and what each file holds."""
from __future__ import annotations

from .card import VERIFICATION, _coverage, _splits, config_splits, front_matter, torch_row, training_section
from .gpus import GPUS
from .holdout import card_configs, card_usage
from .sessions import BATCH_DIR, QA_DIR, SESSIONS_FILE
from .slips import NAMES
from .writers import SESSION_FILES

SLIP_KINDS = ", ".join(f"{i} {n}" for i, n in enumerate(NAMES))


def render_sessions_card(stats: dict) -> str:
    declared = [("sessions", SESSIONS_FILE), ("sft_multiturn", SESSION_FILES["sft_multiturn"])] + card_configs(stats)
    pct, spe, sp, hours = stats["status_pct"], stats["steps_per_episode"], stats["speedup"], stats["simulated_hours"]
    files, st = stats["files"], stats["status"]
    batches = [f for f in files if f.startswith(f"{BATCH_DIR}/")]
    file_rows = "\n".join(
        f"| `{path}` | `{name}` ({split}) | {files[path]['rows']:,} | {files[path]['bytes'] / 1e6:,.1f} MB |"
        for name, splits in config_splits(declared, files) for split, path in splits if path in files)
    gpus = ", ".join(f"{g} ({GPUS[g].arch})" if g in GPUS else g for g in stats["by_gpu"])
    verified = "\n".join(f"| {what} | {figure} | {how} |" for what, figure, how in VERIFICATION)
    return f"""{front_matter(stats, declared, "long-horizon", stats['sessions'])}

# KernelStrain — {stats['profile']}, seed {stats['seed']}

**Long-horizon GPU kernel-optimization sessions.** Profile `{stats['profile']}`: {stats['profile_description']}.

Each row is a complete optimization session: the model receives a kernel task, emits a full CUDA or
Triton candidate, and gets simulated compile / correctness / benchmark feedback stamped with the
session's elapsed time `[t+H:MM:SS]` — iterating, repairing failures and tuning launch parameters until
it converges or its step or time budget runs out. Assistant turns are kernel code only: no prose, no reasoning.

> **Simulated.** Every time and result comes from an analytic roofline simulator: no candidate in this
> dataset was compiled or run. The project checks samples of its templates with real compilers and on a
> real H200 (see *Generation*); those are the project's figures, not this dataset's.

## At a glance

| | |
|---|---|
| Sessions | {stats['sessions']:,} ({stats['unique_combos']:,} unique (op, gpu, shape, dtype) combos) |
| Steps | {stats['steps']:,}: {st['ok']:,} ok / {st['compile_error']:,} compile_error / {st['wrong_result']:,} wrong_result ({pct['ok']} / {pct['compile_error']} / {pct['wrong_result']} %) |
| Steps per session | mean {spe['mean']}, median {spe['median']}, {spe['min']}–{spe['max']} |
| Simulated time per session | mean {hours['mean']} h (min {hours['min']} h, max {hours['max']} h) |
| Best speedup over baseline | mean {sp['mean']}x, geomean {sp['geomean']}x, max {sp['max']}x |
{torch_row(stats)}| Holdout tasks | {stats['holdout_tasks']:,} (task specs only, no solutions) |
| GPU targets | {gpus} |

## Coverage

{_coverage(stats)}

## Files

| file | config | rows | size |
|---|---|---|---|
{file_rows}
| `{BATCH_DIR}/` | — | {len(batches)} files | {stats['batch_size']} sessions each; their concatenation is `{SESSIONS_FILE}` (the train split), byte for byte |
| `{QA_DIR}/` | — | {len(batches)} × (.json, .md) | each batch scored: validate's mechanical checks and the trajectory QA figures |
| `stats.json` | — | — | counts, distributions, and each file's rows, bytes and sha256 |

A session row: `messages` (system; user task with the baseline, its time, registers, shared memory and profile; then each step's assistant turn — the
full kernel source in one fenced block, `weight` 1 for a target worth learning: a kept step, or the repair of a slip or bug not slower than the
best beyond the noise — and its user feedback
turn: this step's result and the best so far only), `trace` (one compact record a step: step, kind,
tag, params, status, failure, bug, typo, time_ms, smem_bytes, regs, error, kept, best_ms, elapsed_s; the
step's code is its assistant turn; `typo`, when set, is the compile-time slip written into that code:
kind {SLIP_KINDS} by `typo // 1000`, its site `typo % 1000`, its class in `failure`), and op, impl,
module, family, gpu, arch, dtype, shape, signature,
desc, baseline_ms, torch_eager_ms, torch_compile_ms (the PyTorch reference's times: measured on an H200, scaled
to other GPUs and shapes by the roofline floor; null where not measured), baseline {{tag, params}}, best {{step,
time_ms, speedup, speedup_vs_torch}}, attempts, end, num_steps,
elapsed_s, elapsed_hms, seed, generator.

## Usage

```python
from datasets import load_dataset

sessions = load_dataset("path/to/this/dir", "sessions", split="train")   # whole sessions, every task
windows = load_dataset("path/to/this/dir", "sft_multiturn", split="train")  # the sessions cut into windows
val = load_dataset("path/to/this/dir", "sft_multiturn", split="validation")
{card_usage(declared)}print(sessions[0]["elapsed_hms"], sessions[0]["trace"][0]["tag"])
```

`sft_multiturn` cuts each session into chat windows within the token budget (`kernelstrain/sft_multiturn@2`
rows, as the default profile's): each later window's first user turn carries the task, the compact
history, the last result and the current best code; windows end on an assistant turn.

{training_section(stats)}

`kernelstrain validate DIR` re-renders every step's code from the trace and rechecks every row, batch
and QA report; `kernelstrain qa DIR` prints the QA figures of all sessions.

## Generation

`kernelstrain generate --seed {stats['seed']}` (profile `{stats['profile']}`, `{stats['generator']}`), pure
standard-library Python, deterministic for any worker count or sharding. Times come from a roofline
model with per-variant efficiencies, arch and shared-memory gates and seeded measurement noise; compile
errors reproduce the real compilers' wording; wrong results come from a bug rendered into the code.

| | figure | how |
|---|---|---|
{verified}

## Splits and contamination

{_splits(stats)}

## License

MIT
"""
