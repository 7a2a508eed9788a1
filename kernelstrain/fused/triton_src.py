"""Triton kernels of a fused candidate and their launchers.

Elementwise kernels: a program a BLOCK of elements. Row kernels: a program ROWS rows, each row
whole in registers (BLOCK_C = C rounded up to a power of two, masked). GEMM kernels: a
BLOCK_M x BLOCK_N tile of the product, K in BLOCK_K steps through tl.dot (fp32 operands with
input_precision="ieee": PyTorch's fp32 matmul does not use TF32), the elementwise run applied to
the accumulator before the one store. Every kernel computes in fp32 and stores in the output's dtype;
a bf16 program's rounds each op's result to bf16 where the reference's tensors hold it (exprs.ROUND).

Bugs (written in only where they break this program: module.py decides):
  no_bounds_check     the row tile's column mask dropped from its loads and reductions (the store keeps
                      it): a row shorter than BLOCK_C reads and reduces the next row's values
  broadcast_index     a per-channel parameter indexed by offs % C, not (offs // inner) % C
  no_max_subtraction  exp of the raw element in softmax / log_softmax / logsumexp
  wrong_reduce_dim    the row read as C contiguous elements, not C elements `inner` apart
  half_accumulator    a sum reduced over a bf16 tile (tl.sum keeps bf16), or the GEMM's accumulator
                      kept in bf16 (bf16 programs)
  tf32_dot            an fp32 GEMM's tl.dot without input_precision="ieee": Triton's default, TF32 on the
                      tensor cores (operands rounded to 11 significant bits) against PyTorch's fp32 GEMM
"""
from __future__ import annotations

from .chain import chain_lines, kernel_args, round_stmt, rounded_entry
from .exprs import ROUND, TRITON_ROUND_FN
from .kernels import Kernel, chain_parts, row_step, row_steps
from .recipes import TRITON_WORDS, recipe
from .view import ProgramView


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _load(mask: str):
    def load(ptr: str, index: str) -> str:
        return f"tl.load({ptr}_ptr + {index}, mask={mask}, other=0.0).to(tl.float32)"
    return load


def _ptr_args(args: list) -> str:
    return ", ".join(f"{n}_ptr" for n, _ in args)


def ew_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    g = view.kernel_geometry(k)
    args = kernel_args(view, k)
    [(entry, part)] = chain_parts(view.steps, k)
    chan = f"offs % {g.C}" if bug == "broadcast_index" else f"(offs // {g.inner}) % {g.C}"
    body = chain_lines(view, k, entry, part, "triton", chan, "offs", _load("mask"))
    kernel = [f"@triton.jit\ndef {name}_kernel({_ptr_args(args)}, y_ptr, n, BLOCK: tl.constexpr):",
              "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < n",
              "    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)",
              *["    " + s for s in body],
              "    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=mask)"]
    names = ", ".join(n for n, _ in args)
    launcher = [f"def {name}({names}):", "    y = torch.empty_like(x)", "    n = x.numel()",
                f"    {name}_kernel[(triton.cdiv(n, {params['BLOCK']}),)]({names}, y, n, BLOCK={params['BLOCK']}, "
                f"num_warps={params['num_warps']})", "    return y"]
    return "\n".join(kernel), "\n".join(launcher)


