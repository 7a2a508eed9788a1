"""`kernelstrain show DIR EPISODE_ID [--step N]`: the report's episode view in a terminal —
a table of the steps, then one step's feedback and its unified diff against the best
before it (ANSI colour when writing to a terminal)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .errors import UsageError
from .report import browser_episode, read_feedback
from .safety import row_guard, terminal_values
from .dataset import episode_source

ANSI = {"ok": "32", "wrong_result": "33", "compile_error": "31", "kept": "1;32", "reverted": "2",
        "failed": "31", "rebench": "36", "add": "32", "del": "31", "hunk": "36", "head": "1"}


def find_episode(path: Path, episode_id: str) -> dict:
    """The episode row with this id (rows of other ids are skipped without parsing)."""
    if not path.exists():
        raise UsageError(f"{path.parent} has no {path.name} (is it a KernelStrain dataset?)")
    needle = f'"id":"{episode_id}"'.encode()
    with open(path, "rb") as fh:
        for line in fh:
            if needle in line[:400]:
                row = json.loads(line)
                if row.get("id") == episode_id:
                    return row
    raise UsageError(f"no episode {episode_id!r} in {path}")


def decision(s: dict) -> str:
    if s["kept"]:
        return "kept"
    if s["status"] != "ok":
        return "failed"
    return "rebench" if s["kind"] == "rebench" else "reverted"


def _ms(v) -> str:
    return "-" if v is None else f"{v:.4f}" if v < 0.1 else f"{v:.3f}" if v < 10 else f"{v:.1f}"


def _hms(s: int) -> str:
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def render(view: dict, step: int | None = None, colour: bool = False) -> str:
    """The terminal text of an episode view (report.browser_episode) with one step in detail."""
    def paint(text: str, key: str) -> str:
        return f"\x1b[{ANSI[key]}m{text}\x1b[0m" if colour and key in ANSI else text

    view = terminal_values(view)      # dataset text: its escape sequences must not reach the terminal
    steps = view["steps"]
    if not steps:
        raise UsageError(f"episode {view['id']} has no steps")
    if step is None:
        step = view["best"]["step"] or steps[0]["step"]
    by_step = {s["step"]: s for s in steps}
    if step not in by_step:
        raise UsageError(f"episode {view['id']} has steps {steps[0]['step']}..{steps[-1]['step']}, not {step}")
    best = view["best"]
    lines = [paint(f"{view['id']}  {view['module']} on {view['gpu']} ({view['arch']}), {view['dtype']}, "
                   f"{view['shape']}", "head"),
             f"baseline {view['baseline_tag']} {_ms(view['baseline_ms'])} ms; best {_ms(best['time_ms'])} ms at step "
             f"{best['step']} ({best['speedup']}x); {len(steps)} steps, simulated {_hms(view['elapsed_s'])}", ""]
    cols = ["step", "clock", "kind", "variant", "params", "status", "ms", "best ms", "decision"]
    rows = [[str(s["step"]), _hms(s["elapsed_s"]), s["kind"], s["tag"], s["params"], s["status"], _ms(s["time_ms"]),
             _ms(s["best_ms"]), decision(s)] for s in steps]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for s, r in zip(steps, rows):
        cells = [v.rjust(w) if i in (0, 6, 7) else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))]
        cells[5] = paint(cells[5], s["status"])
        cells[8] = paint(r[8], r[8])          # the last column: no padding to strip
        lines.append(("> " if s["step"] == step else "  ") + "  ".join(cells).rstrip())
    s = by_step[step]
    lines += ["", paint(f"step {s['step']} ({s['kind']}, {s['tag']}): {s['status']}"
                        + (f" [{s['failure']}]" if s["failure"] else "") + f", {decision(s)}", "head"),
              "feedback:"]
    lines += ["  " + line for line in (s["feedback"] or s["error"] or "(the episode ends here: no feedback turn)").splitlines()]
    lines += ["", f"diff against the best before it (step {s['against']}):"]
    for line in (s["diff"] or "(identical to the best)").splitlines():
        key = "hunk" if line.startswith("@@") else "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        lines.append(paint(line, key))
    return "\n".join(lines) + "\n"


def show(data: Path, episode_id: str, step: int | None = None, colour: bool = False) -> int:
    episodes, chats, as_episode = episode_source(data)
    with row_guard(f"{episodes.name}: episode {episode_id}"):
        ep = as_episode(find_episode(episodes, episode_id))
        feedback = read_feedback(chats, {episode_id}).get(episode_id, [])
        text = render(browser_episode(ep, feedback), step, colour)
    sys.stdout.write(text)
    return 0
