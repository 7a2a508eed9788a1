"""The dataset card README.md written beside the data: YAML configs for `datasets`, then
the seed card's sections (at a glance, coverage, files, usage, generation, caveats) with
this dataset's own figures, and what was simulated, compiled and run on real GPUs."""
from __future__ import annotations

from collections import defaultdict

from .gpus import GPUS
from .holdout import card_configs, card_usage, card_modules, card_section
from .schema import FEATURES
from .ops import REGISTRY
from .writers import FILES, validation_file

_SPLITS = {"episodes": "train", "sft_multiturn": "train", "sft_steps": "train", "sft_prompt_completion": "train",
           "sessions": "train", "holdout": "test"}
_CONTENTS = {
    "episodes": "raw episodes: every step with its full source, params, status, time, smem, registers, "
                "error text and keep/revert decision",
    "sft_multiturn": "one chat per episode; assistant turns are complete kernels only (no reasoning)",
    "sft_steps": "one row per transition: task + history + current best -> next candidate",
    "sft_prompt_completion": "the weight-1 step rows in TRL's conversational prompt/completion form",
    "holdout": "held-out task prompts with baseline and reference, no solutions",
}
# The project's own verification runs (not of this dataset): (what, figure, how).
VERIFICATION = (
    ("compiled", "400 of 400 sampled candidates agreed with their recorded status (ok and wrong_result compile, "
     "compile_error fails with the recorded class of error): 0 disagreements",
     "`kernelstrain verify --sample 400`: nvcc 13.0 for each GPU's target, Triton's compiler for CUDA targets "
     "and gfx942, clang-19 HIP for MI300X"),
    ("run on a GPU", "558 of 558 sampled ok candidates matched the PyTorch reference on an H200; 191 of 191 "
     "wrong_result candidates that ran really failed (seed 6868, which the simulator was not fitted on)",
     "`kernelstrain gpu-check` on a lent H200 (sm_90a): poisoned outputs and guard bytes, every element against "
     "the reference"),
    ("timed on a GPU", "simulated / measured time: geometric mean 0.975, 85% within 0.8-1.25x, within-episode "
     "Spearman 0.870 and pair order 0.903 (the hardware's own repeat: 0.981 / 0.982)",
     "the same run: CUDA events after an L2 flush; the simulator is fitted to 5,015 other H200-timed candidates"),
    ("KernelBench", "200 of 200 sampled ok solutions compiled and passed KernelBench-style evaluation; 0 of 50 "
     "wrong_result solutions passed (seed 2727, H100/H200 tasks)",
     "`kernelstrain export kernelbench` + scripts/kb_eval.py on a lent H200: torch.allclose 1e-4 (fp32) / 1e-2 "
     "(fp16, bf16) over seeded trials, CUDA-event timing after an L2 flush"),
)


