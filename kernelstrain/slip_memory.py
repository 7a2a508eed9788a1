"""What one session remembers of its own slips (limits.py is its memory of the hardware).

A slip breaks one line of the candidate: its site. The site is named by that line's text in
the clean code (stripped), not by an index into the code's sites, which moves when a
parameter or a rung adds or drops a line; the rung is not part of it either, since a
rewrite copies the line as the engineer last fixed it. Once a slip of one kind was made at a
line and the tool said so, the engineer does not write it on that line again in the session, nor
(but for a misspelt name) that kind on any other line (SlipMemory.free).

>>> code = "__global__ void k(float* y) {\\n    const int row = blockIdx.x;\\n    y[row] = 0.f;\\n}\\n"
>>> site(code, "cuda", 7)
('identifier', 'const int row = blockIdx.x;')
>>> memory = SlipMemory()
>>> memory.learn(code, "cuda", 7)
>>> memory.free("identifier", code, "cuda"), memory.free("shfl_mask", code, "cuda")
([], [])
"""
from __future__ import annotations

from collections import Counter

from . import slips
from .mutations import typo_sites


def site_lines(kind: str, code: str, impl: str) -> list[int]:
    """The line each site of `kind` breaks in `code` (a typo: the declaration it renames)."""
    if kind == "identifier":
        return [c[0] for c in typo_sites(code, impl)]
    return slips.site_lines(kind, code)


def site(code: str, impl: str, pick: int) -> tuple[str, str] | None:
    """(kind, the stripped text of the line it breaks) of slip `pick` in clean `code`, the
    line chosen as slips.apply chooses it; None when the code has no site of that kind."""
    kind = slips.kind_of(pick)
    lines = site_lines(kind, code, impl) if kind != "?" else []
    if not lines:
        return None
    return kind, code.split("\n")[lines[pick % slips.SITE % len(lines)]].strip()


class SlipMemory:
    """Per session: the (kind, line text) of every slip made."""

    def __init__(self):
        self.made: set = set()

    def learn(self, code: str, impl: str, pick: int) -> None:
        """Remember slip `pick` made in clean `code`."""
        key = site(code, impl, pick)
        if key is not None:
            self.made.add(key)

    def free(self, kind: str, code: str, impl: str) -> list[int]:
        """Indices of the sites of `kind` in `code` (site_lines' order) not slipped at yet. A kind other
        than the misspelt name (a cast that drops const, a missing `;`, a shuffle mask) is made once a
        session, at any line: the tool's text said what was wrong, and the engineer writes it right after
        (reader, kernelinfer seed 8181 on a6b79f4: 23 such kinds made again in 16 of 60 sessions, e.g.
        `reinterpret_cast<const uint4>` twice). A mistyped name is a new slip at each other name."""
        if kind != "identifier" and kind in self.kinds:
            return []
        lines = code.split("\n")
        return [i for i, j in enumerate(site_lines(kind, code, impl)) if (kind, lines[j].strip()) not in self.made]

    @property
    def kinds(self) -> set:
        return {kind for kind, _ in self.made}


def repeats(slipped: list) -> Counter:
    """Figures of one session's slips, each (step, rung, kind, line text) in step order:
    `slips`; `repeats`, slips at a (kind, line) the session slipped at before; `rung_repeats`,
    the same on the same rung; `back_to_back`, a repeat on the very next step; `sessions_3x`,
    1 when one (kind, line) is slipped at three times or more."""
    out, seen, rung_seen, count = Counter(), set(), set(), Counter()
    last = None
    for step, rung, kind, text in slipped:
        key = (kind, text)
        out["slips"] += 1
        out["repeats"] += key in seen
        out["rung_repeats"] += (rung, key) in rung_seen
        out["back_to_back"] += last is not None and last == (step - 1, key)
        seen.add(key)
        rung_seen.add((rung, key))
        count[key] += 1
        last = (step, key)
    out["sessions_3x"] = int(bool(count) and max(count.values()) >= 3)
    return out
