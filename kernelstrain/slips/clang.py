"""The order in which clang (hipcc) diagnoses the uses of an undeclared name: its delayed typo
correction. scopes.clang_uses picks the uses; `diagnosed_order` orders them.

clang does not diagnose `use of undeclared identifier` where it meets the name: it keeps a
placeholder and diagnoses it when the full expression is complete (`;`, an if / while / switch
condition, each part of a for header, each initializer of a declaration), in source order,
except where an operand becomes an error first:
  - a subscript whose index holds the name is diagnosed at its `]`, and is an error;
  - where a type could begin, the parser classifies the name (type or expression?) and so
    diagnoses it at once, and it is an error: the first token of a statement (not after
    `return`), and, unless `<` follows it, of an if / while / switch condition or a for header's
    init and condition, and the first after an expression's `(` (not a call's);
  - when one operand of a binary or conditional operator is an error, the other operand's
    pending uses are diagnosed then; a call with an erroneous argument is an error.
Measured with clang-19 (`-fsyntax-only` and HIP device compiles for gfx942):

>>> from kernelstrain.slips.cpp import tokens
>>> def order(line):
...     toks = tokens(line)
...     return [toks[k].col for k in diagnosed_order(toks, {k for k, t in enumerate(toks) if t.text == "q"})]
>>> order("y[0] = q + h2(q, g(q)) + q;")
[7, 14, 19, 25]
>>> order("y[0] = q + 1 < M ? f(y[q]) : 0.f;")
[23, 7]
>>> order("y[0] = q + n * y[q] * q + q;")
[17, 22, 7, 26]
>>> order("y[q + 1] = q + y[q] + q; if (q < n) y[q] = q;")
[2, 17, 11, 22, 29, 38, 43]
>>> order("int z = q < n ? y[q] : y[q], w = q;")
[18, 8, 25, 33]
>>> order("q = (q + 1) & n; y[0] = q + (q + 1);")
[0, 5, 29, 24]
"""
from __future__ import annotations

