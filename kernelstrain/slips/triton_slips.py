"""Triton slips that Triton's compiler rejects, each with its CompilationError text.

Triton reports `at LINE:COL:` (line 1 is the kernel's `def`, the column 0-based), the
kernel's source up to that line (at most its last 12 lines), a caret, then the error.

>>> src = ("import triton\\nimport triton.language as tl\\n\\n\\n@triton.jit\\n"
...        "def k(x_ptr, D, BLOCK_D: tl.constexpr):\\n    cols = tl.arange(0, BLOCK_D)\\n"
...        "    tl.store(x_ptr + cols, 0.0, mask=cols < D)\\n\\n\\ndef fill(x):\\n    k[(1,)](x, x.numel(), BLOCK_D=1024)\\n")
>>> print(arange_runtime(src, 0)[1])
triton.compiler.errors.CompilationError: at 2:11:
def k(x_ptr, D, BLOCK_D: tl.constexpr):
    cols = tl.arange(0, D)
           ^
arange's arguments must be of type tl.constexpr
"""
from __future__ import annotations

import ast
import functools
import re

_ARANGE = re.compile(r"tl\.arange\(0, BLOCK(?:_([A-Z]\w*))?\)")


EXCERPT = 12      # CompilationError.source_line_count_max_in_message: the last 12 lines up to the error


CHAINED = "\n\nThe above exception was the direct cause of the following exception:\n\n"


@functools.lru_cache(maxsize=8)
def parsed(code: str) -> ast.Module:
    """ast.parse of a candidate's code, kept for the next asks: a slip draw reads one code's sites
    of every kind, then the chosen slip's site again (each walk reads the tree, none changes it)."""
    return ast.parse(code)


def compilation_error(lines, def_line: int, j: int, col: int, text: str | None) -> str:
    """The CompilationError at line j, column col of the function whose `def` is line def_line;
    text None: a call site re-raising its callee's error (no message of its own)."""
    shown = "\n".join(lines[max(def_line, j + 1 - EXCERPT):j + 1])
    return (f"triton.compiler.errors.CompilationError: at {j - def_line + 1}:{col}:\n{shown}\n"
            f"{' ' * col}^" + ("" if text is None else f"\n{text}"))


def _jit_functions(lines) -> dict:
    """def line -> (name, body start, end) of every @triton.jit function."""
    out = {}
    for i, line in enumerate(lines):
        name = re.match(r"def (\w+)", line)
        if i and lines[i - 1].startswith("@triton.jit") and name:
            k = next((k for k in range(i, len(lines)) if lines[k].rstrip().endswith(":")), i)
            end = next((e for e in range(k + 1, len(lines)) if lines[e] and not lines[e][0].isspace()), len(lines))
            out[i] = (name.group(1), k + 1, end)
    return out


def first_use(lines, decl: int, name: str, def_line: int):
    """(line, column) of the load of `name` after line `decl` that Triton's code generator
    reaches first in the function whose `def` is line def_line, or None. It walks the AST
    in source order except: a call's keyword arguments before its positional ones, a
    conditional expression's test first, an augmented assignment's target first, a while
    loop's body before its test, and an `if` on a constexpr parameter that the compiled call
    passes as a literal (static_arguments) only down its taken branch, as Triton does."""
    try:
        tree = parsed("\n".join(lines))
    except SyntaxError:
        return None
    fn = _function_at(tree, def_line)
    if fn is None:
        return None
    return _use_in(fn, decl, name, _chain(lines, def_line, tree, lambda known: _use_in(fn, decl, name, known))[1])


def _use_in(fn, decl: int, name: str, known: dict):
    """(line, column) of the first load of `name` after line `decl` that `fn` compiled with the constexprs `known`
    reaches, or None."""
    for node in _walk_order(fn.body, known):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) \
                and node.lineno - 1 > decl:
            return node.lineno - 1, node.col_offset
    return None


def use_chain(lines, decl: int, name: str, def_line: int) -> list:
    """call_chain to the first compiled call of the jit function at def_line whose specialization reaches a use of
    `name` after line `decl`: a helper called with MASKED False and then True compiles the masked branch, and fails
    there, only at its second call (Triton 3.9: flash_prefill_triton's _attend, `at 20:20`, not the first call's
    `at 19:20`)."""
    try:
        tree = parsed("\n".join(lines))
    except SyntaxError:
        return []
    fn = _function_at(tree, def_line)
    if fn is None:
        return call_chain(lines, def_line)
    return _chain(lines, def_line, tree, lambda known: _use_in(fn, decl, name, known))[0]


def _function_at(tree, def_line: int):
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno == def_line + 1), None)


