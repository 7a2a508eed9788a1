"""Time and memory of the contamination measurement on a generated dataset.

    python scripts/bench_contamination.py DATA_DIR

Measures every holdout split listed in DATA_DIR/stats.json against its episodes.jsonl
(as `generate` and `validate` do) and prints wall time, training candidates scanned,
episodes.jsonl size and the process's peak RSS before and after, so one can see that
memory follows the held-out set and the distinct-candidate digests, not the data size.
"""
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kernelstrain  # noqa: E402
from kernelstrain import contamination  # noqa: E402


def main() -> int:
    data = Path(sys.argv[1])
    splits = {n: s["file"] for n, s in json.loads((data / "stats.json").read_text())["holdout"]["splits"].items()}
    contamination.boilerplate()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    found = contamination.measure(data, splits, kernelstrain.open(data).layout)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = (data / "episodes.jsonl").stat().st_size / 1e6
    print(f"episodes.jsonl {size:,.0f} MB, {found['training_candidates']:,} distinct training candidates, "
          f"{sum(s['tasks'] for s in found['splits'].values())} held-out tasks")
    print(f"wall {wall:.1f} s ({size / wall:.1f} MB/s); peak RSS {before:.0f} MB before, {after:.0f} MB after")
    for name, s in found["splits"].items():
        print(name, json.dumps({k: s[k] for k in ("tasks", "exact", "ngram")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
