"""Regenerate tests/golden/renders.json (all modules, or only those named) after a deliberate
render or launch-model change.

    python3 scripts/update_golden.py [module ...]
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kernelstrain.ops import REGISTRY  # noqa: E402
from test_golden import GOLDEN, golden_of  # noqa: E402


def main(names) -> int:
    table = json.loads(GOLDEN.read_text()) if GOLDEN.exists() and names else {}
    for n in names or sorted(REGISTRY):
        table[n] = golden_of(REGISTRY[n])
    table = {n: table[n] for n in sorted(table) if n in REGISTRY}
    GOLDEN.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN.relative_to(ROOT)}: {len(table)} modules, {sum(map(len, table.values()))} hashes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