_BINARY = {",": 1, "=": 2, "+=": 2, "-=": 2, "*=": 2, "/=": 2, "%=": 2, "&=": 2, "|=": 2, "^=": 2, "<<=": 2,
           ">>=": 2, "?": 3, "||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, ">": 10,
           "<=": 10, ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
_RIGHT = {2, 3}
_PREFIX = {"-", "+", "!", "~", "*", "&", "++", "--", "sizeof"}
_CONTROL = {"if", "while", "switch"}
_SKIP = {"else", "do", "return", "case", "default", "break", "continue", "goto", "co_return", "throw"}
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_EXPRESSION_NEXT = {"return", "case", "goto", "co_return", "throw"}     # an expression follows, never a type


class _Parse:
    """A walk of statements and expressions (precedence climbing) that records, in `out`, each
    target token as clang diagnoses it; a token it cannot place is skipped, never an error."""

    def __init__(self, toks, targets):
        self.t, self.targets, self.out = toks, targets, []
        self.errors = set()          # targets diagnosed where the parser met them (a statement's first token)

    def text(self, i, end):
        return self.t[i].text if i < end else None

    def emit(self, pending):
        self.out += sorted(pending)
        pending.clear()

    def close(self, i, end):
        """Index of the bracket matching the one at i (end when unbalanced)."""
        depth = 0
        for k in range(i, end):
            s = self.t[k].text
            depth += (s in _CLOSE) - (s in (")", "]", "}"))
            if depth == 0:
                return k
        return end

    def full(self, i, end):
        """A full expression over [i, end): its uses are all diagnosed by its end."""
        pending, _ = self.expr(i, end, 0)[1:]
        self.emit(pending)

    # an expression: (index after it, pending uses, erroneous)
    def expr(self, i, end, min_prec):
        i, pending, bad = self.unary(i, end)
        while i < end:
            op = self.t[i].text
            prec = _BINARY.get(op) if self.t[i].kind == "op" else None
            if prec is None or prec < min_prec:
                break
            if op == "?":
                colon = self._colon(i + 1, end)
                _, mid, mid_bad = self.expr(i + 1, colon, 0)
                pending, bad = self.combine(pending, bad, mid, mid_bad)
                i, rhs, rhs_bad = self.expr(colon + 1, end, 2)
            else:
                i, rhs, rhs_bad = self.expr(i + 1, end, prec if prec in _RIGHT else prec + 1)
            pending, bad = self.combine(pending, bad, rhs, rhs_bad)
        return i, pending, bad

    def combine(self, left, left_bad, right, right_bad):
        if right_bad:
            self.emit(left)
        if left_bad:
            self.emit(right)
        return left + right, left_bad or right_bad

    def _colon(self, i, end):
        """The `:` of the conditional whose `?` is just before i."""
        depth = nested = 0
        for k in range(i, end):
            s = self.t[k].text
            depth += (s in _CLOSE) - (s in (")", "]", "}"))
            if depth == 0 and s == "?":
                nested += 1
            elif depth == 0 and s == ":":
                if not nested:
                    return k
                nested -= 1
        return end

    def classify(self, i, before_less=True):
        """A target where a type could begin (a statement's or condition's first token, the first
        after an expression's `(`): the parser classifies the name there, and diagnoses it; but
        for a statement's, not where `<` follows it (measured: `(q < 1 ? ...)` and `while (q < n)`
        wait for the expression, `q < n ? ... : 0;` does not)."""
        if not before_less and i + 1 < len(self.t) and self.t[i + 1].text == "<":
            return
        if i in self.targets and i not in self.errors:
            self.out.append(i)
            self.errors.add(i)

    def unary(self, i, end):
        s = self.text(i, end)
        if s is None:
            return end, [], False
        tok = self.t[i]
        if tok.kind == "op" and s in _PREFIX or s == "sizeof":
            return self.unary(i + 1, end)
        if s == "(":
            j = self.close(i, end)
            if self._cast(i + 1, j) and j + 1 < end and self._operand(j + 1):
                return self.unary(j + 1, end)
            if i + 1 < j:                                   # `(x`: a cast's type or an expression?
                self.classify(i + 1, before_less=False)
            _, pending, bad = self.expr(i + 1, j, 0)
            return self.postfix(j + 1, end, pending, bad)
        if s == "{":
            j = self.close(i, end)
            _, pending, bad = self.expr(i + 1, j, 0)
            return self.postfix(j + 1, end, pending, bad)
        if i in self.errors:
            return self.postfix(i + 1, end, [], True)
        pending = [i] if i in self.targets else []
        i += 1
        if tok.kind == "name" and self.text(i, end) == "<":        # a template's arguments: f<T>(...)
            j = self._template(i, end)
            if j is not None:
                i = j + 1
        if tok.kind in ("name", "num", "str"):
            return self.postfix(i, end, pending, False)
        return i, pending, False        # a token out of place: skip it

    def _template(self, i, end):
        depth = 0
        for k in range(i, end):
            s = self.t[k].text
            depth += (s == "<") - (s == ">") - 2 * (s == ">>")
            if s in (";", "{", "}", "&&", "||", "?"):
                return None
            if depth <= 0:
                return k if k + 1 < end and self.t[k + 1].text in ("(", "::", "{") else None
        return None

    def _cast(self, i, j):
        toks = self.t[i:j]
        return bool(toks) and all(t.kind == "name" and not (k in self.targets) or t.text in ("*", "&", "::")
                                  for k, t in zip(range(i, j), toks)) and _typeish(toks)

    def _operand(self, i):
        t = self.t[i]
        return t.kind in ("name", "num", "str") or t.text in ("(", "*", "&", "-", "!", "~")

    def postfix(self, i, end, pending, bad):
        while i < end:
            s = self.t[i].text
            if s == "[":
                j = self.close(i, end)
                _, index, index_bad = self.expr(i + 1, j, 0)
                if index or index_bad:                 # diagnosed at the `]`: an error
                    pending = pending + index
                    self.emit(pending)
                    bad = True
                i = j + 1
            elif s == "(":
                j = self.close(i, end)
                _, args, args_bad = self.expr(i + 1, j, 0)
                pending, bad = self.combine(pending, bad, args, args_bad)
                i = j + 1
            elif s in (".", "->", "::") and i + 1 < end:
                i += 2
            elif s in ("++", "--"):
                i += 1
            else:
                break
        return i, pending, bad

    # statements
    def run(self, i, end):
        while i < end:
            s = self.t[i].text
            if s in _CONTROL and self.text(i + 1, end) == "(":
                j = self.close(i + 1, end)
                self.classify(i + 2, before_less=False)
                self.declaration_or_full(i + 2, j)
                i = j + 1
            elif s == "for" and self.text(i + 1, end) == "(":
                j = self.close(i + 1, end)
                for n, part in enumerate(self._split(i + 2, j, ";")):
                    if n < 2:                       # the init and the condition may declare
                        self.classify(part[0], before_less=False)
                    self.declaration_or_full(*part)
                i = j + 1
            elif s in ("{", "}", ";", ":") or s in _SKIP and self.t[i].kind == "name":
                i += 1
            else:
                j = self._statement_end(i, end)
                if not (i and self.t[i - 1].text in _EXPRESSION_NEXT):
                    self.classify(i)
                self.declaration_or_full(i, j)
                i = max(j, i + 1)

    def _statement_end(self, i, end):
        depth = 0
        for k in range(i, end):
            s = self.t[k].text
            if s in ("(", "["):
                depth += 1
            elif s in (")", "]"):
                depth -= 1
            elif depth <= 0 and (s in (";", "}") or s == "{" and self._block(k)):
                return k
        return end

    def _block(self, k):
        prev = self.t[k - 1].text if k else ""
        return prev not in ("=", ",", "(", "return", "{", "[")       # not a braced initializer

    def _split(self, i, end, sep):
        depth, start = 0, i
        for k in range(i, end):
            s = self.t[k].text
            depth += (s in _CLOSE) - (s in (")", "]", "}"))
            if s == sep and depth == 0:
                yield start, k
                start = k + 1
        yield start, end

    def declaration_or_full(self, i, end):
        toks = self.t[i:end]
        if len(toks) > 1 and toks[0].kind == "name" and (toks[1].kind == "name" or toks[1].text in ("*", "&", "::")
                                                        and _typeish(toks[:1])):
            for a, b in self._split(i, end, ","):
                eq = next((k for k in range(a, b) if self.t[k].text == "=" and self._depth(a, k) == 0), None)
                if eq is not None:
                    self.full(eq + 1, b)
                else:
                    for k in range(a, b):
                        if self.t[k].text in ("[", "(", "{") and self._depth(a, k) == 0:
                            self.full(k + 1, self.close(k, b))
        else:
            self.full(i, end)

    def _depth(self, a, k):
        depth = 0
        for x in range(a, k):
            s = self.t[x].text
            depth += (s in _CLOSE) - (s in (")", "]", "}"))
        return depth


_TYPES = {"int", "unsigned", "signed", "float", "double", "char", "short", "long", "bool", "auto", "const",
          "void", "half", "__half", "__half2", "half2", "__nv_bfloat16", "__nv_bfloat162", "volatile", "size_t"}


def _typeish(toks) -> bool:
    """The tokens could name a type (a cast's parentheses)."""
    names = [t.text for t in toks if t.kind == "name"]
    return bool(names) and all(n in _TYPES or n.endswith("_t") or n[-1].isdigit() and n.rstrip("0123456789") in
                               ("float", "int", "uint", "half", "double", "char", "uchar", "short", "long")
                               for n in names)


def diagnosed_order(toks, targets) -> list:
    """The indices in `targets` (uses of an undeclared name among `toks`) in the order clang
    diagnoses them; a target the walk does not reach comes last, in source order."""
    p = _Parse(toks, set(targets))
    p.run(0, len(toks))
    seen = set()
    out = [k for k in p.out if k in p.targets and not (k in seen or seen.add(k))]
    return out + sorted(set(targets) - seen)
