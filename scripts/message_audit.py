"""Audit the run-time texts and labels of a dataset against what the tools print (issue 28
items 2, 4, 6), without a GPU or a compiler (verify --text checks the compile errors):

- labels: a ptxas shared-memory error states a static size over the target's static cap
  (sim.static_smem_cap) and the rung declares static __shared__; a launch-time failure is
  worded as the runtime raises it (torch.AcceleratorError / Triton's RuntimeError) and labelled
  "launch failed"; "invalid configuration argument" only for a block over 1,024 threads;
- mismatches: torch.testing.assert_close's AssertionError, the counts over the output's real
  element count, each greatest difference over its tolerance, its value one of the output
  dtype's printed as Python prints the float (the whole repr, not 6 digits), its index inside the output's shape, the absolute and
  relative indices independent (how often they differ), an off-by-one at a row's last element;
- faults: an HSA address inside the 47-bit user space and page aligned;
- benchmark lines: one time unit through each conversation, every `time:` line in one format.

    python3 scripts/message_audit.py DATA [--sample N]

Exit 1 when a check fails.
"""
import argparse
import ast
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import messages  # noqa: E402
from kernelstrain.fields import as_dict  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.runtime_texts import in_dtype  # noqa: E402
from kernelstrain.sim import static_smem_cap  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402
from kernelstrain.tolerances import FEEDBACK, FEEDBACK_DEFAULT  # noqa: E402
from kernelstrain.verify import _rows  # noqa: E402

_GREATEST = re.compile(r"^Greatest (absolute|relative) difference: (\S+) at index (\([^)]*\))"
                       r"(?: \(up to (\S+) allowed\))?$", re.M)
_COUNT = re.compile(r"^Mismatched elements: (\d+) / (\d+) \(([\d.]+)%\)$", re.M)
_TIME_LINE = re.compile(r"^(?:\[t\+\d+:\d\d:\d\d\] )?Step \d+: correct\.\ntime: \d+(?:\.\d+)? (ms|us), \d+ registers, "
                        r"\d+ B shared memory", re.M)
_TIMES = re.compile(r"\b\d+(?:\.\d+)? (ms|us)\b")


def check_mismatch(text: str, shape: tuple, dtype: str, bug: str, tally: Counter) -> list:
    problems = []
    head = text.split("\n", 1)[0]
    if head not in ("AssertionError: Tensor-likes are not close!", "AssertionError: Tensor-likes are not equal!"):
        return [f"not assert_close's first line: {head!r}"]
    numel = math.prod(shape)
    count = _COUNT.search(text)
    if not count or int(count.group(2)) != numel or not 0 < int(count.group(1)) <= numel \
            or f"{int(count.group(1)) / numel:.1%}" != count.group(3) + "%":
        problems.append(f"mismatch count {count and count.group(0)!r} for {numel} elements")
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    found = {m.group(1): m for m in _GREATEST.finditer(text)}
    for kind in ("absolute", "relative"):
        m = found.get(kind)
        if m is None:
            problems.append(f"no greatest {kind} difference")
            continue
        value, index = m.group(2), ast.literal_eval(m.group(3))
        if not (len(index) == len(shape) and all(0 <= i < d for i, d in zip(index, shape))):
            problems.append(f"{kind} index {index} outside the shape {shape}")
        if dtype not in ("int", "int8") or kind == "relative":
            number = float(value)
            if value not in ("inf", "nan") and (repr(number) != value or in_dtype(number, dtype) != number):
                problems.append(f"{kind} difference {value} is not a {dtype} value printed as Python prints it")
            if head.endswith("close!") and not (number > (atol if kind == "absolute" else rtol) or math.isnan(number)):
                problems.append(f"greatest {kind} difference {value} within its tolerance")
        if bug == "off_by_one" and index[-1] != shape[-1] - 1:
            problems.append(f"off_by_one {kind} at {index}, not a row's last element (shape {shape})")
    if count and int(count.group(1)) > 1 and len(found) == 2:
        tally["multi-element mismatches"] += 1
        tally["... abs and rel at different indices"] += found["absolute"].group(3) != found["relative"].group(3)
    return problems


def check_fault(text: str) -> list:
    m = re.search(r"on address 0x([0-9a-f]+)\.", text)
    if m is None:
        return [] if text.startswith("torch.AcceleratorError: ") else [f"unknown fault text {text[:80]!r}"]
    address = int(m.group(1), 16)
    return [] if address < 1 << 47 and address % 4096 == 0 else [f"fault address 0x{m.group(1)}: not a 47-bit page"]


def check_label(step: dict, module, task) -> list:
    error, failure = step["error"] or "", step["failure"]
    v = module.variant(step["tag"])
    launch = messages.fails_at_launch(failure, error)
    first = error.split("\n", 1)[0]
    if launch != first.startswith(("torch.AcceleratorError: ", "RuntimeError: ")) \
            and not error.startswith("Memory access fault"):
        return [f"{failure} failure labelled {'launch failed' if launch else 'compile error'}: {first[:80]!r}"]
    m = re.search(r"uses too much shared data \(0x([0-9a-f]+) bytes, 0x([0-9a-f]+) max\)", error)
    if m:
        size, cap = int(m.group(1), 16), int(m.group(2), 16)
        if v.smem != "static" or cap != static_smem_cap(task.gpu) or size <= cap:
            return [f"ptxas shared-memory error {m.group(0)} for a {v.smem} rung on {task.gpu.arch}"]
    if "invalid configuration argument" in first and failure != "resources":
        return [f"invalid configuration for a {failure} failure"]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    args = ap.parse_args(argv)
    data = Path(args.data)
    tally, problems = Counter(), []
    path, rows, stored_steps = _rows(data)
    for n, ep in rows:
        m = REGISTRY[ep["module"]]
        task = make_task(m, ep["gpu"], ep["dtype"], as_dict(ep["shape"]))
        for s in stored_steps(ep):
            where = f"{path.name}:{n} step {s['step']} ({ep['module']} {s['tag']} on {ep['gpu']})"
            if s["status"] == "wrong_result" and s["failure"] == "fault":
                tally["faults"] += 1
                found = check_fault(s["error"])
            elif s["status"] == "wrong_result":
                tally["mismatches"] += 1
                shape, dtype = messages._output_shape(m, task)
                found = check_mismatch(s["error"].split("\nTwo runs")[0], shape or (1,), dtype, s["bug"], tally)
            elif s["status"] == "compile_error":
                tally["compile errors"] += 1
                tally["... launch failed"] += messages.fails_at_launch(s["failure"], s["error"])
                found = check_label(s, m, task)
            else:
                continue
            problems += [f"{where}: {p}" for p in found]
    chats = data / "sft_multiturn.jsonl"
    for n, line in enumerate(chats.open() if chats.exists() else (), 1):
        turns = [t["content"] for t in json.loads(line)["messages"] if t["role"] != "assistant"]
        units = Counter(u for t in turns for u in _TIMES.findall(t))
        tally["conversations"] += 1
        tally["... time lines"] += sum(len(_TIME_LINE.findall(t)) for t in turns)
        heads = sum(t.count("correct.\ntime: ") for t in turns)
        if len(units) > 1:
            problems.append(f"{chats.name}:{n}: time units {dict(units)} in one conversation")
        if heads != sum(len(_TIME_LINE.findall(t)) for t in turns):
            problems.append(f"{chats.name}:{n}: a `time:` line in another format")
    for k, v in tally.items():
        print(f"{k:40} {v}")
    print(f"{len(problems)} problem(s)")
    for p in problems[:50]:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
