"""Real tools' texts and figures the generator cannot compute: what nvcc/ptxas, clang with
the HIP headers and Triton print for each architecture-failing candidate the ops can render,
checked in as arch_texts.json and written by scripts/arch_corpus.py with the tools; and the
shared memory Triton allocates (its metadata.shared, which its OutOfResources error quotes)
for each Triton candidate over a device's cap, triton_smem.json, written by
scripts/triton_smem_corpus.py, keyed by the source and the specialization Triton compiles it at
(compilers.specialization_key: the same source gives other figures at another HEAD_DIM, argument
divisibility or pointer type); and the names the HIP headers bring in (hip_names.txt,
scripts/hip_header_names.py), which clang's typo correction may offer.

A text is keyed by the cell (module, target arch) and the sha256 of the candidate's exact
source: ptxas's PTX line numbers move with every parameter that changes the lowered code,
so no rule short of the compiler gives them. Texts are stored in the form
compilers.tool_text gives (paths normalised; ptxas's temporary PTX file as
`tmpxft_candidate.ptx`), packed: lines a source excerpt repeats from the code are stored as
their line number, positions as numbers apart from a per-cell template shared by every
candidate whose errors have the same shape.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

PATH = Path(__file__).with_name("arch_texts.json")
SMEM_PATH = Path(__file__).with_name("triton_smem.json")
HIP_NAMES_PATH = Path(__file__).with_name("hip_names.txt")
SMEM_VERSION = 2         # 2: a figure is keyed by source and specialization
PROFILES = ("kernelstrain", "kernelinfer")   # the bundled profiles, whose candidates the corpus holds
VERSION = 3
HOLE = "\x00"             # a number of the text, taken from the code's entry in order
EXCERPT = "\x01"          # a line `{n:>5} | <line n of the code>` (clang's excerpt)
VERBATIM = "\x02"         # line n of the code as it stands (Triton's excerpt)
PTX_FILE = "tmpxft_candidate.ptx"   # ptxas's temporary PTX file, as compilers.tool_text writes it

# the numbers of a text that move with the code: ptxas's PTX line, a position L:C
_NUMBERS = re.compile(r", line \d+; |^candidate\.(?:hip|cu):\d+:\d+: |\bat \d+:\d+:$")


def code_key(code: str) -> str:
    """The corpus's key of a candidate's source: 16 hex digits of its sha256."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def pack(text: str, code: str) -> tuple[str, list[int]]:
    """(template, numbers) of a tool's text for `code`; unpack(template, numbers, code) == text.

    >>> pack("x.hip:2:3: error: e\\n    2 | b;\\n      |   ^", "a;\\nb;")
    ('x.hip:2:3: error: e\\n\\x01\\n      |   ^', [2])
    >>> pack("ptxas t.ptx, line 79; error   : X", "")
    ('ptxas t.ptx, line \\x00; error   : X', [79])
    """
    lines = code.split("\n")
    first = {}
    for i, line in enumerate(lines):
        first.setdefault(line, i + 1)
    out, numbers = [], []
    for line in text.split("\n"):
        m = re.fullmatch(r" *(\d+) \| (.*)", line)
        if m and f"{int(m.group(1)):>5} | " == line[:len(line) - len(m.group(2))] \
                and 0 < int(m.group(1)) <= len(lines) and lines[int(m.group(1)) - 1] == m.group(2):
            out.append(EXCERPT)
            numbers.append(int(m.group(1)))
        elif line.strip() and line in first:
            out.append(VERBATIM)
            numbers.append(first[line])
        else:
            out.append(_NUMBERS.sub(lambda m: re.sub(r"\d+", HOLE, m.group(0)), line))
            numbers += [int(n) for m in _NUMBERS.finditer(line) for n in re.findall(r"\d+", m.group(0))]
    return "\n".join(out), numbers


