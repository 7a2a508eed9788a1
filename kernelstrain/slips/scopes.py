"""Which uses of an undeclared name nvcc (EDG) reports: the first in each scope.

After reporting `identifier "x" is undefined`, EDG declares x in the innermost scope of
that use, so later uses in that scope, or in scopes nested in it, say nothing; a use after
the scope closes is reported again. Scopes, as EDG opens them (checked with nvcc 13.0): a
compound statement `{...}`; a `for` whose init-statement declares a variable (header and
body); each sub-statement of if / else / for / while / do / switch that is not a compound
statement. An if / while / switch condition, and a `for` header without a declaration,
belong to the enclosing scope.

>>> lines = ["__global__ void k(float* y, int n) {", "    const int a_ = 0;",
...          "    if (a < n) { y[a] = 1; }", "    for (int i = a; i < n; i++) y[i] = a;", "    y[0] = a;", "}"]
>>> [(j, col) for j, col, _ in undefined_uses(lines, 1, "a", {})]
[(2, 8)]
>>> lines[2] = "    if (n) { y[a] = 1; } else y[a] = 2;"
>>> [(j, col) for j, col, _ in undefined_uses(lines, 1, "a", {})]
[(2, 15), (2, 32), (3, 17), (4, 11)]
"""
from __future__ import annotations

import re

from . import clang
from .cpp import SYSTEM_MACROS, echoed, macros, tokens

_TYPES = {"int", "unsigned", "signed", "float", "double", "char", "short", "long", "bool", "auto", "const",
          "size_t", "int64_t", "int32_t", "uint32_t", "uint64_t", "half", "__half", "__nv_bfloat16", "float2",
          "float4", "int4", "uint4", "constexpr", "static"}


def device_stream(lines, defs: dict) -> tuple[list, dict]:
    """([(line, printed column, token)] of every non-preprocessor line the compiler sees (not
    in an inactive #if / #ifdef / #else branch), {line: the printed line})."""
    stream, shown, directive, active = [], {}, False, []
    values = macros(lines, headers=False)
    after = False           # the last line with tokens ends with a system header's macro (follows_system_macro)
    for j, line in enumerate(lines):
        after_system = after
        toks = tokens(line)
        if toks:
            after = toks[-1].kind == "name" and toks[-1].text in SYSTEM_MACROS and not line.lstrip().startswith("#")
        text = line.strip()
        if not directive and text.startswith("#"):
            _condition(text, active, values)
        if directive or text.startswith("#"):
            directive = line.endswith("\\")
            continue
        if all(on for on, _ in active):
            shown[j], placed, moved = echoed(line, defs, after_system)
            stream += [(j, pos, t) for pos, t in placed] + [(j, -1, t) for t in moved]
    return stream, shown


def _condition(text: str, active: list, values: dict) -> None:
    """Track a conditional directive on `active`: [(this branch is on, a branch was taken)]."""
    m = re.match(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b\s*(.*)", text)
    if m is None:
        return
    what, rest = m.groups()
    if what in ("if", "ifdef", "ifndef"):
        on = _true(rest, values) if what == "if" else (rest.split()[0] in values) == (what == "ifdef")
        active.append((on, on))
    elif what in ("elif", "else") and active:
        taken = active[-1][1]
        on = not taken and (what == "else" or _true(rest, values))
        active[-1] = (on, taken or on)
    elif what == "endif" and active:
        active.pop()


def _true(expr: str, values: dict) -> bool:
    """An #if expression, its object-like macros expanded and unknown names 0 (as cpp does)."""
    expr = re.sub(r"//.*|/\*.*?\*/", "", expr)
    expr = re.sub(r"\bdefined\s*\(?\s*(\w+)\s*\)?", lambda m: "1" if m.group(1) in values else "0", expr)
    for _ in range(8):
        expr = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: "".join(t.text for t in values[m.group(0)][1])
                      if m.group(0) in values and values[m.group(0)][0] is None else m.group(0), expr)
    expr = re.sub(r"\b[A-Za-z_]\w*\b", "0", re.sub(r"(\d+)[uUlL]+\b", r"\1", expr))
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr).replace("/", "//")
    if not re.fullmatch(r"[\d\s()+\-*/%<>=!&|^~andotr]*", expr):
        return True
    try:
        return bool(eval(expr, {"__builtins__": {}}))       # digits and operators only (checked above)
    except Exception:
        return True


def _declares(stream, i: int) -> bool:
    """The for-init-statement starting at stream[i] declares a variable."""
    toks = [t for _, _, t in stream[i:i + 3]]
    if not toks or toks[0].kind != "name":
        return False
    return toks[0].text in _TYPES or toks[0].text.endswith("_t") or len(toks) > 1 and (
        toks[1].kind == "name" or toks[1].text in ("*", "&", "::", "<") and len(toks) > 2 and toks[2].kind == "name")


