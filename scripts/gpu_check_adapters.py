"""Per-module data for scripts/gpu_check.py: check shapes, tolerance classes and adapters.

A module whose op spec carries an `entry` (kernelstrain/ops/contract.py) needs nothing here: its
check shape and tolerance class come from the spec (`check_shape`, `tolerance`), and its
arguments from the entry (`entry_adapter`, `entry_triton_adapter`): an input tensor named in the
spec's `inputs` is the candidate's copy of that reference input, any other input tensor or
scalar the reference Model's attribute of that name (or a task dim), an output a poisoned buffer
compared with the reference's result of that name; an inout tensor is compared in place. A spec
may define `check_adapter` / `check_prepare` (same forms as below) where that is not enough.
The tables below hold the modules not converted yet.

A CUDA adapter maps the reference's inputs (and the reference Model's weights) to the host entry
point's arguments, in `module.signature(task)` order without the stream:

    adapter(dims, model, inputs, ref, out_like) -> (args, outs)

`inputs` are the candidate's own copies of the reference inputs, `ref` the reference output(s),
`out_like(t)` a poisoned tensor shaped like t. `args` holds tensors (device pointers), Python
scalars, or HostPtrs / HostI64 (arrays in host memory). `outs` lists what to compare:
(name, candidate, reference[, tol]) where candidate is a tensor or a callable evaluated after the
launch, and tol a TOLS class name or a callable check(torch, out, ref) -> result dict.

A Triton adapter maps the same inputs to the wrapper's arguments and its return value to outs:

    adapter(dims, model, inputs) -> (args, outs_of(ret, ref))

Modules without one are called as wrapper(*inputs) and the return value(s) compared with the
reference output(s) in order. PREPARE[name](dims, inputs) edits the reference inputs before the
copies are taken (non-zero caches, padding tokens, ragged lengths).
"""
from __future__ import annotations

# One check shape per module: one of its own shapes or a smaller realistic one, so a case runs
# well under a second; with masked tails / non-power-of-two dims where its shapes have them.
SHAPES = {
    # moe / matmul / misc / ssm checked first (commit 9204e2d)
    "moe_scatter_cuda": {"T": 2048, "E": 64, "topk": 6, "K": 2048},
    "grouped_gemm_cuda": {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6},      # ~6 rows an expert
    "moe_combine_cuda": {"T": 2048, "topk": 6, "K": 2048},
    "gemv_cuda": {"M": 4, "N": 6144, "K": 4096},
    "gemm_int4_cuda": {"M": 16, "N": 4096, "K": 14336},                             # M < BM: masked rows
    "kv_append_cuda": {"T": 4096, "H": 16, "D": 256, "P": 32},
    "causal_conv1d_cuda": {"B": 16, "D": 2048, "L": 1024},                          # L < one vector tile
    "selective_scan_triton": {"B": 1, "L": 2048, "D": 1536, "N": 16},
    "gemm_fp8_blockwise_cuda": {"M": 2048, "N": 2048, "K": 2048},                   # 256 tiles: persistent loop
    # attention
    "cross_attention_triton": {"B": 4, "H": 20, "Sq": 448, "Skv": 1500, "D": 64},   # Whisper: both lengths ragged
    "flash_attn_bwd_triton": {"B": 2, "H": 16, "S": 2048, "D": 128},
    "flash_decode_triton": {"B": 8, "H": 32, "S": 2048, "D": 128},
    "flash_prefill_cuda": {"B": 1, "H": 32, "S": 2048, "D": 128},
    "flash_prefill_triton": {"B": 1, "H": 32, "S": 2048, "D": 128},
    "mla_decode_triton": {"B": 32, "H": 128, "S": 4000},                            # S: partial key tile
    "paged_decode_cuda": {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16},  # + ragged seq_lens
    "paged_decode_triton": {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16},
    "sliding_window_attn_triton": {"B": 2, "H": 16, "S": 3000, "D": 128, "W": 1024},  # S: partial tiles
    "tree_attention_triton": {"B": 8, "H": 32, "P": 2011, "N": 32, "D": 128},       # P: partial prefix tile
    # activations
    "bias_gelu_cuda": {"T": 1024, "N": 18176, "TANH": 0},                          # N: partial vector tile per row
    "dropout_cuda": {"T": 2048, "D": 5120},
    "softmax_cuda": {"R": 256, "C": 151936},                                        # Qwen vocab rows
    "softmax_triton": {"R": 256, "C": 151936},
    "swiglu_bwd_triton": {"T": 1024, "I": 13824},
    "swiglu_fwd_cuda": {"T": 1024, "I": 13824},
    "swiglu_fwd_triton": {"T": 1024, "I": 13824},
    # matmul
    "gemm_fp16_cuda": {"M": 2048, "N": 2048, "K": 2048},
    "gemm_fp16_triton": {"M": 2048, "N": 2048, "K": 2048},
    "gemm_fp8_cuda": {"M": 2048, "N": 2048, "K": 2048},
    "gemm_int8_cuda": {"M": 2048, "N": 2048, "K": 2048},
    # misc
    "embedding_gather_cuda": {"T": 4096, "V": 152064, "D": 3584},
    "rope_cuda": {"T": 2048, "H": 16, "D": 256},
    "rope_triton": {"T": 2048, "H": 16, "D": 256},
    "transpose_cuda": {"R": 2048, "C": 5120},
    # moe
    "grouped_gemm_triton": {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6},
    # quant
    # sampling: 256 rows so that a bug touching few rows still shows
    "top_p_cuda": {"B": 256, "V": 128256},
    "topk_cuda": {"B": 256, "V": 128256, "K": 50},
    # ssm
    "selective_scan_cuda": {"B": 1, "L": 2048, "D": 1536, "N": 16},
    # training
}

