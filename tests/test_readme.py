"""The README says what the product does: its command table lists every flag argparse takes,
every verb's help is whole, and the figures a small run determines match one (issue 33).
Figures of the full run are printed by scripts/readme_figures.py for pasting."""
import json
import re
from pathlib import Path

import pytest

from kernelstrain.cli import build_parser
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan
from kernelstrain.profiles import load_profile

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}


def number(text: str) -> int:
    """'eight' -> 8, 'Twenty-one' -> 21, '2,313' -> 2313."""
    text = text.lower().replace(",", "")
    if text.isdigit():
        return int(text)
    tens, _, unit = text.partition("-")
    return WORDS[tens] + (WORDS[unit] if unit else 0)


def choices(parser) -> dict:
    return parser._subparsers._group_actions[0].choices if parser._subparsers else {}


def verbs():
    """(README key, parser) of every command: `tasks fused`, `tasks filter` apart."""
    for name, sp in choices(build_parser()).items():
        yield from ((f"{name} {k}", v) for k, v in choices(sp).items()) if choices(sp) else [(name, sp)]


def table_row(key: str) -> str:
    """The command cell of README's command table for `kernelstrain KEY ...`."""
    for line in README.splitlines():
        if line.startswith(f"| `kernelstrain {key} ") or line.startswith(f"| `kernelstrain {key}`"):
            return re.split(r"(?<!\\)\|", line)[1]
    raise AssertionError(f"README's command table has no row for `kernelstrain {key}`")


@pytest.mark.parametrize("key, parser", list(verbs()), ids=[k for k, _ in verbs()])
def test_command_table_lists_every_flag(key, parser):
    cell = table_row(key)
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert [f for f in flags if not re.search(re.escape(f) + r"\b", cell)] == [], cell


def test_every_verbs_help_line_is_whole():
    """`kernelstrain --help` lists each verb with its docstring's whole first paragraph."""
    parser = build_parser()
    for action in parser._subparsers._group_actions[0]._choices_actions:
        fn = parser._subparsers._group_actions[0].choices[action.dest].get_default("func")
        first = " ".join(fn.__doc__.split("\n\n")[0].split())
        assert action.help == first, action.dest
        assert action.help.endswith(".") and action.help.count("(") == action.help.count(")"), action.help
    assert parser.description.endswith(".")


def test_figures_a_small_run_determines(small_dataset):
    stats = json.loads((small_dataset / "stats.json").read_text())
    files = sorted(p.name for p in small_dataset.iterdir() if not p.name.startswith("."))
    said = number(re.search(r"`generate` writes (\S+) files \(default profile\)", README).group(1))
    assert said == len(files), files
    for name in files:
        row = "*.validation.jsonl" if name.endswith(".validation.jsonl") else name
        assert f"| `{row}` |" in README, name            # and each has its row in the files table

    ops = {}
    for m in REGISTRY.values():
        ops.setdefault(m.op, set()).add(m.impl)
    m = re.search(r"(\d+) modules implement (\d+) ops in (\d+) families", README)
    assert tuple(map(int, m.groups())) == (len(REGISTRY), len(ops), len({x.family for x in REGISTRY.values()}))
    both = number(re.search(r"([A-Z][a-z-]+) ops have both a CUDA and a\s+Triton module", README).group(1))
    assert both == sum(1 for impls in ops.values() if len(impls) == 2)
    for name, said in (("kernelstrain", r"the seed card's (\d+) modules / (\d+) ops"),
                       ("kernelinfer", r"the kernelinfer profile\s+(\d+) modules / (\d+) inference ops")):
        profile = load_profile(name)
        assert tuple(map(int, re.search(said, README).groups())) == (
            len(profile.modules), len({REGISTRY[x].op for x in profile.modules})), name

    # boilerplate 13-grams are registry-wide: a small run's stats.json states them
    specific = stats["holdout"]["contamination_method"]["specific"]
    k, n, grams = re.search(r">= (\d+) of the registry's (\d+) modules \(([\d,]+) 13-grams\)", specific).groups()
    assert re.search(rf"renders of ≥ 10% of the registry's modules \({k} of {n}: .*? — {grams} 13-grams\)", README, re.S)

    # the holdout splits (the profile's, whatever the episode count)
    splits = stats["holdout"]["splits"]
    plan = make_plan(load_profile("kernelstrain"), 0)
    combos = len(plan.train) + len({t.key for tasks in plan.splits.values() for t in tasks})
    row = re.search(r"\| (\d+) of ([\d,]+) combos \(8%, the card's figure\) \|", README)
    assert (int(row.group(1)), number(row.group(2))) == (splits["combo"]["tasks"], combos)
    unseen = re.search(r"`adamw`, `flash_attn_bwd`, `selective_scan`: (\d+) tasks, (\d+) modules", README)
    assert (int(unseen.group(1)), int(unseen.group(2))) == (splits["unseen_op"]["tasks"], len(splits["unseen_op"]["modules"]))
    assert splits["unseen_op"]["ops"] == ["adamw", "flash_attn_bwd", "selective_scan"]
    assert f"{load_profile('kernelstrain').episodes:,} episodes" in README