def row_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    """A row kernel: its prologue on the loaded row, then each row step (a fused_rows kernel has several, the
    row held in registers between them) with the steps after it, then the one store."""
    steps = view.steps
    r = row_step(steps, k)
    g = view.geometry(r)
    rows_per, block_c = params.get("ROWS", 1), next_pow2(g.C)
    args = kernel_args(view, k)
    (entry, pre), *afters = chain_parts(steps, k)
    contiguous = bug == "wrong_reduce_dim"
    if contiguous or g.inner == 1:
        base, stride = f"rows * {g.C}", "1"
    else:
        base, stride = f"(rows // {g.inner}) * {g.C * g.inner} + rows % {g.inner}", str(g.inner)
    offs = f"base[:, None] + cols[None, :] * {stride}" if stride != "1" else "base[:, None] + cols[None, :]"
    lines = [f"@triton.jit\ndef {name}_kernel({_ptr_args(args)}, y_ptr, n_rows, C, ROWS: tl.constexpr, BLOCK_C: tl.constexpr):",
             "    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)", "    cols = tl.arange(0, BLOCK_C)",
             "    rmask = rows < n_rows", "    in_row = rmask[:, None] & (cols[None, :] < C)",
             "    mask = rmask[:, None]" if bug == "no_bounds_check" else "    mask = in_row",
             f"    base = {base}", f"    offs = {offs}",
             "    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)"]
    lines += ["    " + s for s in chain_lines(view, k, entry, pre, "triton", "cols[None, :]", "offs", _load("mask"), stored=False)]
    for r, (_, post) in zip(row_steps(steps, k), afters):
        last = r == row_steps(steps, k)[-1]
        body, stores = _row_step_lines(view, k, r, post, bug, last)
        lines += body
    alloc = "    y = torch.empty_like(x)" if stores == "row" else \
        f"    shape = list(x.shape)\n    shape[{steps[r]['params']['dim'] % len(steps[r]['in']['shape'])}] = 1\n" \
        "    y = torch.empty(shape, dtype=x.dtype, device=x.device)"
    names = ", ".join(n for n, _ in args)
    launcher = [f"def {name}({names}):", alloc, f"    n_rows = x.numel() // {g.C}",
                f"    {name}_kernel[(triton.cdiv(n_rows, {rows_per}),)]({names}, y, n_rows, {g.C}, ROWS={rows_per}, "
                f"BLOCK_C={block_c}, num_warps={params['row_warps']})", "    return y"]
    return "\n".join(lines), "\n".join(launcher)


def _row_step_lines(view: ProgramView, k: Kernel, r: int, post: list, bug: str | None, last: bool) -> tuple[list, str]:
    """(the lines of row step r and the steps after it up to the next row step, what the kernel stores:
    `row` or `value`). The last row step's value is stored; an earlier one's, rounded to bf16 where the
    reference's tensor holds it, enters the next steps in registers."""
    steps, lines = view.steps, []
    op = steps[r]["op"]
    rec = recipe(op, bug == "no_max_subtraction", view.dtype == "bf16")
    words = {**TRITON_WORDS, "C": "C", "w": f"w{r}[None, :]", "b": f"b{r}[None, :]"}
    if op == "layer_norm":
        lines += [f"    w{r} = tl.load(w{r}_ptr + cols, mask=cols < C, other=0.0).to(tl.float32)",
                  f"    b{r} = tl.load(b{r}_ptr + cols, mask=cols < C, other=0.0).to(tl.float32)"]
    elif op == "rms_norm":
        lines.append(f"    w{r} = tl.load(w{r}_ptr + cols, mask=cols < C, other=0.0).to(tl.float32)")
    for combine, term, result in rec.passes:
        target, value = result.split(" = ")
        ident = "0.0" if combine == "sum" else "float(\"-inf\")"
        fn = "tl.sum" if combine == "sum" else "tl.max"
        term_text = term.format(**words).replace("mean", "mean[:, None]").replace("(v - m)", "(v - m[:, None])")
        acc = f"{fn}(tl.where(mask, {term_text}, {ident}), axis=1)"
        if combine == "sum" and bug == "half_accumulator":
            acc = f"tl.sum(tl.where(mask, {term_text}, 0.0).to(tl.bfloat16), axis=1).to(tl.float32)"
        lines.append(f"    {target} = {value.format(acc=acc, **words)}")
    if rec.out:
        out = rec.out.format(**words)
        for s_ in ("mean", "rstd", "m", "s"):
            out = _bcast(out, s_)
        lines.append(f"    {out}")
        entry = rounded_entry(view, post, "triton") if last else \
            ([round_stmt("triton")] if view.dtype == "bf16" else [])
        lines += ["    " + s for s in entry +
                  chain_lines(view, k, r, post, "triton", "cols[None, :]", "offs", _load("mask"), stored=last)]
        if last:
            lines.append("    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=in_row)")
        return lines, "row"
    lines.append(f"    v = {rec.value.format(**words)}")
    lines += ["    " + s for s in rounded_entry(view, post, "triton") +
              chain_lines(view, k, r, post, "triton", "rows * 0", "rows", _load("rmask"))]
    lines.append("    tl.store(y_ptr + rows, v.to(y_ptr.dtype.element_ty), mask=rmask)")
    return lines, "value"


def _bcast(text: str, word: str) -> str:
    """A per-row scalar used against the (ROWS, BLOCK_C) tile: broadcast along the columns."""
    import re
    return re.sub(rf"\b{word}\b(?!\[)", f"{word}[:, None]", text)