# Output tolerance classes. rtol: per element, relative to the reference value; atol_rel: per
# element, relative to the reference's RMS (scale-free); l2: bound on ||out - ref|| / ||ref||.
# 16-bit outputs of fp32 math differ from the reference by at most ~1 ulp of the output type
# (bf16: 2^-8..2^-7, fp16: 2^-11..2^-10). Quantized paths (int4 weights dequantized with a 16-bit
# multiply, fp8 tensor cores accumulating with reduced precision inside a 128-wide K block) add
# ~1e-3 of the output RMS, hence the larger atol_rel. Pure data movement must be bit exact.
# "row": atol_rel is relative to the larger of the row's RMS (last dim) and the whole output's, for
# outputs whose rows differ in scale by orders (causal attention rows, touched vs untouched
# rows); the floor keeps rows that are ~0 by cancellation (dq of the first causal query) sane.
TOLS = {
    "exact": {"rtol": 0.0, "atol_rel": 0.0, "l2": 0.0},
    "fp32": {"rtol": 1e-4, "atol_rel": 1e-5, "l2": 1e-5},
    "fp16": {"rtol": 1e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "bf16": {"rtol": 1.6e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "quant": {"rtol": 1.6e-2, "atol_rel": 1e-2, "l2": 1e-2},
    # attention: P (and dS in the backward) are rounded to 16 bits to feed the second tensor-core
    # product, as FlashAttention does (and the bf16 SDPA references do too): on the H200 every
    # correct bf16 kernel landed at ||err||/||ref|| <= 3.5e-3 (stable to ~2% across seeds and
    # variants; fp16 <= 4.4e-4), i.e. per-element noise of ~3e-3 of the row's RMS, whose 5-6 sigma
    # tail over ~1e7 elements reaches ~2e-2 of it. The l2 bound sits at 1.4x the worst correct
    # kernel: a bf16 accumulator (6.6e-3) fails it, a mask / scale / combine bug fails by far.
    "attn": {"rtol": 2e-2, "atol_rel": 3e-2, "l2": 5e-3, "row": True},
    # accumulation in the storage type: atomics add into a bf16/fp16 gradient, each add rounds,
    # and the order differs from the reference's index_add (a row hit k times: k roundings of a
    # value ~1.4, ~0.008 each, against a row RMS of ~1.2); untouched rows must stay bit exact
    "accum": {"rtol": 1.6e-2, "atol_rel": 2e-2, "l2": 1e-2, "row": True},
    # inclusive scans: outputs grow along the row (cumsum of 32000 values in [0, 1) reaches ~16000),
    # so an absolute floor tied to the RMS would hide errors of the small leading prefix sums;
    # fp32 partial sums in another order, rounded to bf16: within 1 ulp (2^-8) of the value
    "scan": {"rtol": 1.6e-2, "atol_rel": 1e-6, "l2": 1e-2},
    # x * (1/scale) instead of x / scale moves a value across an fp8 rounding boundary now and
    # then: one e4m3 step (<= 1/8 of the value) on a few elements
    "fp8q": {"rtol": 0.125, "atol_rel": 1e-3, "l2": 1e-2},
    # same for int8 (round half away from zero): +-1 on a few elements (RMS of q ~40: 0.03 of it)
    "int8q": {"rtol": 0.0, "atol_rel": 0.03, "l2": 1e-2},
}
_ATTN = ("cross_attention_triton", "flash_attn_bwd_triton", "flash_decode_triton", "flash_prefill_cuda",
         "flash_prefill_triton", "mla_decode_triton", "paged_decode_cuda", "paged_decode_triton",
         "sliding_window_attn_triton", "tree_attention_triton")
TOL_OF_MODULE = {
    "moe_scatter_cuda": "exact", "kv_append_cuda": "exact", "gemm_int4_cuda": "quant",
    "gemm_fp8_blockwise_cuda": "quant", "gemm_fp8_cuda": "quant",
    "embedding_gather_cuda": "exact", "transpose_cuda": "exact",
    "gemm_int8_cuda": "fp16",            # exact int32 sums, two fp32 scale multiplies, half output
    **{m: "attn" for m in _ATTN},
}


class HostPtrs:
    """An argument that is an array of device pointers in host memory."""

    def __init__(self, tensors):
        self.tensors = list(tensors)


class HostI64:
    """An argument that is an array of int64 in host memory."""

    def __init__(self, values):
        self.values = [int(v) for v in values]


def _torch():
    import torch
    return torch


# -- CUDA adapters ----------------------------------------------------------------------------

def _moe_scatter(d, model, x, ref, out_like):
    xs, ids, offs = (out_like(r) for r in ref)
    return ([x[0], x[1], xs, ids, offs, d["T"], d["E"], d["K"], d["topk"]],
            [("x_sorted", xs, ref[0]), ("sorted_ids", ids, ref[1]), ("expert_offsets", offs, ref[2])])


def _grouped_gemm(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], model.w.data, x[1], x[2], y, d["T"], d["E"], d["K"], d["N"], d["topk"]], [("y", y, ref)]


def _moe_combine(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], x[1], x[2], y, d["T"], d["K"], d["topk"]], [("y", y, ref)]


