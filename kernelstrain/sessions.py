"""The sessions layout (the kernelinfer card): one whole session a row, and its batches.

`session_row` is a pure function of the public episode row (like episodes.chat_rows): the
chat in `messages` (system, task, then each candidate and its stamped result) and a compact
`trace` — each step's record without its code. `episode_row` goes back: it re-renders every
step's code from the trace (tag, params, bug, typo), so validate and qa judge a session with
the episode checks. `sessions.jsonl` is the whole run; `batches/batch_NNN.jsonl` cut it into
files of `batch_size` sessions whose concatenation is sessions.jsonl, byte for byte.

>>> batch_name(7)
'batches/batch_007.jsonl'
"""
from __future__ import annotations

from pathlib import Path

from .episodes import build_episode, multiturn_rows, session_messages
from .fields import as_dict
from .gpus import GPUS
from .messages import clock
from .ops import REGISTRY
from .rerender import render_code, with_typo
from .schema import EPISODE_KEYS, SCHEMA, SESSION_KEYS, STEP_KEYS, TRACE_KEYS
from .writers import StreamFile

SESSIONS_FILE = "sessions.jsonl"
BATCH_DIR = "batches"
QA_DIR = "qa_reports"
_TASK_KEYS = ("id", "task_id", "op", "impl", "module", "family", "gpu", "arch", "dtype", "shape", "signature", "desc")


def session_row(ep: dict, timestamps: bool) -> dict:
    """The sessions.jsonl object of a public episode row, in SESSION_KEYS order."""
    base = ep["baseline"]
    values = {**{k: ep[k] for k in _TASK_KEYS}, "schema": SCHEMA["session"], "baseline_ms": base["time_ms"],
              "torch_eager_ms": ep["torch_eager_ms"], "torch_compile_ms": ep["torch_compile_ms"], "baseline": {"tag": base["tag"], "params": base["params"]},
              "best": ep["best"], "attempts": ep["attempts"], "end": ep["end"], "num_steps": len(ep["steps"]),
              "elapsed_s": ep["elapsed_s"], "elapsed_hms": clock(ep["elapsed_s"]), "seed": ep["seed"],
              "generator": ep["generator"], "trace": [{k: s[k] for k in TRACE_KEYS} for s in ep["steps"]],
              "messages": session_messages(ep, timestamps)}
    return {k: values[k] for k in SESSION_KEYS}


def session_rows(plan, index: int) -> tuple[dict, dict]:
    """({file key (writers.STREAMED): rows}, public episode row) of one plan index: the
    session row and its chat windows."""
    ep = build_episode(plan, index).row()
    out = plan.profile.output
    return {"sessions": [session_row(ep, out.timestamps)],
            "sft_multiturn": multiturn_rows(ep, out.timestamps, out.max_context_tokens)}, ep


def episode_row(session: dict) -> dict:
    """The public episode row a session was made from: every step's code (and the baseline's)
    re-rendered from its trace record. Raises ValueError when a recorded typo cannot be applied."""
    module = REGISTRY[session["module"]]
    key = (session["module"], session["gpu"], session["dtype"], tuple(as_dict(session["shape"]).items()))
    gpu = GPUS[session["gpu"]]
    hip_arch = gpu.arch if gpu.vendor == "amd" else ""

    def code(tag, params, bug, typo):
        text = render_code(*key, tag, tuple(as_dict(params).items()), bug)
        if typo is None:
            return text
        broken = with_typo(text, module.impl, typo, hip_arch, session["dtype"], key[3])
        if broken is None:
            raise ValueError(f"typo {typo} cannot be applied to {tag}")
        return broken[0]

    base = session["baseline"]
    steps = []
    for s in session["trace"]:
        text = code(s["tag"], s["params"], s["bug"], s["typo"])
        steps.append({k: text if k == "code" else s[k] for k in STEP_KEYS})
    values = {**{k: session[k] for k in _TASK_KEYS}, "schema": SCHEMA["episode"],
              "baseline": {"tag": base["tag"], "params": base["params"],
                           "code": code(base["tag"], base["params"], None, None), "time_ms": session["baseline_ms"]},
              "steps": steps, **{k: session[k] for k in ("torch_eager_ms", "torch_compile_ms", "best", "attempts", "end",
                                                         "elapsed_s", "seed", "generator")}}
    return {k: values[k] for k in EPISODE_KEYS}


def stored_steps(session: dict) -> list:
    """A session's trace with each step's code taken from its assistant turn (messages:
    system, task, then each step's answer and feedback): the code as the row stores it."""
    out = []
    for i, s in enumerate(session["trace"]):
        text = session["messages"][2 + 2 * i]["content"]
        out.append({**s, "code": text[text.index("\n") + 1:text.rindex("\n```")]})
    return out


def batch_name(k: int) -> str:
    return f"{BATCH_DIR}/batch_{k:03d}.jsonl"


def write_batches(out: Path, batch_size: int) -> dict:
    """Cut out/sessions.jsonl into batches/ of `batch_size` sessions; returns each batch's
    {rows, bytes, sha256} by its path relative to `out`."""
    (out / BATCH_DIR).mkdir(exist_ok=True)
    batches: dict = {}           # name -> StreamFile
    with open(out / SESSIONS_FILE, "rb") as src:
        for n, raw in enumerate(src):
            name = batch_name(n // batch_size)
            if name not in batches:
                for f in batches.values():
                    f.close()
                batches[name] = StreamFile(out / name)
            batches[name].write_block(raw, 1)
    for f in batches.values():
        f.close()
    return {name: f.summary() for name, f in batches.items()}
