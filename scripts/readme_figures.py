"""The README's full-run figures, read off a generated dataset, to paste after a full run.

    python3 scripts/readme_figures.py DATA_DIR      # e.g. after `kernelstrain generate --seed 0 --out data/`

Prints the sentence and the contamination table of README's *Holdout splits and
contamination* (episodes, steps, episodes.jsonl size, distinct training candidates, each
split's exact matches and 13-gram overlaps) and, when DATA_DIR/report.html exists
(`kernelstrain report DATA_DIR`), the report's size for the command table. The figures a
small run already determines (file counts, boilerplate, split sizes, module and op counts)
are checked against README.md by tests/test_readme.py instead.
"""
import json
import sys
from pathlib import Path


def figures(data: Path) -> str:
    stats = json.loads((data / "stats.json").read_text(encoding="utf-8"))
    h = stats["holdout"]
    size = stats["files"]["episodes.jsonl"]["bytes"] / 1e9
    lines = [f"Figures for the full default profile (`kernelstrain generate --seed {stats['seed']}`: "
             f"{stats['episodes']:,} episodes, {stats['steps']:,} steps, {size:.2f} GB episodes.jsonl holding "
             f"{h['contamination_method']['training_candidates']:,} distinct candidates):", "",
             "| split | tasks | exact: solution / baseline / reference | 13-gram overlap of solutions, max (mean) "
             "| kernel-specific, max (mean) | baselines kernel-specific, max (mean) |",
             "|---|---|---|---|---|---|"]
    for name, split in h["splits"].items():
        c = split["contamination"]
        ex, ng, n = c["exact"], c["ngram"], c["tasks"]
        exact = f"{ex['solution']} / {ex['baseline']} / {ex['reference']}"
        if ex["any"]:
            exact += f" ({'all ' if ex['any'] == n else ''}{ex['any']} {'have' if ex['any'] != 1 else 'has'} at least one)"

        def pair(key):
            return f"{ng[key]['max']:.2f} ({ng[key]['mean']:.2f})"
        lines.append(f"| `{name}` | {n} | {exact} | {pair('solution_ngram')} | {pair('solution_ngram_specific')} "
                     f"| {pair('baseline_ngram_specific')} |")
    report = data / "report.html"
    if report.exists():
        lines += ["", f"report: {report.stat().st_size / 1e6:.1f} MB ({report})"]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(figures(Path(sys.argv[1])))