def _gemv(d, model, x, ref, out_like):
    y = out_like(ref)
    return [model.weight.data, x[0], y, d["M"], d["N"], d["K"]], [("y", y, ref)]


def _gemm_int4(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], model.qweight, model.scales, y, d["M"], d["N"], d["K"]], [("y", y, ref)]


def _gemm_scaled(d, model, x, ref, out_like):
    """A, B, scale_a, scale_b -> C (fp8 per-tensor, fp8 blockwise, int8 per-token/channel)."""
    c = out_like(ref)
    return [x[0], x[1], x[2], x[3], c, d["M"], d["N"], d["K"]], [("C", c, ref)]


def _gemm_fp16(d, model, x, ref, out_like):
    c = out_like(ref)
    return [x[0], x[1], c, d["M"], d["N"], d["K"]], [("C", c, ref)]


def _kv_append(d, model, x, ref, out_like):
    # caches are updated in place: the candidate's copies hold the same random contents the
    # reference started from, so every slot it fails to write (or writes wrongly) shows
    return ([x[0], x[1], x[2], x[3], x[4], d["T"], d["H"], d["D"], d["P"]],
            [("key_cache", x[2], ref[0]), ("value_cache", x[3], ref[1])])


def _kv_append_prepare(d, inputs):
    torch = _torch()
    inputs[2].copy_(torch.randn_like(inputs[2]))     # never zeros: unwritten slots keep random data
    inputs[3].copy_(torch.randn_like(inputs[3]))
    inputs[4][3::37] = -1                              # padding tokens (skipped); the last token is real


