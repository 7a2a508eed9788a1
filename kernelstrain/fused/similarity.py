"""Similarity of a task to KernelBench problems: normalized source and operator sequence.

Normalized source: Python tokens without comments, docstrings or layout; numbers become
`0`, strings `''`, and identifiers that are not torch API names or keywords (local names,
constants, the model's own attributes) become `_`.
Two sources are compared by the Jaccard index of their 8-token shingles; equal normalized
token streams have equal `normalized_hash`.

Operator sequence: the forward pass's operators in evaluation order, read from the AST
(modules built in `__init__`, torch / functional calls, tensor methods, arithmetic), in a
coarse vocabulary so spellings agree (`nn.Linear`, `F.linear`, `torch.matmul`, `@` are all
`gemm`). Compared with difflib's ratio.

A task is too similar when source similarity >= SOURCE_THRESHOLD or operator-sequence
similarity >= OPS_THRESHOLD (a same-length sequence with one operator changed scores
below it for every length up to 9; identical sequences score 1.0).

>>> op_sequence("import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.relu(x @ x) * 2")
['gemm', 'relu', 'mul']
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import io
import keyword
import re
import tokenize
from pathlib import Path

SOURCE_THRESHOLD = 0.7
OPS_THRESHOLD = 0.9
SHINGLE = 8

# coarse operator vocabulary: spelling (module class, function or method, lowercased) -> op
COARSE = {
    "linear": "gemm", "matmul": "gemm", "mm": "gemm", "addmm": "gemm", "gram": "gemm", "bilinear": "gemm",
    "bmm": "bmm", "baddbmm": "bmm", "einsum": "gemm",
    "gelu_tanh": "gelu", "new_gelu": "gelu", "newgelu": "gelu", "gelu": "gelu", "quick_gelu": "gelu", "quickgelu": "gelu",
    "leakyrelu": "leaky_relu", "relu6": "clamp", "hardtanh": "clamp", "clamp": "clamp", "clip": "clamp",
    "clamp_min": "clamp", "clamp_max": "clamp",
    "layernorm": "layer_norm", "rmsnorm": "rms_norm", "groupnorm": "group_norm",
    "batchnorm1d": "batch_norm", "batchnorm2d": "batch_norm", "batchnorm3d": "batch_norm",
    "instancenorm1d": "instance_norm", "instancenorm2d": "instance_norm", "instancenorm3d": "instance_norm",
    "softmax": "softmax", "logsoftmax": "log_softmax", "scaled_dot_product_attention": "sdpa", "sdpa": "sdpa",
    "multiheadattention": "sdpa", "embedding": "embedding", "hardswish": "hardswish", "silu": "silu", "swish": "silu",
    "residual_add": "add", "add_scalar": "add", "bias_add": "add", "add": "add", "scale": "mul", "scale_param": "mul",
    "mul": "mul", "multiply": "mul", "divide": "div", "div": "div", "true_divide": "div", "sub": "sub",
    "max": "amax", "amax": "amax", "min": "amin", "amin": "amin", "sum": "sum", "mean": "mean", "logsumexp": "logsumexp",
    "adaptiveavgpool1d": "adaptive_avg_pool", "adaptiveavgpool2d": "adaptive_avg_pool", "adaptiveavgpool3d": "adaptive_avg_pool",
}
for _d in (1, 2, 3):
    COARSE.update({f"conv{_d}d": f"conv{_d}d", f"convtranspose{_d}d": f"conv_transpose{_d}d",
                   f"conv_transpose{_d}d": f"conv_transpose{_d}d", f"maxpool{_d}d": f"max_pool{_d}d",
                   f"max_pool{_d}d": f"max_pool{_d}d", f"avgpool{_d}d": f"avg_pool{_d}d", f"avg_pool{_d}d": f"avg_pool{_d}d",
                   f"adaptive_avg_pool{_d}d": "adaptive_avg_pool"})
# spellings that are operators under their own name
SAME = {"relu", "leaky_relu", "elu", "selu", "mish", "softplus", "sigmoid", "tanh", "abs", "exp", "log", "sqrt",
        "rsqrt", "glu", "dropout", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
        "log_softmax", "softsign", "tanhshrink", "hardsigmoid", "pow", "square", "norm", "cumsum", "argmax", "argmin",
        "prod", "var", "std", "erf", "celu", "gelu", "silu", "hardswish", "clamp", "softmax", "sdpa", "embedding"}
IGNORED = {"view", "reshape", "flatten", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "expand",
           "size", "float", "to", "type_as", "chunk", "split", "cat", "stack", "super", "__init__", "shape", "dim"}
_BINOPS = {ast.Add: "add", ast.Mult: "mul", ast.Div: "div", ast.Sub: "sub", ast.MatMult: "gemm", ast.Pow: "pow"}


def coarse(name: str) -> str | None:
    """The coarse operator of a spelling, None when it is no operator (view, reshape ...)."""
    key = name.lower()
    if key in IGNORED:
        return None
    return COARSE.get(key, key if key in SAME else None)


def coarse_ops(ops: list[str]) -> list[str]:
    """A task's operator list in the coarse vocabulary (flatten and other reshapes drop out)."""
    return [c for c in (coarse(o) for o in ops) if c]