def unpack(template: str, numbers: list[int], code: str) -> str:
    lines, it, out = code.split("\n"), iter(numbers), []
    for line in template.split("\n"):
        if line == EXCERPT:
            n = next(it)
            out.append(f"{n:>5} | {lines[n - 1]}")
        elif line == VERBATIM:
            out.append(lines[next(it) - 1])
        else:
            parts = line.split(HOLE)
            out.append(parts[0] + "".join(str(next(it)) + p for p in parts[1:]))
    return "\n".join(out)


@functools.lru_cache(maxsize=1)
def load() -> dict:
    """The corpus: {"version", "tools", "cells": {"module|arch": {"lines": [...], "forms": [runs(template), ...],
    "codes": {code_key: [form index, number, ...], or [] where the tool built it}}}}."""
    if not PATH.exists():
        return {"version": VERSION, "tools": {}, "cells": {}}
    data = json.loads(PATH.read_text())
    if data.get("version") != VERSION:
        raise ValueError(f"{PATH}: corpus version {data.get('version')} != {VERSION}: rerun scripts/arch_corpus.py")
    return data


def lookup(module: str, arch: str, code: str) -> str | None:
    """The tool's text for this exact candidate on `arch` (tool_text form), None where the
    corpus has no entry; "" where the tool built it (no arch failure)."""
    cell = load()["cells"].get(f"{module}|{arch}")
    entry = cell and cell["codes"].get(code_key(code))
    if entry is None:
        return None
    return "" if entry == [] else unpack(expand(cell["forms"][entry[0]], cell["lines"]), entry[1:], code)


def runs(template: str, table: list) -> list:
    """A template as indices into the cell's line table (`table`, extended here), each run of
    one line repeated n > 1 times as [index, n] (ptxas repeats a message for every instruction
    that uses the feature).

    >>> table = []
    >>> runs("a\\nb\\nb\\nb\\na", table), table, expand(runs("a\\nb\\nb\\nb\\na", table), table)
    ([0, [1, 3], 0], ['a', 'b'], 'a\\nb\\nb\\nb\\na')
    """
    out = []
    for line in template.split("\n"):
        if line not in table:
            table.append(line)
        i = table.index(line)
        if out and (out[-1] == i or isinstance(out[-1], list) and out[-1][0] == i):
            out[-1] = [i, out[-1][1] + 1] if isinstance(out[-1], list) else [i, 2]
        else:
            out.append(i)
    return out


def expand(form: list, table: list) -> str:
    return "\n".join(table[i] for item in form for i in ([item] if isinstance(item, int) else [item[0]] * item[1]))


@functools.lru_cache(maxsize=1)
def load_smem() -> dict:
    """Triton's shared-memory figures: {"version", "tools", "cells": {"module|arch": {smem_key: bytes}}}."""
    if not SMEM_PATH.exists():
        return {"version": SMEM_VERSION, "tools": {}, "cells": {}}
    data = json.loads(SMEM_PATH.read_text())
    if data.get("version") != SMEM_VERSION:
        raise ValueError(f"{SMEM_PATH}: version {data.get('version')} != {SMEM_VERSION}: rerun scripts/triton_smem_corpus.py")
    return data


def smem_key(code: str, specialization: str) -> str:
    """A Triton figure's key in its cell: the source's code_key and the launch's
    compilers.specialization_key."""
    return f"{code_key(code)}/{specialization}"


def triton_shared(module: str, arch: str, code: str, specialization: str) -> int | None:
    """The shared memory Triton allocates for this exact candidate on `arch` at this launch's
    specialization (its metadata.shared, the figure its launcher's OutOfResources quotes), None
    where the corpus has no entry."""
    return load_smem()["cells"].get(f"{module}|{arch}", {}).get(smem_key(code, specialization))


@functools.lru_cache(maxsize=1)
def hip_names() -> frozenset:
    """Every identifier the headers of a HIP candidate bring in, and C++'s keywords."""
    if not HIP_NAMES_PATH.exists():
        raise FileNotFoundError(f"{HIP_NAMES_PATH} is missing: run scripts/hip_header_names.py")
    return frozenset(line for line in HIP_NAMES_PATH.read_text().splitlines() if line and not line.startswith("#"))