def _size_category(rows: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if rows < limit:
            return name
    return "n>10M"


COVERAGE_TITLES = 40      # ops listed per family on the card (the default profile's families list all theirs)


def _coverage(stats: dict) -> str:
    ops = defaultdict(lambda: defaultdict(list))
    for name in stats["by_module"]:
        m = REGISTRY.get(name)
        if m:
            ops[m.family][m.title].append(m.impl)
    lines = []
    for family in sorted(ops):
        titles = sorted(ops[family].items())
        items = ", ".join(f"{title} ({'/'.join(sorted(impls))})" for title, impls in titles[:COVERAGE_TITLES])
        if len(titles) > COVERAGE_TITLES:        # a fused profile: a program per task
            items += f", ... ({len(titles) - COVERAGE_TITLES:,} more)"
        lines.append(f"- **{family}** ({stats['by_family'].get(family, 0):,} episodes): {items}")
    return "\n".join(lines)


def torch_row(stats: dict) -> str:
    """The card's row of the best over the PyTorch eager reference (empty without the figure)."""
    vs = stats.get("speedup_vs_torch")
    if not vs or not vs["episodes"]:
        return ""
    return (f"| Best speedup over PyTorch eager | geomean {vs['geomean']}x (min {vs['min']}x, max {vs['max']}x); "
            f"{vs['beats_eager_pct']}% beat eager (reference times: H200 measurements, scaled to other GPUs) |\n")


def _splits(stats: dict) -> str:
    if stats.get("holdout"):
        return card_section(stats)
    return (f"The holdout config holds {stats['holdout_tasks']} task combos (module, GPU, dtype, shape) that no "
            "training file contains: prompts, baselines and references, no solutions.")


def _feature_yaml(spec, indent: int) -> list[str]:
    """YAML of a features spec (schema.FEATURES) in the dataset card's `dataset_info` form."""
    pad, out = " " * indent, []
    for name, typ in spec.items():
        out.append(f"{pad}- name: {name}")
        if isinstance(typ, str):
            out.append(f"{pad}  dtype: {typ}")
        elif isinstance(typ, list):
            out.append(f"{pad}  list:")
            out += _feature_yaml(typ[0], indent + 2) if isinstance(typ[0], dict) else [f"{pad}    dtype: {typ[0]}"]
        else:
            out.append(f"{pad}  struct:")
            out += _feature_yaml(typ, indent + 2)
    return out


def dataset_info(configs: list[str]) -> str:
    """The card's `dataset_info`: each config's features, so every chunk casts to one schema."""
    lines = []
    for name in configs:
        lines += [f"  - config_name: {name}", "    features:"]
        lines += _feature_yaml(FEATURES["holdout" if name.startswith("holdout") else name], 6)
    return "\n".join(lines)


def config_splits(declared: list, files: dict) -> list[tuple[str, list]]:
    """(config, [(split, file)]) of each declared config: its own split, and `validation` where
    its validation file (training.py) holds rows."""
    out = []
    for name, path in declared:
        splits = [(_SPLITS.get(name, "test"), path)]
        if files.get(validation_file(path), {}).get("rows"):
            splits.append(("validation", validation_file(path)))
        out.append((name, splits))
    return out


def _configs(declared: list, files: dict) -> str:
    return "\n".join(
        f"  - config_name: {name}\n    data_files:\n" + "\n".join(
            f"      - split: {split}\n        path: {path}" for split, path in splits)
        for name, splits in config_splits(declared, files))


def front_matter(stats: dict, declared: list, tag: str, rows: int) -> str:
    """The card's YAML: names, tags, size, the configs and their features."""
    return f"""---
license: mit
pretty_name: KernelStrain ({stats['profile']}, seed {stats['seed']})
task_categories:
  - text-generation
tags:
  - code
  - cuda
  - triton
  - gpu-kernels
  - kernel-optimization
  - synthetic-dataset
  - {tag}
size_categories:
  - {_size_category(rows)}
configs:
{_configs(declared, stats["files"])}
dataset_info:
{dataset_info([name for name, _ in declared])}
---"""


# Measured by the project (scripts/token_table.py), not on this dataset: real token counts of
# chat rows next to the budget rule's, on fresh seeds of each profile.
TOKEN_MEASUREMENT = (
    "The project counted fresh seeds' chat rows with cl100k and Qwen2.5-Coder's tokenizer "
    "(scripts/token_table.py; not this dataset): default profile, seed 101, 200 episodes: 610 sft_multiturn "
    "windows, cl100k p50 12,553 / max 14,667, Qwen p50 12,923 / max 15,173, all within 16,000; kernelinfer, "
    "seed 202, 20 sessions: 154 windows, cl100k max 29,225, Qwen max 30,914, all within 32,000 (the whole "
    "sessions: 3 of 20 within). On 1,689 rows the rule counted 1.1-33% more than either tokenizer.")


def training_section(stats: dict) -> str:
    """What the chat rows hold (stats.json `chat`): weight-1 share, token percentiles under the
    budget rule, the validation split; and how TRL and axolotl take them."""
    c = stats.get("chat")
    if not c:
        return ""
    rows = "\n".join(
        f"| `{name}` | {f['rows']:,} | {f['weight1_share']:.1%} of {f['targets']:,} | "
        f"{f['tokens']['p50']:,} / {f['tokens']['p90']:,} / {f['tokens']['p99']:,} / {f['tokens']['max']:,} | "
        f"{f['within_budget']:.1%} |" for name, f in c["files"].items())
    trl = ("""**TRL** (`SFTTrainer`, loss on the completion only): `sft_prompt_completion` holds the weight-1 step rows
as `prompt` (system, user) and `completion` (the assistant's kernel):
`SFTTrainer(model, train_dataset=load_dataset(dir, "sft_prompt_completion", split="train"),
args=SFTConfig(completion_only_loss=True))`.
""" if FILES["sft_prompt_completion"] in stats["files"] else "")
    return f"""### What the chat rows hold

Tokens by the budget rule (`ceil(0.35 x characters + 0.8 x digits)` a message, plus 5 for the chat
template's framing), which lies above real BPE counts; windows are cut to `max_context_tokens` =
{c['max_context_tokens']:,}. `weight` 1 marks a target worth learning (a kept step, or the repair of a slip or bug not slower than the
best beyond the noise); the rest are
failed or losing candidates a trainer should keep in context and out of the loss.

| file | rows | assistant targets with weight 1 | tokens p50 / p90 / p99 / max | within {c['max_context_tokens']:,} |
|---|---|---|---|---|
{rows}

{TOKEN_MEASUREMENT}

**Validation split.** `*.validation.jsonl` hold every row of {c['validation_frac']:.0%} of the tasks (a hash of
`task_id`), the episode (session) records as well as the chat rows: no task is in both splits, so correlated
rows of one episode never straddle them, and every config loads with `split="validation"`.

{trl}**axolotl** keeps the weights: `type: chat_template`, `field_messages: messages`,
`message_field_training: weight` on the `messages` configs."""


def render_episodes_card(stats: dict) -> str:
    """The card of an episodes-layout dataset (layouts.EPISODES.card)."""
    declared = [(n, p) for n, p in FILES.items() if n != "holdout"] + card_configs(stats)
    pct, spe, sp = stats["status_pct"], stats["steps_per_episode"], stats["speedup"]
    files = stats["files"]
    step_rows = files.get(FILES["sft_steps"], {}).get("rows", stats["steps"])
    file_rows = "\n".join(
        f"| `{path}` | `{name}` ({split}) | {files[path]['rows']:,} | {files[path]['bytes'] / 1e6:,.1f} MB | "
        f"{_CONTENTS.get(name, _CONTENTS['holdout']) if split != 'validation' else 'the validation tasks rows'} |"
        for name, splits in config_splits(declared, files) for split, path in splits if path in files)
    impls = ", ".join(f"{v:,} {k}" for k, v in stats["by_impl"].items())
    gpus = ", ".join(f"{g} ({GPUS[g].arch})" if g in GPUS else g for g in stats["by_gpu"])
    verified = "\n".join(f"| {what} | {figure} | {how} |" for what, figure, how in VERIFICATION)
    return f"""{front_matter(stats, declared, "sft", step_rows)}

# KernelStrain — {stats['profile']}, seed {stats['seed']}

**Long-horizon GPU kernel-optimization trajectories for training small models to iterate on CUDA and
Triton kernels.** Profile `{stats['profile']}`: {stats['profile_description']}.

Each episode is a working session on one kernel task (op, shape, dtype, GPU, baseline code and time):
the baseline's time and profile, then complete candidate kernels, each with compile / correctness / benchmark /
profiler feedback, kept only when faster than the best beyond the measurement noise and reverted otherwise —
structural rewrites up a variant ladder, parameter sweeps, joint configs, rebenchmarks, endgame tuning, and the
failures real kernel work has.

> **Simulated, compiled, run.** Every time in this dataset comes from an analytic roofline simulator:
> no candidate in it was run on a GPU. Kernel sources are rendered from templates that compile for their
> target, and the project checks samples with real compilers and runs its kernels on a real H200; those
> figures (below, under *Generation*) are from the project's own verification runs, not from this dataset.

## At a glance

| | |
|---|---|
| Episodes | {stats['episodes']:,} |
| SFT step rows | {step_rows:,} |
| Multi-turn conversations | {files.get(FILES['sft_multiturn'], {}).get('rows', stats['episodes']):,} |
| Holdout tasks | {stats['holdout_tasks']:,} (prompts only, no solutions) |
| Op modules | {card_modules(stats)}; episodes: {impls} |
| Steps per episode | mean {spe['mean']}, median {spe['median']}, {spe['min']}–{spe['max']} |
| Step statuses | {pct['ok']}% ok, {pct['wrong_result']}% wrong_result, {pct['compile_error']}% compile_error |
| Best speedup over baseline | mean {sp['mean']}x, geomean {sp['geomean']}x, max {sp['max']}x |
{torch_row(stats)}| Simulated wall time | mean {stats['simulated_hours']['mean']} h per episode |
| GPU targets | {gpus} |

## Coverage

{_coverage(stats)}

Step kinds: {', '.join(f'{k} {v:,}' for k, v in stats['kind'].items())}. Episodes per GPU:
{', '.join(f'{k} {v:,}' for k, v in stats['by_gpu'].items())}.

## Files

| file | config | rows | size | one row is |
|---|---|---|---|---|
{file_rows}
| `stats.json` | — | — | — | counts, distributions, and each file's rows, bytes and sha256 |

Feedback reports the step's own result and the best so far only: nothing from a later step leaks
into a turn. `shape` (a task's dims) and each step's `params` are lists of `{{"dim"|"name", "value"}}`
pairs, so every row of a config has one schema whatever the op.

## Usage

```python
from datasets import load_dataset

steps = load_dataset("path/to/this/dir", "sft_steps", split="train")      # one transition a row
chats = load_dataset("path/to/this/dir", "sft_multiturn", split="train")  # an episode's chat windows
episodes = load_dataset("path/to/this/dir", "episodes", split="train")    # every episode, both splits' tasks
val = load_dataset("path/to/this/dir", "sft_steps", split="validation")   # rows of the validation tasks
{card_usage(declared)}
shape = {{d["dim"]: d["value"] for d in episodes[0]["shape"]}}               # e.g. {{"T": 4096, "D": 4096}}
params = {{p["name"]: p["value"] for p in episodes[0]["steps"][0]["params"]}}
```

{training_section(stats)}

Loads with `datasets` 2.14.7 and later. `kernelstrain report DIR` writes an HTML report of the data
(charts and an episode browser); `kernelstrain show DIR EPISODE_ID` prints one episode in a terminal.

## Generation

`kernelstrain generate --seed {stats['seed']}` (profile `{stats['profile']}`, `{stats['generator']}`), pure
standard-library Python, deterministic: the same seed and profile give the same bytes for any worker
count or sharding. Times come from `max(flops / (peak * e_c), bytes * traffic / (bw * e_m)) + launch
overhead`, with GPU peaks from vendor datasheets and efficiencies from each candidate's structure and
launch parameters (vector width, occupancy, tile and wave quantization, pipelining; L2 flushed between runs),
per-variant ceilings and a launch floor fitted to candidates timed on a real H200, arch and shared-memory gates, and seeded Gaussian rebenchmark noise. Compile errors reproduce the
real compilers' wording; wrong results come from a bug really rendered into the candidate's code.

What was checked for real, by the project's own verification runs (not this dataset):

| | figure | how |
|---|---|---|
{verified}

## Splits and contamination

{_splits(stats)}

## Caveats

- Times are **simulated**, not measured: on the H200 the simulator's times are within 0.5–2x of
  measurement for most candidates, but it can rank close variants differently than hardware would.
- Only samples were compiled and only the project's own kernels were run on one GPU (an H200); no
  candidate was run on A100, RTX 4090 or MI300X, and none of this dataset's rows was executed.
- Kernel code is template-rendered: realistic and compilable, but not tuned production code.
- Assistant turns are code only: there are no reasoning traces, by design.

## License

MIT
"""
