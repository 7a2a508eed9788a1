"""A source line as `gcc -E` prints it, which is the line nvcc (EDG) echoes under an error.

The preprocessor drops comments, prints one space wherever the source had whitespace
(leading indentation kept), expands macros (object-like and function-like, nested; the CUDA
keywords are macros of the toolkit's headers: `__shared__` is `__attribute__((shared))`), and
prints a space between two tokens a macro boundary separates only where they would otherwise
lex as one (gcc's cpp_avoid_paste). Tokens carry their column in the source line so that a
name's column in the printed line can be found.

>>> defs = macros(["#define T 128", "#define W (T / 32)", "#define PAD(i) ((i) + ((i) >> 5))"])
>>> echo("    y[0]  =  W+row * T; // note", defs)
'    y[0] = (128 / 32)+row * 128;'
>>> echo("    s[T-1] = PAD( k ) + T+1;", defs)
'    s[128 -1] = ((k) + ((k) >> 5)) + 128 +1;'
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""(?P<ws>\s+|/\*.*?\*/)|(?P<comment>//.*)
    |(?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)|(?P<name>[A-Za-z_]\w*)
    |(?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
    |(?P<op>>>=|<<=|->\*|\.\.\.|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!=<>]=|\#\#|[^\s\w])""", re.X)


@dataclass(frozen=True)
class Tok:
    kind: str        # num, name, str, op
    text: str
    col: int         # column in the source line (-1: from a macro's body)
    white: bool      # whitespace (or a comment) before it


@dataclass(frozen=True)
class Pad:
    """gcc's padding token: the boundary of a macro expansion or of a macro argument."""
    source: Tok | None


def tokens(text: str, base: int = 0) -> list:
    out, white = [], False
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            white = True
            continue
        out.append(Tok(kind, m.group(0), base + m.start() if base >= 0 else -1, white))
        white = False
    return out


# the CUDA keywords as the toolkit's headers define them (host_defines.h), already expanded
HEADER_MACROS = {"__shared__": "__attribute__((shared))", "__device__": "__attribute__((device))",
                 "__global__": "__attribute__((global))", "__constant__": "__attribute__((constant))",
                 "__host__": "__attribute__((host))", "__noinline__": "__attribute__((noinline))",
                 "__forceinline__": "__inline__ __attribute__((always_inline))",
                 "__align__(n)": "__attribute__((aligned(n)))",
                 "__launch_bounds__(...)": "__attribute__((launch_bounds(__VA_ARGS__)))",
                 "INFINITY": "(__builtin_inff ())", "NAN": "(__builtin_nanf (\"\"))"}
_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?\s*(.*)$")


def _macro(name: str, params: str | None, body: str):
    body = tokens(body, -1)
    if body:
        body[0] = Tok(body[0].kind, body[0].text, -1, False)
    names = None if params is None else [p.strip() for p in params[1:-1].split(",") if p.strip()]
    return names, body


def macros(lines, headers: bool = True) -> dict:
    """name -> (parameter names or None for an object-like macro, body tokens) of the
    `#define`s in `lines` (continued lines joined), after the toolkit's keyword macros."""
    out = {}
    if headers:
        for spec, body in HEADER_MACROS.items():
            m = re.match(r"(\w+)(\(.*\))?$", spec)
            out[m.group(1)] = _macro(m.group(1), m.group(2), body)
    lines = list(lines)
    i = 0
    while i < len(lines):
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        m = _DEFINE.match(text)
        if m:
            out[m.group(1)] = _macro(m.group(1), m.group(2), m.group(3))
        i += 1
    return out


def _args(toks, i):
    """The arguments of a function-like macro call whose '(' is toks[i], and the index after
    its ')'; None when unbalanced."""
    args, cur, depth = [], [], 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.text == "(":
            depth += 1
            if depth == 1:
                continue
        elif t.text == ")":
            depth -= 1
            if depth == 0:
                args.append(cur)
                return args, j + 1
        elif t.text == "," and depth == 1:
            args.append(cur)
            cur = []
            continue
        cur.append(t)
    return None


