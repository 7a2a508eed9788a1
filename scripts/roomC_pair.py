"""Two generated datasets of one profile and seed, episode by episode: how many are byte-identical, and for those that
differ, the module, GPU, steps and best before and after (the effect of a change on the episodes it touches).

    python3 scripts/roomC_pair.py BEFORE_DIR AFTER_DIR
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def rows(data: Path) -> list:
    name = "episodes.jsonl" if (data / "episodes.jsonl").exists() else "sessions.jsonl"
    return [json.loads(line) for line in (data / name).read_text().splitlines()]


def n_steps(row: dict) -> int:
    """Steps of an episode (default profile) or a session (kernelinfer)."""
    return row["num_steps"] if "num_steps" in row else len(row["steps"])


def main(argv: list) -> int:
    before, after = rows(Path(argv[0])), rows(Path(argv[1]))
    same = sum(json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) for a, b in zip(before, after))
    print(f"{len(before)} / {len(after)} episodes, {same} identical")
    changed = Counter()
    for a, b in zip(before, after):
        if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True):
            continue
        changed[a["module"]] += 1
        print(f"  {a['id']} {a['module']} {a['gpu']} {a['dtype']}: steps {n_steps(a)} -> {n_steps(b)}, best "
              f"{a['best']['time_ms'] * 1e3:.2f} -> {b['best']['time_ms'] * 1e3:.2f} us")
    print("changed by module:", dict(changed))
    for name, rs in (("before", before), ("after", after)):
        steps = [n_steps(r) for r in rs]
        print(f"{name}: {sum(steps)} steps, {sum(steps) / len(steps):.2f} an episode")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
