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
    """The tokens of `text` (a line, or a macro's body: base -1), each with its column."""
    key = (text, base)
    found = _TOKENS.get(key)
    if found is None:
        if len(_TOKENS) >= TOKENS_MAX:
            _TOKENS.clear()
        found = _TOKENS[key] = tuple(_lex(text, base))
    return list(found)          # (a list of its own: a caller may change it; a Tok is frozen)


# a line's tokens, lexed once a process: a slip's compiler text walks every line of the code
# (scopes.device_stream), and an episode's candidates share most of their lines
_TOKENS: dict = {}
TOKENS_MAX = 1 << 12


def _lex(text: str, base: int) -> list:
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


class Macros(dict):
    """macros()'s answer, with `texts`: the text each macro was made from (its `#define`, or
    the toolkit's header definition), so the macros a line reaches can key echoed's cache."""
    texts: dict


def macros(lines, headers: bool = True) -> Macros:
    """name -> (parameter names or None for an object-like macro, body tokens) of the
    `#define`s in `lines` (continued lines joined), after the toolkit's keyword macros."""
    out = Macros()
    out.texts = {}
    if headers:
        for spec, body in HEADER_MACROS.items():
            m = re.match(r"(\w+)(\(.*\))?$", spec)
            out[m.group(1)] = _macro(m.group(1), m.group(2), body)
            out.texts[m.group(1)] = (spec, body)
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
            out.texts[m.group(1)] = text
        i += 1
    return out


def reached(toks, defs: Macros) -> frozenset:
    """(name, text) of every macro that expanding `toks` can look up: the names among them that
    `defs` defines, and those its bodies name, and so on. expand's answer depends on `defs` only
    through these (a name it looks up and `defs` lacks is lacked by every `defs` with the same
    reached set), so the set keys a line's expansion across candidates whose macros differ elsewhere.

    >>> d = macros(["#define T 128", "#define W (T / 32)", "#define X 1"], headers=False)
    >>> sorted(name for name, _ in reached(tokens("y = W + n;"), d))
    ['T', 'W']
    """
    found, todo = {}, [t.text for t in toks if t.kind == "name" and t.text in defs]
    while todo:
        name = todo.pop()
        if name not in found:
            found[name] = defs.texts[name]
            todo += [b.text for b in defs[name][1] if b.kind == "name" and b.text in defs]
    return frozenset(found.items())


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


# macros of a system header (math.h): gcc -E prints their expansion on lines of its own between
# line markers, so the printed source line stops before one, and the line after a line that
# ends with one is printed one space less indented (it starts after the marker back to the file)
SYSTEM_MACROS = ("INFINITY", "NAN")


def follows_system_macro(lines, j: int) -> bool:
    """Whether the code line before line j ends with a system header's macro (nvcc 13.0:
    `float r = -INFINITY` with its `;` left off echoes the next line one space short).

    >>> follows_system_macro(["  float r = -INFINITY", "", "  r = 1;"], 2), follows_system_macro(["  x = NAN;", "y;"], 1)
    (True, False)
    """
    for k in range(j - 1, -1, -1):
        toks = tokens(lines[k])
        if toks:
            return not lines[k].lstrip().startswith("#") and toks[-1].kind == "name" \
                and toks[-1].text in SYSTEM_MACROS
    return False


def echo_tokens(line: str, defs: dict, after_system: bool = False) -> tuple[str, list]:
    """(`line` as gcc -E prints it, [(printed column, token)]); `after_system`: the line
    follows one that ends with a system header's macro (follows_system_macro).

    >>> echo_tokens("    y = 2.f * INFINITY + x;", macros([]))[0], echo_tokens("    y = -NAN;", macros([]), True)[0]
    ('    y = 2.f * ', '   y = -')
    """
    text, placed, _ = echoed(line, defs, after_system)
    return text, list(placed)


def echoed(line: str, defs: dict, after_system: bool = False) -> tuple[str, list, list]:
    """(echo_tokens's text and placed tokens, moved_tokens) of one line, expanded once; kept
    for macros() answers (by the line and the macros it reaches): a slip's compiler text echoes every line of the code
    (scopes.device_stream), and an episode's candidates share most of their lines and macros.
    The lists are shared: read them, do not change them."""
    if not isinstance(defs, Macros):
        return _echoed(line, defs, after_system)
    key = (line, after_system, reached(tokens(line), defs))
    found = _ECHOED.get(key)
    if found is None:
        if len(_ECHOED) >= ECHOED_MAX:
            _ECHOED.clear()
        found = _ECHOED[key] = _echoed(line, defs, after_system)
    return found


_ECHOED: dict = {}
ECHOED_MAX = 1 << 11


def _echoed(line: str, defs: dict, after_system: bool) -> tuple[str, list, list]:
    items = expand(tokens(line), defs)
    cut = _system_cut(items)
    indent = line[:len(line) - len(line.lstrip())][after_system:]
    placed = printed(items[:cut], indent)
    text = indent
    for pos, t in placed:
        text += " " * (pos - len(text)) + t.text
    if cut is not None and items[cut].source.white:
        text += " "
    return text, placed, [] if cut is None else [it for it in items[cut:] if not isinstance(it, Pad)]


def _system_cut(items) -> int | None:
    """Where gcc -E breaks the printed line: the expansion of a system header's macro."""
    return next((i for i, it in enumerate(items) if isinstance(it, Pad) and it.source is not None
                 and it.source.col >= 0 and it.source.text in SYSTEM_MACROS), None)


def moved_tokens(line: str, defs: dict) -> list:
    """The tokens of `line` from its first system-header macro on, expanded: the compiler parses
    them on this line though gcc -E prints them on the lines after it (echo_tokens stops before).

    >>> [t.text for t in moved_tokens("    if (m == -INFINITY) return;", macros([]))]
    ['(', '__builtin_inff', '(', ')', ')', ')', 'return', ';']
    """
    return list(echoed(line, defs)[2])


def echo(line: str, defs: dict, after_system: bool = False) -> str:
    return echo_tokens(line, defs, after_system)[0]


def echo_at(lines, j: int, defs: dict) -> str:
    """Line j of the code as nvcc echoes it."""
    return echo(lines[j], defs, follows_system_macro(lines, j))


def printed_col(line: str, defs: dict, col: int, after_system: bool = False) -> int:
    """The column in the printed line of the source token at column `col` of `line` (the
    first printed copy, for a macro argument)."""
    return next(pos for pos, t in echo_tokens(line, defs, after_system)[1] if t.col == col)