def _causal_conv1d(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], x[1], x[2], y, d["B"], d["D"], d["L"]], [("y", y, ref)]


def _unary(*dims):
    """x -> y with the given dims after the two pointers (softmax, transpose, scan, swiglu ...)."""
    def adapter(d, model, x, ref, out_like):
        y = out_like(ref)
        return [x[0], y, *(d[k] for k in dims)], [("y", y, ref)]
    return adapter


def _bias_gelu(d, model, x, ref, out_like):
    y = out_like(ref)
    return [x[0], model.bias.data, y, d["T"], d["N"]], [("y", y, ref)]


def _dropout(d, model, x, ref, out_like):
    # The reference is deterministic given (seed, offset): it runs the same Philox4x32-10 stream,
    # so every kept element must be x / (1 - p) and every dropped one 0, element for element,
    # which is stronger than a dropped-fraction test; the timed re-runs then recheck that the same
    # seed gives the same mask.
    y = out_like(ref)
    return [x[0], y, x[0].numel(), model.p, model.seed, model.offset], [("y", y, ref)]


def _embedding_gather(d, model, x, ref, out_like):
    out = out_like(ref)
    return [x[0], x[1], out, d["T"], d["V"], d["D"]], [("out", out, ref)]


def _flash_prefill(d, model, x, ref, out_like):
    o = out_like(ref)
    return [x[0], x[1], x[2], o, d["B"], d["H"], d["S"], d["D"] ** -0.5], [("o", o, ref)]


