"""The execution filter (needs torch, extra [exec]): each rejection reason on programs made
to fail it, and generation + filter end to end on a small sample, resumed."""
import importlib.util
import json

import pytest

from kernelstrain.cli import main
from kernelstrain.fused.dataset import CANDIDATES, candidate
from kernelstrain.fused.degenerate import reason as degenerate_reason

# slow: two workers' cold torch.compile, ~90 s on 2 cores (README: Fused-operator tasks)
pytestmark = [pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch not installed (extra [exec]: README, Quick start)"),
              pytest.mark.slow]

TEMPLATE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        {init}

    def forward(self, x):
        x = self.linear(x)
        {body}
        return x


features = 64


def get_inputs():
    return [torch.randn(32, features)]


def get_init_inputs():
    return [features]
'''
BAD = {
    "random_op": "x = F.dropout(x, p=0.5, training=True)",
    "all_zero": "x = x * 0.0",
    "nan_inf": "x = torch.log(x - 1e9)",
    "vanishing": "x = x * 1e-9",
    "constant": "x = torch.sum(x, dim=-1, keepdim=True) * 0.0 + 3.0",
    "eager_error": "x = torch.matmul(x, torch.ones(3, 3))",
    "bad_output": "x = (x, x)",
    # a weight drawn from an unseeded generator in __init__: each build differs
    "nondeterministic": ("x = x * self.gain", "self.gain = torch.rand(1, generator=torch.Generator().manual_seed("
                                              "__import__('time').time_ns() % 1000003)).item() + 1.0"),
}


def _row(reason: str, body, i: int) -> dict:
    # the metadata of a generated program the static rules pass (seed 0's first is a no-op chain,
    # which the filter rejects before running anything): the run decides these rows
    base = next(c for c in map(lambda k: candidate(0, k), range(100)) if degenerate_reason(c["program"], "fp32") is None)
    body, init = body if isinstance(body, tuple) else (body, "")
    # ops of its own: the filter takes a sequence once (a second row of the same ops is a duplicate)
    return {**base, "id": f"bad_{reason}", "index": i, "dtype": "fp32", "ops": ["linear", reason],
            "source": TEMPLATE.format(body=body, init=init),
            "source_sha256": f"{i:064x}"}


@pytest.mark.parametrize("reason", sorted(BAD))
def test_each_rejection_reason(reason):
    from kernelstrain.fused.execute import check
    verdict = check(_row(reason, BAD[reason], 0), "cpu", 0.001, 100.0, 1)
    assert verdict["pass"] is False and verdict["reason"] == reason, verdict


def test_generate_filter_and_resume(tmp_path, capsys):
    out = tmp_path / "d"
    assert main(["tasks", "fused", "--count", "3", "--seed", "0", "--out", str(out), "--quiet"]) == 0
    # put programs that must be rejected in front of the generated candidates
    lines = (out / CANDIDATES).read_text().splitlines()
    bad = [json.dumps(_row(r, BAD[r], k)) for k, r in enumerate(("random_op", "all_zero", "constant"))]
    (out / CANDIDATES).write_text("\n".join(bad + lines) + "\n")
    # hand-written rows are not what `tasks fused` composes: filter runs them only when told to
    assert main(["tasks", "filter", str(out), "--jobs", "2", "--device", "cpu", "--reps", "1"]) == 2
    assert "--trust-dataset" in capsys.readouterr().err
    assert main(["tasks", "filter", str(out), "--jobs", "2", "--device", "cpu", "--reps", "1", "--trust-dataset"]) == 0
    printed = capsys.readouterr().out
    assert "random_op" in printed and "all_zero" in printed
    tasks = [json.loads(x) for x in (out / "tasks_fused.jsonl").read_text().splitlines()]
    rejects = [json.loads(x) for x in (out / "rejects_fused.jsonl").read_text().splitlines()]
    assert len(tasks) == 3 and all(t["filter"]["pass"] and t["compiled_ms"] is not None for t in tasks)
    assert {r["id"]: r["reason"] for r in rejects if r["id"].startswith("bad_")} == \
        {"bad_random_op": "random_op", "bad_all_zero": "all_zero", "bad_constant": "constant"}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["filtered"] and stats["rows"] == 3 and stats["filter"]["rejected"] == len(rejects)
    assert "config_name: fused_tasks" in (out / "README.md").read_text()
    assert "evaluated" in (out / "filter_report.txt").read_text()
    before = (out / "tasks_fused.jsonl").read_bytes()
    # a rerun continues from filter_progress.jsonl: nothing runs again, the same tasks come out
    assert main(["tasks", "filter", str(out), "--jobs", "2", "--device", "cpu", "--reps", "1", "--trust-dataset"]) == 0
    assert json.loads((out / "stats.json").read_text())["filter"]["executed_this_run"] == 0
    assert (out / "tasks_fused.jsonl").read_bytes() == before
    # other options do not silently reuse the progress file
    assert main(["tasks", "filter", str(out), "--device", "cpu", "--reps", "2", "--trust-dataset"]) == 2
    assert main(["stats", str(out)]) == 0
    assert "tasks (filtered)" in capsys.readouterr().out