def static_arguments(lines, def_line: int, tree=None) -> dict:
    """name -> value of each constexpr parameter of the @triton.jit function at def_line that
    its first compiled call fixes: a literal (or a constexpr its caller has fixed) at the call
    on the way from the launched kernel (call_chain), or for a launched kernel at its launch
    `kernel[grid](...)`.

    >>> src = ["@triton.jit", "def h(x, M: tl.constexpr):", "    return x", "@triton.jit",
    ...        "def k(p, N: tl.constexpr):", "    y = h(p, False)", "def run(p):", "    k[(1,)](p, N=4)"]
    >>> static_arguments(src, 1), static_arguments(src, 4)
    ({'M': False}, {'N': 4})
    """
    return _chain(lines, def_line, tree)[1]


def _fixed(fn, call, known: dict) -> dict:
    """The constexpr parameters of `fn` that `call` fixes: literals, or names `known` in the caller."""
    params = [a.arg for a in fn.args.args]
    constexpr = {a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
    out = {}
    for p, v in [*zip(params, call.args), *((k.arg, k.value) for k in call.keywords)]:
        if p in constexpr and isinstance(v, ast.Constant):
            out[p] = v.value
        elif p in constexpr and isinstance(v, ast.Name) and v.id in known:
            out[p] = known[v.id]
    return out


def _static(test, known: dict):
    """The value of an `if` test on known constexprs (a name, `not` a name), or None."""
    if isinstance(test, ast.Name) and test.id in known:
        return bool(known[test.id])
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _static(test.operand, known)
        return None if inner is None else not inner
    return None


def _walk_order(nodes, known: dict):
    for node in nodes:
        taken = _static(node.test, known) if isinstance(node, ast.If) else None
        if taken is not None:
            parts = [node.test, *(node.body if taken else node.orelse)]
        elif isinstance(node, ast.Call):
            parts = [node.func, *[k.value for k in node.keywords], *node.args]
        elif isinstance(node, ast.IfExp):
            parts = [node.test, node.body, node.orelse]
        elif isinstance(node, ast.AugAssign):
            parts = [ast.Name(node.target.id, ast.Load(), lineno=node.target.lineno, col_offset=node.target.col_offset)
                     if isinstance(node.target, ast.Name) else node.target, node.value]
        elif isinstance(node, ast.Assign):
            parts = [node.value, *node.targets]
        elif isinstance(node, ast.While):
            parts = [*node.body, node.test, *node.orelse]
        else:
            parts = list(ast.iter_child_nodes(node))
        yield node
        yield from _walk_order(parts, known)


def call_chain(lines, def_line: int) -> list:
    """(caller's def line, call line, call column) of each call on the way from the first
    launched kernel that reaches the jit function at `def_line` down to it, innermost first
    ([] for a launched kernel): where Triton re-raises an error inside that function. Each
    body is walked in Triton's order, down the taken branch of an `if` on a fixed constexpr."""
    return _chain(lines, def_line)[0]


def _chain(lines, def_line: int, tree=None, reaches=None) -> tuple[list, dict]:
    """(call_chain, static_arguments) of the jit function at `def_line`: its first compiled call, or with `reaches`
    (known constexprs -> truthy) the first whose fixed constexprs it accepts."""
    try:
        tree = tree or parsed("\n".join(lines))
    except SyntaxError:
        return [], {}
    fns = {d: _function_at(tree, d) for d in _jit_functions(lines)}
    by_name = {fn.name: d for d, fn in fns.items() if fn is not None}

    def calls(d, known):    # (callee def line, call node) of each jit call in d's body, in Triton's order
        for node in _walk_order(fns[d].body, known):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name:
                yield by_name[node.func.id], node

    def path(d, known, seen):
        for callee, call in calls(d, known):
            fixed = _fixed(fns[callee], call, known)
            if callee == def_line and (reaches is None or reaches(fixed)):
                return [(d, call.lineno - 1, call.col_offset)], fixed
            if callee == def_line:
                continue
            if callee not in seen:
                rest = path(callee, fixed, seen | {callee})
                if rest is not None:
                    return rest[0] + [(d, call.lineno - 1, call.col_offset)], rest[1]
        return None

    for k in launched_kernels(lines):
        fn = fns.get(k)
        launch = next((n for n in ast.walk(tree) if fn is not None and isinstance(n, ast.Call)
                       and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name)
                       and n.func.value.id == fn.name), None)
        known = _fixed(fn, launch, {}) if launch is not None else {}
        if k == def_line:
            return [], known
        found = fn is not None and path(k, known, {k})
        if found:
            return found
    return [], {}


def _kernels(lines):
    """(def line, signature text, body start, end) of each @triton.jit function the wrapper
    launches (`name[grid](...)`): an error inside a jit helper is reported at its call site.
    Found once for the last few codes (_kernels_of): a slip draw asks it of one code for each
    Triton kind's sites (masked loads, masked stores, aranges, dots)."""
    return _kernels_of(tuple(lines))


