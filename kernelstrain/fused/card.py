"""README.md card of a fused-task directory: YAML configs for `datasets`, then figures."""
from __future__ import annotations

CONFIGS = (("fused_tasks", "tasks_fused.jsonl"), ("fused_rejects", "rejects_fused.jsonl"),
           ("fused_candidates", "candidates_fused.jsonl"))


def render_fused_card(stats: dict) -> str:
    present = [(name, path) for name, path in CONFIGS if path in stats["files"]]
    configs = "\n".join(f"  - config_name: {name}\n    data_files:\n      - split: train\n        path: {path}"
                        for name, path in present)
    files = "\n".join(f"| `{n}` | {f['rows']:,} | {f['bytes'] / 1e6:.1f} MB | `{f['sha256'][:16]}…` |"
                      for n, f in stats["files"].items())
    rep = stats["filter"]
    if rep:
        reasons = "\n".join(f"| {k} | {v:,} |" for k, v in rep["by_reason"].items())
        filtered = (f"Filtered on `{rep['device']}`: {rep['evaluated']:,} candidates run, {rep['passed']:,} passed, "
                    f"{rep['selected']:,} kept (the first passing ones in candidate order).\n\n"
                    f"| rejection reason | candidates |\n|---|---|\n{reasons}\n")
    else:
        filtered = ("Not filtered yet: run `kernelstrain tasks filter DIR` (needs PyTorch, extra `[exec]`) "
                    "to execute every program and keep the passing ones in `tasks_fused.jsonl`.\n")
    return f"""---
license: mit
pretty_name: KernelStrain fused-operator tasks (seed {stats['seed']})
task_categories:
  - text-generation
tags:
  - code
  - pytorch
  - cuda
  - kernel-optimization
  - kernelbench
  - synthetic-dataset
configs:
{configs}
---

# KernelStrain fused-operator tasks — seed {stats['seed']}

Programs of 2–6 PyTorch operators in KernelBench form (`class Model(nn.Module)`,
module-level shape constants, `get_inputs()`, `get_init_inputs()`), composed by a typed
grammar with shape inference (`kernelstrain tasks fused --count {stats['count']} --seed {stats['seed']}`,
`{stats['generator']}`). Each row carries the source, operator list, shapes, dtypes, FLOPs
and minimum bytes from the cost model, and once filtered the eager / compiled times and
the filter's verdict.

{filtered}
| | |
|---|---|
| Rows | {stats['rows']:,} |
| Distinct operator sequences | {stats['distinct_op_sequences']:,} |
| Operators per task | {', '.join(f'{k}: {v}' for k, v in stats['ops_per_task'].items())} |
| Dtypes | {', '.join(f'{k} {v}' for k, v in stats['by_dtype'].items())} |

## Files

| file | rows | size | sha256 |
|---|---|---|---|
{files}

Load with `datasets.load_dataset("path/to/this/dir", "fused_tasks", split="train")`.
"""