def _paged_decode(d, model, x, ref, out_like):
    o = out_like(ref)
    return [x[0], x[1], x[2], x[3], x[4], o, d["B"], d["S"] // d["P"], d["D"] ** -0.5], [("o", o, ref)]


def _paged_decode_prepare(d, inputs):
    # ragged contexts, as in serving: lengths in [S/2, S], most not a multiple of the page size;
    # the first sequence keeps the full S
    torch = _torch()
    lens = torch.randint(d["S"] // 2, d["S"] + 1, (d["B"],), device=inputs[4].device, dtype=torch.int32)
    lens[0] = d["S"]
    inputs[4].copy_(lens)


def _rope(d, model, x, ref, out_like):
    # q and k are rotated in place
    return ([x[0], x[1], x[2], model.cos_sin_cache, d["T"], d["H"], d["D"]],
            [("q", x[1], ref[0]), ("k", x[2], ref[1])])


def _selective_scan(d, model, x, ref, out_like):
    y = out_like(ref)
    return [*x[:8], y, d["B"], d["D"], d["L"]], [("y", y, ref)]


# -- sampling: the token must lie in the reference distribution's allowed set, at the uniform ----

def sample_check(kept, target, eps=1e-5):
    """check(torch, tokens, ref) for inverse-CDF sampling over the unnormalized kept mass `kept`
    [B, V] (float64, 0 = excluded) at `target` [B] (uniform x total): token t is right iff it is
    allowed and cdf[t] - kept[t] <= target <= cdf[t], within eps of the row's mass (the kernel's
    fp32 partial sums run in another order than the reference's cumsum)."""
    cdf = kept.cumsum(-1)
    tol = eps * cdf[:, -1]

    def check(torch, out, ref):
        if out.shape != ref.shape:
            return {"ok": False, "error": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}", "nbad": -1}
        tok = out.long()
        inside = (tok >= 0) & (tok < kept.shape[1])
        t = tok.clamp(0, kept.shape[1] - 1)[:, None]
        hi, w = cdf.gather(1, t)[:, 0], kept.gather(1, t)[:, 0]
        good = inside & (w > 0) & (hi - w <= target + tol) & (hi >= target - tol)
        nbad = int((~good).sum().item())
        differ = int((out != ref).sum().item())
        return {"ok": nbad == 0, "nbad": nbad, "numel": out.numel(), "max_abs_err": float(differ),
                "rel_l2_err": differ / out.numel(), "nonfinite": 0, "differs_from_ref": differ}
    return check


def _topk(d, model, x, ref, out_like):
    torch = _torch()
    logits, u = x[0].double(), x[1].double()
    thresh = torch.topk(logits, d["K"], dim=-1).values[:, -1:]
    kept = torch.softmax(logits.masked_fill(logits < thresh, float("-inf")), dim=-1)
    tok = out_like(ref)
    return [x[0], x[1], tok, d["B"], d["V"], d["K"]], [("tokens", tok, ref, sample_check(kept, u))]


def _top_p(d, model, x, ref, out_like):
    torch = _torch()
    probs = torch.softmax(x[0].double(), dim=-1)
    sp = probs.sort(dim=-1, descending=True).values
    last = (sp.cumsum(-1) < x[1].double()[:, None]).sum(-1, keepdim=True).clamp(max=d["V"] - 1)
    kept = probs.masked_fill(probs < sp.gather(-1, last), 0.0)
    tok = out_like(ref)
    return ([x[0], x[1], x[2], tok, d["B"], d["V"]],
            [("tokens", tok, ref, sample_check(kept, x[2].double() * kept.sum(-1)))])


ADAPTERS = {
    "moe_scatter_cuda": _moe_scatter, "grouped_gemm_cuda": _grouped_gemm, "moe_combine_cuda": _moe_combine,
    "gemv_cuda": _gemv, "gemm_int4_cuda": _gemm_int4, "gemm_fp8_blockwise_cuda": _gemm_scaled,
    "kv_append_cuda": _kv_append, "causal_conv1d_cuda": _causal_conv1d,
    "gemm_fp8_cuda": _gemm_scaled, "gemm_int8_cuda": _gemm_scaled, "gemm_fp16_cuda": _gemm_fp16,
    "softmax_cuda": _unary("R", "C"), "transpose_cuda": _unary("R", "C"),
    "swiglu_fwd_cuda": _unary("T", "I"),
    "bias_gelu_cuda": _bias_gelu, "dropout_cuda": _dropout,
    "embedding_gather_cuda": _embedding_gather,
    "flash_prefill_cuda": _flash_prefill, "paged_decode_cuda": _paged_decode,
    "rope_cuda": _rope, "selective_scan_cuda": _selective_scan,
    "topk_cuda": _topk, "top_p_cuda": _top_p,
}


# -- Triton adapters ---------------------------------------------------------------------------

def _t_extra(*extra):
    """wrapper(*inputs, *extra(dims, model)) returning the output(s)."""
    def adapter(d, model, x):
        return [*x, *(e(d, model) for e in extra)], default_outs
    return adapter


def _t_grouped_gemm(d, model, x):
    return [x[0], model.w.data, x[1], x[2]], default_outs


def _t_rope(d, model, x):
    # q and k are rotated in place (and returned)
    return [x[0], x[1], x[2], model.cos_sin_cache], lambda ret, ref: [("q", x[1], ref[0]), ("k", x[2], ref[1])]


def default_outs(ret, ref):
    if isinstance(ref, (tuple, list)):
        if not isinstance(ret, (tuple, list)) or len(ret) != len(ref):
            raise TypeError(f"wrapper returned {type(ret).__name__}, reference has {len(ref)} outputs")
        return [(f"out{i}", o, r) for i, (o, r) in enumerate(zip(ret, ref))]
    return [("y", ret, ref)]


def _scale(d, model):
    return d["D"] ** -0.5


TRITON_ADAPTERS = {
    "grouped_gemm_triton": _t_grouped_gemm,
    "flash_decode_triton": _t_extra(_scale), "flash_prefill_triton": _t_extra(_scale),
    "paged_decode_triton": _t_extra(_scale), "rope_triton": _t_rope,
}

PREPARE = {"kv_append_cuda": _kv_append_prepare, "paged_decode_cuda": _paged_decode_prepare,
           "paged_decode_triton": _paged_decode_prepare}


# -- adapters from the op's entry ------------------------------------------------------------

def _tensor_arg(module, a, model, x):
    if a.name in module.inputs:
        return x[module.inputs.index(a.name)]
    v = getattr(model, a.name)
    return getattr(v, "data", v)


def _scalar_arg(s, d, model):
    if s.name in d:
        return d[s.name]
    if s.value is not None:
        return eval(s.value, {"__builtins__": {}}, dict(d))   # noqa: S307 - the spec's own expression
    return getattr(model, s.name)


def entry_adapter(module):
    """The CUDA adapter of a module with an entry: args in entry order, outs in result order."""
    e = module.entry

    def adapter(d, model, x, ref, out_like):
        refs = ref if len(e.results) > 1 else (ref,)
        of = dict(zip(e.results, refs))
        args, made = [], {}
        for a in e.args:
            if not hasattr(a, "role"):
                args.append(_scalar_arg(a, d, model))
            elif a.role == "out":
                made[a.name] = out_like(of[a.name])
                args.append(made[a.name])
            else:
                args.append(_tensor_arg(module, a, model, x))
        outs = [(n, made[n] if n in made else args[[a.name for a in e.args].index(n)], of[n]) for n in e.results]
        return args, outs
    return adapter


def entry_triton_adapter(module):
    """The Triton adapter of a module with an entry: the wrapper takes the in/inout tensors and
    the scalars the Model has; a result that is an inout tensor is checked in place."""
    e = module.entry

    def adapter(d, model, x):
        args = [_tensor_arg(module, a, model, x) for a in e.tensors if a.role != "out"]
        args += [getattr(model, s.name) for s in e.scalars if s.name not in d and s.value is None
                 and hasattr(model, s.name)]
        inplace = {a.name: args[i] for i, a in enumerate(t for t in e.tensors if t.role != "out")}

        def outs_of(ret, ref):
            rets = ret if len(e.results) > 1 else (ret,)
            refs = ref if len(e.results) > 1 else (ref,)
            return [(n, inplace[n] if e.arg(n).role == "inout" else r, f)
                    for n, r, f in zip(e.results, rets, refs)]
        return args, outs_of
    return adapter


def check_shape(module) -> dict | None:
    return module.check_shape or SHAPES.get(module.name)


def tolerance(module, dtype: str) -> str:
    return module.tolerance or TOL_OF_MODULE.get(module.name, dtype if dtype in TOLS else "quant")


def cuda_adapter(module):
    return getattr(module, "check_adapter", None) or (entry_adapter(module) if module.entry else
                                                       ADAPTERS.get(module.name))


def triton_adapter(module):
    return getattr(module, "check_adapter", None) or (entry_triton_adapter(module) if module.entry else
                                                       TRITON_ADAPTERS.get(module.name))


def prepare(module):
    return getattr(module, "check_prepare", None) or PREPARE.get(module.name)


def covered(module) -> bool:
    return check_shape(module) is not None and (module.impl == "triton" or cuda_adapter(module) is not None)