@functools.lru_cache(maxsize=8)
def _kernels_of(lines: tuple) -> tuple:
    """_kernels of a code's lines."""
    out = []
    text = "\n".join(lines)
    for i, line in enumerate(lines):
        name = re.match(r"def (\w+)", line)
        if i and lines[i - 1].startswith("@triton.jit") and name and re.search(rf"\b{name.group(1)}\[", text):
            k = next((k for k in range(i, len(lines)) if lines[k].rstrip().endswith(":")), i)
            end = next((e for e in range(k + 1, len(lines)) if lines[e] and not lines[e][0].isspace()), len(lines))
            out.append((i, " ".join(lines[i:k + 1]), k + 1, end))
    return tuple(out)


def launched_kernels(lines) -> list:
    """The `def` line of each @triton.jit function the wrapper launches, in source order."""
    return [k[0] for k in _kernels(lines)]


def _params(sig: str) -> dict:
    """name -> annotation ('' when none) of a `def`."""
    inner = sig[sig.index("(") + 1:sig.rindex(")")]
    out = {}
    for p in inner.split(","):
        name, _, ann = p.partition(":")
        out[name.split("=")[0].strip()] = ann.split("=")[0].strip()
    return out


def _always_runs(lines, start: int, j: int) -> bool:
    """Line j is not inside an `if`/`else` block (a constexpr condition may drop it)."""
    indent = len(lines[j]) - len(lines[j].lstrip())
    for i in range(j - 1, start - 1, -1):
        text = lines[i].lstrip()
        ind = len(lines[i]) - len(text)
        if text and not text.startswith("#") and ind < indent:
            if re.match(r"(if|elif|else|with|try|except)\b", text):
                return False
            indent = ind
    return True


_RUNTIME_SIZE = ("N", "n_elements", "numel", "n")


# -- a tile index built over the problem size instead of the block: a runtime bound ----------
def arange_sites(code: str) -> list:
    """(line, match start, def line, runtime name) of each `tl.arange(0, BLOCK_X)` (or `BLOCK`)
    of a kernel that also takes the size X (or N) as a runtime argument, on a line that always
    compiles; the first on its line."""
    lines = code.split("\n")
    out = []
    for d, sig, body, end in _kernels(lines):
        params = _params(sig)
        runtime = [n for n, ann in params.items() if ann == ""]
        for j in range(body, end):
            if lines[j].lstrip().startswith("#") or not _always_runs(lines, body, j):
                continue
            for m in _ARANGE.finditer(lines[j]):
                block = m.group(0)[len("tl.arange(0, "):-1]
                name = m.group(1) or next((n for n in _RUNTIME_SIZE if n in runtime), None)
                if name in runtime and params.get(block) == "tl.constexpr":
                    out.append((j, m.start(), d, name))
                    break
    return out


def arange_runtime(code: str, site: int, dtype: str = ""):
    sites = arange_sites(code)
    if not sites:
        return None
    j, start, d, name = sites[site % len(sites)]
    lines = code.split("\n")
    line = lines[j]
    m = _ARANGE.match(line, start)
    lines[j] = line[:start] + f"tl.arange(0, {name})" + line[m.end():]
    return "\n".join(lines), compilation_error(lines, d, j, start, "arange's arguments must be of type tl.constexpr")


# -- a softmax tile fed to tl.dot still in fp32: the cast to the other operand's dtype left out --
_DOT_CAST = re.compile(r"tl\.dot\((tl\.trans\()?([A-Za-z_]\w*)\.to\(([A-Za-z_]\w*)\.dtype\)(\)?),\s*([A-Za-z_]\w*)\b")
TL_DTYPE = {"fp16": "fp16", "bf16": "bf16"}     # task dtype -> Triton's name (the other operand's)


def dot_cast_sites(code: str) -> list:
    """(line, match start, def line) of each `tl.dot(p.to(v.dtype), v)` (or its tl.trans form)
    that always compiles."""
    lines = code.split("\n")
    out = []
    for d, sig, body, end in _kernels(lines):
        for j in range(body, end):
            if lines[j].lstrip().startswith("#") or not _always_runs(lines, body, j):
                continue
            m = next((m for m in _DOT_CAST.finditer(lines[j]) if m.group(3) == m.group(5)
                      and bool(m.group(1)) == bool(m.group(4))), None)
            if m:
                out.append((j, m.start(), d))
    return out


def dot_dtype(code: str, site: int, dtype: str = ""):
    sites = dot_cast_sites(code)
    if not sites or dtype not in TL_DTYPE:
        return None
    j, start, d = sites[site % len(sites)]
    lines = code.split("\n")
    line = lines[j]
    m = _DOT_CAST.match(line, start)
    a = f"tl.trans({m.group(2)})" if m.group(1) else m.group(2)
    lines[j] = line[:start] + f"tl.dot({a}, {m.group(5)}" + line[m.end():]
    return "\n".join(lines), compilation_error(lines, d, j, start,
                                               f"Both operands must be same dtype. Got fp32 and {TL_DTYPE[dtype]}")