class _Scopes:
    """A statement walk that labels each token with its scope path (outermost first)."""

    def __init__(self, stream):
        self.s, self.i, self.out, self.ids = stream, 0, [], 0
        self.top = False        # the token is a top-level token of a declaration statement

    def peek(self):
        return self.s[self.i][2].text if self.i < len(self.s) else None

    def new(self, path):
        self.ids += 1
        return path + (self.ids,)

    def take(self, path):
        self.out.append((self.s[self.i], path, self.top))
        self.top = False
        self.i += 1

    def seq(self, path):
        while self.i < len(self.s):
            if self.peek() == "}":
                return
            self.statement(path)

    def block(self, path):
        inner = self.new(path)
        self.take(inner)
        self.seq(inner)
        if self.i < len(self.s):
            self.take(inner)

    def balanced(self, path, open_: str, close: str):
        depth = 0
        while self.i < len(self.s):
            t = self.peek()
            depth += (t == open_) - (t == close)
            self.take(path)
            if depth <= 0:
                return

    def header(self, path):
        if self.peek() == "(":
            self.balanced(path, "(", ")")

    def sub(self, path):
        if self.i < len(self.s):
            self.statement(self.new(path))

    def statement(self, path):
        t = self.peek()
        if t == "{":
            return self.block(path)
        if t == "for":
            self.take(path)
            scope = self.new(path) if _declares(self.s, self.i + 1) else path
            self.header(scope)
            return self.sub(scope)
        if t in ("if", "while", "switch"):
            self.take(path)
            if self.peek() == "constexpr":
                self.take(path)
            self.header(path)
            self.sub(path)
            if t == "if" and self.peek() == "else":
                self.take(path)
                self.sub(path)
            return
        if t == "do":
            self.take(path)
            self.sub(path)
            if self.peek() == "while":
                self.take(path)
                self.header(path)
            if self.peek() == ";":
                self.take(path)
            return
        self.simple(path)

    def simple(self, path):
        """An expression statement or a declaration, a function or struct definition included."""
        depth, decl = 0, _declares(self.s, self.i)
        while self.i < len(self.s):
            t = self.peek()
            if t == "{":
                prev = self.s[self.i - 1][2].text if self.i else ""
                if depth or prev in ("=", ",", "(", "return", "{"):     # an initializer list
                    self.balanced(path, "{", "}")
                    continue
                self.block(path)
                if self.peek() == ";":
                    self.take(path)
                return
            if t == "}" and depth == 0:
                return
            depth += (t in ("(", "[")) - (t in (")", "]"))
            self.top = decl and depth == 0
            self.take(path)
            if t == ";" and depth <= 0:
                return


def _walk(lines, decl: int, name: str, defs: dict, declarator: str, once: bool):
    """(index in the walk, the walk's tokens, line, token) of each use of `name` after the
    renamed declaration that the compiler reports: outside any scope where another declaration
    of the name is in force, and with `once` (EDG) outside any scope of an earlier report."""
    stream, shown = device_stream(lines, defs)
    walk = _Scopes(stream)
    walk.seq(())
    while walk.i < len(stream):          # a stray '}': carry on at the top level
        walk.take(())
        walk.seq(())
    toks = [t for (_, _, t), _, _ in walk.out]
    out, declared, after = [], [], False
    for k, ((j, pos, t), path, top) in enumerate(walk.out):
        after = after or j > decl or j == decl and t.text == declarator
        if not (after and t.kind == "name" and t.text == name) or any(d in path for d in declared):
            continue
        prev = toks[k - 1] if k else None
        if prev is not None and prev.text in (".", "->", "::"):
            continue
        if _declarator(prev, top, toks[k + 1].text if k + 1 < len(toks) else ""):
            declared.append(path[-1] if path else 0)    # a declaration of its own in another scope
            continue
        if once:
            declared.append(path[-1] if path else 0)
        out.append((k, toks, j, pos, shown[j], t))
    return out


def undefined_uses(lines, decl: int, name: str, defs: dict, declarator: str = "") -> list:
    """(line, printed column, printed line) of each use of `name`, an undeclared identifier,
    that nvcc reports: after line `decl`, or on it after the name `declarator` declared there
    (`const float m_new = fmaxf(m, s), alpha = __expf(m - m_old);`)."""
    return [(j, pos, shown) for _, _, j, pos, shown, _ in _walk(lines, decl, name, defs, declarator, True)]


def clang_uses(lines, decl: int, name: str, declarator: str = "") -> list:
    """(line, column as written) of each use of `name` that clang reports (every use; no
    suppression), in clang's order (slips/clang.py)."""
    uses = _walk(lines, decl, name, {}, declarator, False)
    if not uses:
        return []
    by_k = {u[0]: u for u in uses}
    return [(by_k[k][2], by_k[k][5].col) for k in clang.diagnosed_order(uses[0][1], set(by_k)) if by_k[k][5].col >= 0]


_NOT_TYPES = {"return", "case", "else", "do", "goto", "sizeof", "new", "delete", "throw", "co_return"}


def _declarator(prev, top: bool, following: str) -> bool:
    """The name is declared here: `int r = ...` or `..., r = ...` in a declaration."""
    if following not in ("=", ";", ",", "[", "{", ")", ":"):
        return False
    return prev is not None and (prev.kind == "name" and prev.text not in _NOT_TYPES or top and prev.text == ",")