class _Forward(ast.NodeVisitor):
    """Operators of one forward(), arguments before the call that consumes them."""

    def __init__(self, modules: dict):
        self.modules, self.ops = modules, []

    def visit_Call(self, node: ast.Call):
        for arg in node.args + [k.value for k in node.keywords]:
            self.visit(arg)
        f = node.func
        if isinstance(f, ast.Attribute):
            self.visit(f.value)
            if isinstance(f.value, ast.Name) and f.value.id == "self":
                name = self.modules.get(f.attr)
            else:
                name = f.attr
        else:
            name = f.id if isinstance(f, ast.Name) else None
        op = coarse(name) if name else None
        if op:
            self.ops.append(op)

    def visit_BinOp(self, node: ast.BinOp):
        self.visit(node.left)
        self.visit(node.right)
        if type(node.op) in _BINOPS:
            self.ops.append(_BINOPS[type(node.op)])


def _module_class(call) -> str | None:
    if isinstance(call, ast.Call):
        f = call.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return None


def op_sequence(source: str) -> list[str]:
    """Coarse operators of `Model.forward` in evaluation order ([] if there is none)."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return []
    modules = {}
    for node in ast.walk(model):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                cls = _module_class(node.value)
                if cls:
                    modules[target.attr] = cls
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    visitor = _Forward(modules)
    for stmt in forward.body if forward else []:
        visitor.visit(stmt)
    return visitor.ops


_API = re.compile(r"^[a-z_][a-z0-9_]*$")


def normalized_tokens(source: str) -> list[str]:
    """Tokens of a source with comments, docstrings, layout, literals and local names normalized."""
    out, prev, before = [], None, None
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        if tok.type == tokenize.STRING:
            if prev in (None, ":"):   # a docstring or bare string statement
                continue
            text = "''"
        elif tok.type == tokenize.NUMBER:
            text = "0"
        elif tok.type == tokenize.NAME and not keyword.iskeyword(tok.string):
            # API names after a dot (torch.relu, nn.Linear, x.sum) and the torch namespaces stay;
            # a model's own attributes (self.fc) are local names
            api = prev == "." and before != "self"
            text = tok.string if api or tok.string in ("torch", "nn", "F", "self", "Model") else "_"
        else:
            text = tok.string
        out.append(text)
        prev, before = tok.string, prev
    return out


def normalized_hash(source: str) -> str:
    return hashlib.sha256(" ".join(normalized_tokens(source)).encode()).hexdigest()


def shingles(source: str) -> frozenset:
    toks = normalized_tokens(source)
    return frozenset(tuple(toks[i:i + SHINGLE]) for i in range(max(1, len(toks) - SHINGLE + 1)))


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class KernelBenchIndex:
    """KernelBench problems (every .py under a path holding `class Model`), ready to compare."""

    def __init__(self, path: Path):
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        self.problems = []
        for f in files:
            try:
                src = f.read_text(encoding="utf-8")
                if "class Model" not in src:
                    continue
                self.problems.append((str(f.relative_to(path) if path.is_dir() else f.name), shingles(src), op_sequence(src)))
            except (OSError, SyntaxError, UnicodeDecodeError, tokenize.TokenError):
                continue

    def __len__(self) -> int:
        return len(self.problems)

    def nearest(self, source: str, ops: list[str]) -> dict:
        """The most similar problem by each measure: {source_sim, source_match, ops_sim, ops_match}."""
        mine, seq = shingles(source), coarse_ops(ops)
        best = {"source_sim": 0.0, "source_match": None, "ops_sim": 0.0, "ops_match": None}
        for name, sh, kb_ops in self.problems:
            s = jaccard(mine, sh)
            if s > best["source_sim"]:
                best["source_sim"], best["source_match"] = round(s, 4), name
            if kb_ops:
                r = difflib.SequenceMatcher(None, seq, kb_ops, autojunk=False).ratio()
                if r > best["ops_sim"]:
                    best["ops_sim"], best["ops_match"] = round(r, 4), name
        return best


def too_similar(best: dict) -> bool:
    return best["source_sim"] >= SOURCE_THRESHOLD or best["ops_sim"] >= OPS_THRESHOLD