def expand(toks, defs: dict, off: frozenset = frozenset()) -> list:
    """Tokens and Pads after macro expansion (a macro is not expanded inside itself)."""
    out, i = [], 0
    while i < len(toks):
        t = toks[i]
        macro = defs.get(t.text) if t.kind == "name" and t.text not in off else None
        if macro is None or macro[0] is not None and (i + 1 >= len(toks) or toks[i + 1].text != "("):
            out.append(t)
            i += 1
            continue
        params, body = macro
        inner = off | {t.text}
        out.append(Pad(t))
        if params is None:
            out += expand(body, defs, inner)
            i += 1
        else:
            got = _args(toks, i + 1)
            if got is None:
                out.append(t)
                i += 1
                continue
            args, i = got
            named = dict(zip(params, args))
            if params and params[-1] == "...":
                rest = args[len(params) - 1:]
                named["__VA_ARGS__"] = [tok for k, a in enumerate(rest) for tok in ([Tok("op", ",", -1, False)] * bool(k) + a)]
            run = []
            for k, b in enumerate(body):
                if b.kind == "name" and b.text in named:
                    out += expand(run, defs, inner)
                    run = []
                    if k:
                        out.append(Pad(b))
                    out += expand(named[b.text], defs, off)
                    out.append(Pad(None))
                else:
                    run.append(b)
            out += expand(run, defs, inner)
        out.append(Pad(None))
    return out


_PASTE_EQ = {"=", "!", ">", "<", "+", "-", "*", "/", "%", "&", "|", "^", ">>", "<<"}
_PASTE = {">": ">", "<": "<%:", "+": "+", "-": "->", "/": "/*", "%": ":%", "&": "&", "|": "|",
          ":": ":>", "->": "*", ".": ".%", "#": "#%"}


def _avoid_paste(a: Tok, b: Tok) -> bool:
    """gcc's cpp_avoid_paste: printed together, `a` and `b` would lex as another token."""
    c = b.text[0] if b.kind == "op" else ""
    if a.kind == "op":
        return bool(c) and (a.text in _PASTE_EQ and c == "=" or c in _PASTE.get(a.text, "")) \
            or a.text == "." and b.kind == "num"
    if a.kind == "name":
        return b.kind in ("name", "str")
    if a.kind == "num":
        return b.kind in ("num", "name", "str") or bool(c) and c in ".+-"
    return False


def printed(items, indent: str = "") -> list:
    """(text, source column) of each printed token, as gcc's scan_translation_unit spaces them;
    the first token sits at `indent`."""
    out, pos, prev, source, padded = [], len(indent), None, None, False
    for it in items:
        if isinstance(it, Pad):
            if not padded or source is None or not source.white and it.source is None:
                source = it.source
            padded = True
            continue
        if prev is None:
            space = False
        elif padded:
            space = (source or it).white or _avoid_paste(prev, it)
        else:
            space = it.white
        pos += space
        out.append((pos, it))
        pos += len(it.text)
        prev, source, padded = it, None, False
    return out


def echo_tokens(line: str, defs: dict) -> tuple[str, list]:
    """(`line` as gcc -E prints it, [(printed column, token)])."""
    indent = line[:len(line) - len(line.lstrip())]
    placed = printed(expand(tokens(line), defs), indent)
    text = indent
    for pos, t in placed:
        text += " " * (pos - len(text)) + t.text
    return text, placed


def echo(line: str, defs: dict) -> str:
    return echo_tokens(line, defs)[0]


def printed_col(line: str, defs: dict, col: int) -> int:
    """The column in the printed line of the source token at column `col` of `line` (the
    first printed copy, for a macro argument)."""
    return next(pos for pos, t in echo_tokens(line, defs)[1] if t.col == col)