def gemm_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    steps = view.steps
    head = steps[k.steps[0]]
    args = kernel_args(view, k)
    [(entry, part)] = chain_parts(steps, k)
    ieee = ', input_precision="ieee"' if view.dtype == "fp32" and bug != "tf32_dot" else ""
    half = bug == "half_accumulator"
    acc_t, to_acc = ("tl.bfloat16", ".to(tl.bfloat16)") if half else ("tl.float32", "")
    chan = "offs % N"      # the output's last dim: features
    mask = "(rm[:, None] < M) & (rn[None, :] < N)"
    body = chain_lines(view, k, entry, part, "triton", chan, "offs", _load(mask))
    linear = head["op"] == "linear"
    a_name, b_name = ("x", "w") if linear else ("a", "b")
    has_bias = linear and head["params"]["bias"]
    lines = [f"@triton.jit\ndef {name}_kernel({_ptr_args(args)}, y_ptr, M, N, K, stride_ab, stride_am, stride_ak, "
             "stride_bb, stride_bk, stride_bn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):",
             "    pid_m = tl.program_id(0)", "    pid_n = tl.program_id(1)", "    batch = tl.program_id(2)",
             "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)", "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
             "    rk = tl.arange(0, BLOCK_K)",
             f"    a_ptrs = {a_name}_ptr + batch * stride_ab + rm[:, None] * stride_am + rk[None, :] * stride_ak",
             f"    b_ptrs = {b_name}_ptr + batch * stride_bb + rk[:, None] * stride_bk + rn[None, :] * stride_bn",
             f"    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype={acc_t})",
             "    for k in range(0, K, BLOCK_K):",
             "        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)",
             "        b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)",
             f"        acc += tl.dot(a, b{ieee}){to_acc}", "        a_ptrs += BLOCK_K * stride_ak", "        b_ptrs += BLOCK_K * stride_bk",
             "    v = acc" + (".to(tl.float32)" if half else ""), "    offs = batch * M * N + rm[:, None] * N + rn[None, :]"]
    if has_bias:
        lines.append("    v = v + tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]")
    lines += ["    " + s for s in rounded_entry(view, part, "triton") + body]      # the library GEMM's bf16 output
    lines.append(f"    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask={mask})")
    names = ", ".join(n for n, _ in args)
    bm, bn, bk = params["BLOCK_M"], params["BLOCK_N"], params["BLOCK_K"]
    if linear:
        shape = head["out"]["shape"]
        launcher = [f"def {name}({names}):", "    K = x.shape[-1]", "    N = w.shape[0]", "    M = x.numel() // K",
                    f"    y = torch.empty({tuple(shape)!r}, dtype=x.dtype, device=x.device)",
                    "    batches, strides = 1, (0, K, 1, 0, 1, K)"]
    elif head["op"] == "bmm":
        launcher = [f"def {name}({names}):", "    batches, M, K = a.shape", "    N = b.shape[2]",
                    "    y = torch.empty((batches, M, N), dtype=a.dtype, device=a.device)",
                    "    strides = (M * K, K, 1, K * N, N, 1)"]
    else:
        launcher = [f"def {name}({names}):", "    M, K = a.shape", "    N = b.shape[1]",
                    "    y = torch.empty((M, N), dtype=a.dtype, device=a.device)", "    batches, strides = 1, (0, K, 1, 0, N, 1)"]
    launcher += [f"    grid = (triton.cdiv(M, {bm}), triton.cdiv(N, {bn}), batches)",
                 f"    {name}_kernel[grid]({names}, y, M, N, K, *strides, BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, "
                 f"num_warps={params['gemm_warps']}, num_stages={params['num_stages']})", "    return y"]
    return "\n".join(lines), "\n".join(launcher)


def triton_source(view: ProgramView, kernels: list, params: dict, bug: str | None) -> tuple[str, list[str]]:
    """(the kernels and launchers of the candidate, the launchers' names)."""
    parts, names = [], []
    for n, k in enumerate(kernels, 1):
        name = f"k{n}_{k.kind}"
        render = {"ew": ew_kernel, "row": row_kernel, "gemm": gemm_kernel}[k.kind]
        kernel, launcher = render(view, k, name, params, bug)
        parts.append(kernel + "\n\n\n" + launcher + "\n\n")
        names.append(name)
    if any(ROUND + "(" in p for p in parts):       # a bf16 program's kernels that round as the reference does
        parts.insert(0, TRITON_ROUND_FN + "\n\n")
    return "\n".join(parts), names
