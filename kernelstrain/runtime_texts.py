"""What the harness prints when a candidate builds but fails at run time: a launch the runtime
refuses or a kernel that faults, as PyTorch raises them (torch.AcceleratorError from
c10_cuda_check_implementation, as an H200 printed one: measurements/h200_gpucheck_s5151.json), an
MI300X's HSA memory-access fault, and a wrong result as torch.testing.assert_close reports it.

The free choices (which element, how far off) come from the caller's `wording` RNG only.
"""
from __future__ import annotations

import math
import random
import re
import struct
from statistics import NormalDist

from .tolerances import FEEDBACK, FEEDBACK_DEFAULT


# cudaGetErrorString -> the error's name
_ERROR_NAMES = {"an illegal memory access was encountered": "ErrorIllegalAddress",
                "unspecified launch failure": "ErrorLaunchFailure",
                "invalid argument": "ErrorInvalidValue",
                "invalid configuration argument": "ErrorInvalidConfiguration",
                "too many resources requested for launch": "ErrorLaunchOutOfResources",
                "misaligned address": "ErrorMisalignedAddress",
                "an illegal instruction was encountered": "ErrorIllegalInstruction"}
_HELP_URL = {"cuda": "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
             "hip": "https://rocm.docs.amd.com/projects/HIP/en/latest/index.html"}


def accelerator_error(what: str, hip: bool) -> str:
    """A CUDA/HIP error as PyTorch raises it (c10/cuda/CUDAException.cpp, CUDAMiscFunctions.cpp).

    >>> print(accelerator_error("invalid argument", hip=False))
    torch.AcceleratorError: CUDA error: invalid argument
    Search for `cudaErrorInvalidValue' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
    CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
    For debugging consider passing CUDA_LAUNCH_BLOCKING=1
    Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
    """
    api, rt = ("hip", "HIP") if hip else ("cuda", "CUDA")
    name = _ERROR_NAMES[what]
    # every error here is the candidate's launch, which checks nothing: PyTorch meets it at its own next
    # launch check, and says so (device job reader/j2, torch 2.11 on an H100: a refused launch's
    # "invalid argument" with this note; the CUDA_LOG_FILE line of an API call's own error is not printed)
    suffix = (f"{rt} kernel errors might be asynchronously reported at some other API call, so the stacktrace "
              f"below might be incorrect.\nFor debugging consider passing "
              f"{'AMD_SERIALIZE_KERNEL=3' if hip else 'CUDA_LAUNCH_BLOCKING=1'}")
    return (f"torch.AcceleratorError: {rt} error: {what}\nSearch for `{api}{name}' in {_HELP_URL[api]} for more "
            f"information.\n{suffix}\nCompile with `TORCH_USE_{rt}_DSA` to enable device-side assertions.")


def fault_text(bug: str, hip: bool, rng) -> str:
    """A kernel that crashes. On an MI300X an access outside every allocation often kills the
    process from the HSA runtime before PyTorch sees an error (a 47-bit user address, page aligned;
    the agent handle a heap pointer; GPU nodes 2-9 on an 8-GPU host)."""
    if hip and rng.random() < 0.5:
        reason = "Page not present or supervisor privilege" if rng.random() < 0.8 else "Unknown"
        return (f"Memory access fault by GPU node-{rng.randint(2, 9)} (Agent handle: "
                f"0x{rng.choice((0x55, 0x56))}{rng.getrandbits(40):010x}) on address "
                f"0x7f{rng.getrandbits(28):07x}000. Reason: {reason}.\nAborted (core dumped)")
    what = "unspecified launch failure" if bug == "missing_barrier" and rng.random() < 0.5 \
        else "an illegal memory access was encountered"
    return accelerator_error(what, hip)


# -- wrong results -----------------------------------------------------------------

def in_dtype(x: float, dtype: str) -> float:
    """x rounded to the output's dtype, as the Python float .item() gives (fp8 outputs are
    compared after .float(); fp32 otherwise).

    >>> in_dtype(0.2, "fp32"), in_dtype(0.4, "fp16"), in_dtype(0.1, "bf16")
    (0.20000000298023224, 0.39990234375, 0.10009765625)
    """
    if not math.isfinite(x):
        return x
    if dtype == "fp16":
        return _F16.unpack(_F16.pack(x))[0] if abs(x) < 65520 else math.copysign(math.inf, x)
    if abs(x) >= 3.4e38:
        return math.copysign(math.inf, x)                              # (bf16's rounding keeps an inf)
    if dtype != "bf16":
        return _F32.unpack(_F32.pack(x))[0]
    bits = _U32.unpack(_F32.pack(x))[0]                                # x's float32 bits
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000          # round to nearest even
    return _F32.unpack(_U32.pack(bits))[0]


# (compiled once: in_dtype is asked for every column of a weight_mismatch_text, ~150,000 times a run)
_F16, _F32, _U32 = struct.Struct("e"), struct.Struct("f"), struct.Struct("I")


# output dtypes torch compares exactly ("Tensor-likes are not equal!", integer differences): sampled
# token ids (int32), quantized bytes (int8, uint8)
INTEGER = ("int", "int8", "int32", "int64", "uint8")


def _extreme(n: int, u: float) -> float:
    """The largest of n standard half-normal draws, from one uniform u (its order statistic)."""
    p = min(u ** (1.0 / max(n, 1)), 1 - 1e-16)
    return _STANDARD.inv_cdf((1 + p) / 2)


def _smallest(n: int, u: float) -> float:
    """The smallest of n standard half-normal draws, from one uniform u."""
    p = max(1 - (1 - u) ** (1.0 / max(n, 1)), 1e-300)
    return _STANDARD.inv_cdf(0.5 + p / 2) if p > 1e-12 else p * math.sqrt(math.pi / 2)


_STANDARD = NormalDist()     # N(0, 1), made once (_extreme is asked for every column of a weight_mismatch_text)


# share of the output a bug spoils, whether its error scales with the value (a lost scale, a
# half-precision accumulator), and where the spoiled elements lie
def _spoiled(bug: str, last: int, rng) -> tuple[float, float, bool, str]:
    """(share of elements, error over the output's scale, error proportional to the value, where).
    Only `bug`'s own entry draws from `rng` (the table is a table of functions), so a bug added to
    it changes no other bug's text."""
    table = {
        "no_bounds_check": lambda: (min(1.0, rng.randint(1, 31) / last), rng.uniform(1, 40), False, "tail"),
        "off_by_one": lambda: (min(1.0, 1.0 / last), rng.uniform(0.3, 2.0), False, "last"),
        "missing_barrier": lambda: (rng.uniform(0.001, 0.03), rng.uniform(0.5, 4.0), False, "scattered"),
        "racy_update": lambda: (rng.uniform(0.01, 0.3), rng.uniform(0.3, 1.0), False, "scattered"),
        "half_accumulator": lambda: (rng.uniform(0.05, 0.6), rng.uniform(0.02, 0.15), True, "scattered"),
        "tf32_dot": lambda: (rng.uniform(0.05, 0.6), rng.uniform(2e-4, 2e-3), True, "scattered"),
        "wrong_init": lambda: (rng.uniform(0.4, 1.0), rng.uniform(0.5, 3.0), False, "scattered"),
        "missing_scale": lambda: (rng.uniform(0.9, 1.0), rng.uniform(0.5, 10.0), True, "scattered"),
        "bad_combine_index": lambda: (rng.uniform(0.2, 0.95), rng.uniform(0.5, 2.0), False, "scattered"),
    }
    return table.get(bug, lambda: (rng.uniform(0.05, 0.5), rng.uniform(0.3, 3.0), False, "scattered"))()


# -- what an off-by-one really spoils, read from the edit the rung's render makes -----------------
# An off_by_one is a bound one short, and which bound decides what is wrong: the K loop of a
# GEMM-like reduction (its last tile, or one k of every tile) spoils every output element a
# little; a flat element count (T * N - 1) the final element alone; a row mask (rows < T - 1) the
# last row; an attention's key range one key (or block) off changes every query row's softmax by
# that key's share of it: a decode step's (its last KV block, its window's first key) every output,
# a causal mask's (the diagonal, a diagonal block left unmasked) the first rows of each head, whose
# few keys make one key weigh most; a bound on the row's own loop or mask (D - 1) its last column
# (the default).
_K_BOUNDS = {"k_end", "kt_end", "k_tiles", "kt_stop", "kk_stop"}
_TILE_K = ("BK", "BLOCK_K", "TILE")     # the K tile's parameter, by the names the ladders give it
_SPLITS = ("SPLITS", "SPLIT_K")
_CAUSAL = {"causal", "keep", "keep_t", "bit"}     # one key in or out of every query row
_TILE_N = ("BLOCK_N", "BN")
DEFAULT_TILE_K = 64                     # rungs whose K tile is fixed in the code (wgmma, block-scaled MMA)


_WORD_ROWS = {"embedding_fwd", "embedding_gather", "swiglu_fwd", "bias_gelu",   # a row written 16 bytes a thread
              "softmax"}
_WORD_BOUND = re.compile(r"(chunks|N / VEC) - 1\b")
# a cache copy: (tokens or blocks copied, the element bound of one): kv_append one token's H * D
# values, paged_kv_copy one block's E (the destination's last element of each, head H - 1's last column)
_COPIES = {"kv_append": lambda d: (d["T"], "H * D - 1"), "paged_kv_copy": lambda d: (d["M"], "E - 1")}


_STATS_CHUNKS = {("rmsnorm", "chunked_two_pass"), ("add_rmsnorm", "two_kernels"), ("layernorm", "chunked_three_pass")}


def off_by_one_site(edit, dims: dict, params: dict, op: str = "", tag: str = "", warp: int = 32) -> tuple | None:
    """What the off_by_one `edit` (the slots a rung's render overrides) spoils: ("reduction", f)
    with f the share of the reduction dropped from every output element; ("keys", f) with f the
    share of each query's keys an attention's bound adds or drops (every output); ("first_rows",
    extra, prefix) a causal mask `extra` keys off for each query row (rows after a `prefix` of
    keys); ("rows", n[, rel]) n whole rows, off by rel of the scale (a grouped GEMM's expert
    lookup: each expert's first row; a scatter's rank: every row; an embedding gradient's segment
    end: each id's row); ("columns", rows, n) the last n columns (None: one 16-byte word) of `rows`
    rows (None: every row; a row copied a word a thread, its last word's bound one short);
    ("scale", rel) every element off by rel of its value (a norm's statistic missing its last
    chunk); ("final",) the flat output's last element; ("row",) the last row (the last head of
    rope's head mask, a persistent program's row loop); ("last_rows", n) the last n rows (rope's
    heads a thread leaves unrotated); None the last column of every row. `op` names the module's op where the slot's
    meaning depends on it.

    >>> off_by_one_site({"kt_end": "KT - 1"}, {"M": 64, "N": 64, "K": 4096}, {"BK": 32})
    ('reduction', 0.0078125)
    >>> off_by_one_site({"k_end": "K - 1"}, {"K": 512}, {}), off_by_one_site({"k_end": "BK - 1"}, {"K": 512}, {"BK": 16})
    (('reduction', 0.001953125), ('reduction', 0.0625))
    >>> off_by_one_site({"n": "(long long)T * N - 1"}, {}, {}), off_by_one_site({"rmask": "rows < T - 1"}, {}, {})
    (('final',), ('row',))
    >>> off_by_one_site({"stop": "S - BLOCK_N"}, {"S": 4096, "D": 64}, {"BLOCK_N": 64})
    ('keys', 0.015625)
    >>> off_by_one_site({"causal": "<"}, {"S": 2048, "D": 128}, {}), off_by_one_site({"diag": "P + m0 + BN"}, {"P": 16, "D": 128}, {"BN": 64})
    (('first_rows', 1, 0), ('first_rows', 32, 16))
    >>> off_by_one_site({"cmp": "<="}, {"K": 4096}, {})
    ('reduction', 0.000244140625)
    >>> off_by_one_site({"cmp": "<"}, {"T": 16, "E": 8, "K": 4096}, {})
    ('rows', 7)
    >>> off_by_one_site({"stop": "C - 8"}, {"R": 3, "S": 3, "C": 64, "K": 64}, {})
    ('reduction', 0.125)
    >>> off_by_one_site({"end": "k1 - 1"}, {"T": 512, "D": 4096, "V": 32000}, {}, "embedding_bwd")
    ('rows', 508, 1.0)
    >>> off_by_one_site({"guard": "c < chunks - 1"}, {"T": 8, "I": 4096}, {}, "swiglu_fwd")
    ('columns', None, None)
    >>> off_by_one_site({"stop": "hi - BLOCK_N"}, {"B": 1, "H": 128, "S": 4096}, {"BLOCK_N": 32})
    ('keys', 0.0078125)
    >>> off_by_one_site({"stop": "D - BLOCK"}, {"T": 1, "D": 4096}, {"BLOCK": 1024}, "rmsnorm", "chunked_two_pass")[1].__round__(4)
    0.1547
    >>> off_by_one_site({"stop": "C - BLOCK"}, {"R": 32, "C": 32000}, {"BLOCK": 2048}, "softmax", "online_softmax")
    ('columns', None, 1280)
    >>> off_by_one_site({"test": "lane > o"}, {"R": 1, "C": 4096}, {"threads": 256}, "prefix_scan")
    ('scale', 0.15234375)
    >>> off_by_one_site({"stop": "H * D - 1"}, {"T": 32, "H": 8, "D": 128}, {"vec": 2}, "kv_append")
    ('columns', 32, 2)
    >>> off_by_one_site({"heads": "HEADS_PER_THREAD - 1"}, {"T": 64, "H": 32, "D": 128}, {"head_threads": 16}, "rope")
    ('last_rows', 16)
    >>> off_by_one_site({"first": "threadIdx.y + BLOCK_ROWS"}, {"R": 4096, "C": 4096}, {"tile": 64, "block_rows": 8}, "transpose")
    ('unwritten_rows', 8, 64)
    >>> off_by_one_site({"last": "D - 1"}, {}, {}) is None
    True
    """
    if not isinstance(edit, dict):
        return None
    slots = {k: str(v) for k, v in edit.items()}
    tap = re.fullmatch(r"C - (\d+)", slots.get("stop", ""))
    if tap and "R" in dims and dims.get("C"):               # a conv's channel loop inside each tap
        return "reduction", min(1.0, int(tap.group(1)) / dims["C"])
    if slots.get("test") == "lane > o" and isinstance(params.get("threads"), int):
        # a warp scan whose lane o skips the lane o below: every lane but the first misses lane 0's
        # sum, so each warp total loses one lane and the warp-total scan loses warp 0: each tile's
        # carry short by 1/W + 1/w - 1/(w W) of it (W warps of w lanes), every later prefix that
        # share too small
        w = warp
        n = max(1, params["threads"] // w)
        return "scale", 1 / n + 1 / w - 1 / (w * n) if n > 1 else 1 / w
    if slots.get("stop") in ("T - 1", "R - 1"):              # a persistent program's row loop: the last row
        return ("row",)
    chunked = re.fullmatch(r"([DC]) - BLOCK", slots.get("stop", ""))
    if chunked and isinstance(params.get("BLOCK"), int) and dims.get(chunked.group(1)):
        n, block = dims[chunked.group(1)], params["BLOCK"]     # range(0, n - BLOCK, BLOCK) misses the
        dropped = n - min(n, -(-(n - block) // block) * block) if n > block else n   # last chunk (or all)
        if (op, tag) in _STATS_CHUNKS:                          # of the sum of squares: every element
            return "scale", 1 / math.sqrt(max(1 - dropped / n, 1e-6)) - 1   # times 1/sqrt(1 - f)
        return "columns", None, dropped                         # of the output loop: those columns
    if op == "softmax" and slots.get("last") == "WARPS - 1" and params.get("threads", 0) >= 2 * warp:
        # the block's merge of its warps' (max, sum) skips the last warp: the sum short by ~1/W of
        # it, every output 1/(W - 1) too large (where the row's max is not in that warp)
        return "scale", 1 / (params["threads"] // warp - 1)
    if op == "moe_scatter" and slots.get("cmp") == "<=":   # each rank counts itself (or its own block):
        return "rows", dims["T"] * dims["topk"], math.sqrt(2)   # every row holds a neighbour's token
    if op == "embedding_bwd":
        return _embedding_grad_site(slots, dims)
    if op == "transpose" and slots.get("first") == "threadIdx.y + BLOCK_ROWS" \
            and isinstance(params.get("block_rows"), int) and isinstance(params.get("tile"), int):
        # the store loop starts a stride late: tile rows j < BLOCK_ROWS are never written, so out
        # (C x R) keeps the zeros of its fresh allocation in the first BLOCK_ROWS of every TILE rows
        return "unwritten_rows", params["block_rows"], params["tile"]
    if op in _COPIES and any(k != "total" for k in slots):  # a cache copy's per-token (per-block) loop:
        units, each = _COPIES[op](dims)                       # its last element (or 16-byte word)
        if slots.get("stop") == "n - 1" and isinstance(params.get("threads"), int):   # cp.async staging:
            return "columns", units, params["threads"] * 8     # each thread's last 16-bit word of 8
        words = any(_WORD_BOUND.search(v) for v in slots.values())
        return "columns", units, None if words else (params.get("vec", 1) if each in slots.values() else None)
    if op in _WORD_ROWS and any(_WORD_BOUND.search(v) for v in slots.values()):
        return "columns", None, None                          # every row's last 16-byte word
    if op == "rope" and slots.get("bound") == "H - 1":       # the head mask: every token's last head
        return ("row",)
    if op == "rope" and slots.get("heads") == "HEADS_PER_THREAD - 1" and isinstance(params.get("head_threads"), int):
        # a thread rotates heads group + j * HEAD_THREADS of q's and k's 2H, j < ceil(2H / HEAD_THREADS):
        # the last j's heads stay unrotated, the last 2H - (j - 1) HEAD_THREADS of k (q rotated, so
        # assert_close fails on k, of q's shape); one j: every head of q too
        h, ht = dims["H"], params["head_threads"]
        per = -(-2 * h // ht)
        return ("last_rows", 2 * h - (per - 1) * ht) if per > 1 else ("last_rows", h)
    reduce = dims.get("R", 1) * dims.get("S", 1) * dims["C"] if "C" in dims and "R" in dims \
        else dims.get("HID") or dims.get("K")
    def reduction_bound(k: str, v: str) -> bool:       # a bound of the loop over K (gemv's lane loop: `<=`)
        return k in _K_BOUNDS or "taps_c" in v or v == "K - 1" or (k, v) == ("cmp", "<=")
    if reduce and any(reduction_bound(k, v) for k, v in slots.items()):
        value = next(v for k, v in slots.items() if reduction_bound(k, v))
        if value == "K - 1":                                  # the last k of the whole reduction
            return "reduction", 1.0 / reduce
        if value == "<=" and op == "gemv":                    # one lane-strided trip past K: a warp's lanes
            # read the next row's (token's) first warp x vec elements into every sum (labels j3 on an H100:
            # warp_per_row's in-bounds rel_l2 0.0997 at K 4096, sqrt(32 / 4096) = 0.088)
            return "reduction", min(1.0, warp * (1 if tag == "warp_per_row" else 8) / reduce)
        if value == "<=":                                     # one term past the row, read into every sum
            return "reduction", 1.0 / reduce
        tile = next((params[n] for n in _TILE_K if isinstance(params.get(n), int)), DEFAULT_TILE_K)
        if value == "BK - 1":                                 # one k of every tile
            return "reduction", 1.0 / tile
        splits = next((params[n] for n in _SPLITS if isinstance(params.get(n), int)), 1)
        return "reduction", min(1.0, tile * splits / reduce)  # the last tile (of each split)
    block = next((params[n] for n in _TILE_N if isinstance(params.get(n), int)), DEFAULT_TILE_K)
    if any(v.endswith("- BLOCK_N") for v in slots.values()) and dims.get("S"):   # a decode's last KV block
        return "keys", min(1.0, block * params.get("num_splits", 1) / dims["S"])    # (of each split)
    if "D" in dims:                                           # an attention's key range
        if "lo" in slots and dims.get("W"):
            return "keys", 1.0 / dims["W"]
        if slots.keys() & _CAUSAL:
            return "first_rows", 1, dims.get("P", 0)
        if "diag" in slots:                                   # half a block of future keys on average
            return "first_rows", max(1, block // 2), dims.get("P", 0)
    if slots.get("cmp") == "<" and dims.get("E"):            # an expert lookup: each expert's first row
        return "rows", max(1, dims["E"] - 1)                  # computed with the previous expert's weights
    if slots.keys() & {"n", "total"} or any(re.search(r"\b[TM]\)?\s*\*.*- 1$", v) for v in slots.values()):
        return ("final",)
    if slots.keys() & {"rows", "rmask"}:
        return ("row",)
    return None


def _embedding_grad_site(slots: dict, dims: dict) -> tuple | None:
    """An embedding backward's bound one short: a sorted segment's end (k1 - 1) drops the last
    token of every segment, each distinct id's table row one grad row off (rows of all columns,
    by one grad row's size: 1 of the scale); the flat element bound (n - 1) the final grad
    element, in the last column of one token's row; the 16-byte chunk loop (chunks - 1) the last
    8 columns of every distinct id's row. T uniform ids of V make V (1 - (1 - 1/V)^T) distinct."""
    distinct = max(1, round(dims["V"] * (1 - (1 - 1 / dims["V"]) ** dims["T"])))
    if slots.get("end") == "k1 - 1":
        return "rows", distinct, 1.0
    if slots.get("last") == "n - 1":
        return "columns", 1, 1
    if slots.get("last") == "(int64_t)(T - 1) * D":      # the flat loop stops before the last token's row:
        return "lost_row", _others_of_an_id(dims)        # its id's table row misses one grad row
    if slots.get("last") == "chunks - 1":
        return "columns", distinct, 8
    return None


def _others_of_an_id(dims: dict) -> float:
    """Expected other non-padding tokens sharing one token's id (every 8th token the padding id, the rest uniform
    over V: embedding_bwd's reference)."""
    n = dims["T"] - -(-dims["T"] // 8)
    return max(0, n - 1) / dims["V"]


def _lost_row_text(shape: tuple, dtype: str, others: float, own, rng) -> str:
    """assert_close's AssertionError for a [V, D] table whose one row (the last token's id) misses one grad row g
    (randn): the row's reference is g plus the grad rows of the k other tokens of that id (k Poisson with mean
    `others`), the candidate's their sum alone. The row is drawn element by element, each rounded to the dtype, and
    compared as torch compares it: both greatest differences over the mismatched elements, in that row (the
    relative one exactly 1.0 where the id is the token's own, first reached at its first mismatch).

    >>> print(_lost_row_text((32000, 4096), "fp16", 0.0, random.Random(0), random.Random(1)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 4069 / 131072000 (0.0%)
    Greatest absolute difference: 4.19921875 at index (4403, 3315) (up to 0.01 allowed)
    Greatest relative difference: 1.0 at index (4403, 0) (up to 0.01 allowed)
    """
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    u, k, term = own.random(), 0, math.exp(-others)     # k by inversion of Poisson(others)'s CDF
    cdf = term
    while u > cdf and k < 50:
        k += 1
        term *= others / k
        cdf += term
    row = rng.randrange(1, shape[0])                    # any id but the padding id 0
    bad, top, rel_top = 0, (0.0, 0), (0.0, 0)
    for j in range(shape[-1]):
        rest = sum(own.gauss(0, 1) for _ in range(k))
        ref, got = in_dtype(own.gauss(0, 1) + rest, dtype), in_dtype(rest, dtype)
        diff = in_dtype(abs(got - ref), dtype)
        if diff <= atol + rtol * abs(ref):
            continue
        bad += 1
        rel = in_dtype(diff / abs(ref), dtype) if ref else math.inf
        top, rel_top = max(top, (diff, -j)), max(rel_top, (rel, -j))
    numel = math.prod(shape)
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {top[0]} at index ({row}, {-top[1]}) (up to {atol} allowed)\n"
            f"Greatest relative difference: {rel_top[0]} at index ({row}, {-rel_top[1]}) (up to {rtol} allowed)")


def _out_of_tolerance(sigma: float, scale: float, atol: float, rtol: float) -> float:
    """The share of elements whose error, N(0, sigma), exceeds atol + rtol * |reference| with the
    reference N(0, scale): the expectation over the reference (midpoint rule on +-8 sigma)."""
    if sigma <= 0:
        return 0.0
    n, total = 400, 0.0
    for i in range(n):
        z = -8 + 16 * (i + 0.5) / n
        allowed = atol + rtol * abs(z) * scale
        total += math.exp(-z * z / 2) * math.erfc(allowed / (sigma * math.sqrt(2)))
    return total * (16 / n) / math.sqrt(2 * math.pi)


def _position(shape: tuple, where: str, tail: int, rng) -> tuple:
    """An index among the spoiled elements: the last column of a row (an off-by-one loop bound),
    one of a row's last `tail` columns (a tile past the end), the flat output's last element, an
    element of the last row, or anywhere."""
    rows = tuple(rng.randrange(d) for d in shape[:-1])
    last = shape[-1]
    if where == "final":
        return tuple(d - 1 for d in shape)
    if where == "row" and len(shape) > 1:
        return rows[:-1] + (shape[-2] - 1, rng.randrange(last))
    if where == "first_rows" and len(shape) > 1:
        return rows[:-1] + (rng.randrange(max(1, min(tail, shape[-2]))), rng.randrange(last))
    if where == "last_rows" and len(shape) > 1:
        return rows[:-1] + (shape[-2] - 1 - rng.randrange(max(1, min(tail, shape[-2]))), rng.randrange(last))
    if where == "last":
        return rows + (last - 1,)
    if where == "head" and len(shape) > 1:     # the first `tail` columns of a row after the first
        return rows[:-1] + (1 + rng.randrange(max(1, shape[-2] - 1)), rng.randrange(max(1, min(tail, last))))
    if where == "first_cols":
        return rows + (rng.randrange(max(1, min(tail, last))),)
    if where == "tail":
        return rows + (last - 1 - rng.randrange(max(1, min(tail, last))),)
    return rows + (rng.randrange(last),)


def _columns(site: tuple, dtype: str) -> int:
    """A ("columns", rows, n) site's column count: n, or (None) one 16-byte word of `dtype`."""
    return site[2] or 16 // {"fp32": 4, "fp8": 1, "int8": 1}.get(dtype, 2)


def _largest(above, n: int) -> float:
    """The value t that one of n reference elements exceeds (above(t) = 1 / n), by bisection in
    log t: the largest reference of an output whose share above t is above(t)."""
    lo, hi = 1e-30, 1e30
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if above(mid) * n > 1 else (lo, mid)
    return math.sqrt(lo * hi)


def own_uniform(rng, lo: float, hi: float) -> float:
    """A draw in [lo, hi]; lo itself where the range is one value (no draw, so a fixed site's texts keep their
    stream)."""
    return lo if lo == hi else rng.uniform(lo, hi)


def _site_spoiled(site: tuple, shape: tuple, dtype: str, scale: float, rng,
                  above=None) -> tuple[float, float, bool, str]:
    """_spoiled's answer for an off-by-one whose site (off_by_one_site) is known: a dropped share f
    of a reduction leaves every element an error of sqrt(f) of the output's scale (the dropped
    terms' sum), out of tolerance where it exceeds atol + rtol * |reference|; the flat output's
    last element; the last row whole."""
    if site[0] == "reduction":
        atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        rel = math.sqrt(site[1])
        frac = 1.0 if dtype in INTEGER else _out_of_tolerance(rel * scale, scale, atol, rtol)
        return frac * rng.uniform(0.97, 1.03), rel, False, "scattered"
    if site[0] == "unscaled":  # an error of its own, N(0, rel x the scale), whatever the reference's value
        atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        return _out_of_tolerance(site[1] * scale, scale, atol, rtol), site[1], False, "scattered"
    if site[0] == "keys":      # each output moves by ~f of a value: f of the output's scale
        atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        frac = 1.0 if dtype in INTEGER else _out_of_tolerance(site[1] * scale, scale, atol, rtol)
        return frac * rng.uniform(0.97, 1.03), site[1], False, "scattered"
    if site[0] == "first_rows" and len(shape) > 1:
        # row i sees P + i + 1 keys and `extra` more (or fewer): its output moves by ~extra/(keys):
        # out of tolerance while that exceeds atol (the rows near the start of each head's queries)
        extra, prefix = site[1], site[2]
        atol, _ = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        rows = shape[-2] if not atol else min(shape[-2], max(1, round(extra / atol - extra - prefix)))
        return rows / shape[-2], extra / (prefix + 1 + extra) * rng.uniform(0.5, 1.0), False, "first_rows"
    if site[0] == "scale":       # every element times (1 + rel): out where rel |ref| > atol + rtol |ref|
        atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        over = site[1] - rtol
        frac = 0.0 if over <= 0 else math.erfc(atol / (over * scale * math.sqrt(2))) if above is None \
            else above(atol / over)
        return frac, site[1] * rng.uniform(0.97, 1.03), True, "scattered"
    if site[0] == "rescaled":    # every element times one factor off by rel, drawn in [lo, hi] (ops/over_read)
        return _site_spoiled(("scale", own_uniform(rng, site[1], site[2])), shape, dtype, scale, rng, above)
    if site[0] == "head" and len(shape) > 1:
        # ("head", rows, cols, landed lo, hi, rel, nonfinite): values of their own (rel of the scale, or
        # non-finite) written over the first `cols` columns of `rows` rows, a share in [lo, hi] of them last
        atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
        failing = 1.0 if site[6] else _out_of_tolerance(site[5] * scale, scale, atol, rtol)
        share = site[1] * min(site[2], shape[-1]) * own_uniform(rng, site[3], site[4]) * failing
        return min(1.0, share / math.prod(shape)), site[5], False, "head"
    if site[0] == "first_cols":  # ("first_cols", n, failing share, rel): the first n outputs of every row
        return min(1.0, site[1] / shape[-1]) * site[2], site[3], False, "first_cols"
    if site[0] == "last_rows" and len(shape) > 1:
        return min(1.0, site[1] / shape[-2]), rng.uniform(0.3, 2.0), False, "last_rows"
    if site[0] == "final":
        return 1.0 / math.prod(shape), rng.uniform(0.3, 2.0), False, "final"
    if site[0] == "rows" and len(shape) > 1:   # whole rows of another product: ~sqrt(2) of the scale
        rel = site[2] if len(site) > 2 else rng.uniform(1.0, 1.6)
        return min(1.0, site[1] / shape[-2]), rel, False, "scattered"
    if site[0] == "columns" and len(shape) > 1:   # the last site[2] columns of site[1] rows (None: all)
        cols = _columns(site, dtype)
        rows = math.prod(shape[:-1]) if site[1] is None else site[1]
        # an unwritten element fails only where its reference is past the tolerance (no output is
        # poisoned: stale or zero memory passes for a tiny value): `above(t)`, the share of the
        # reference above t, where the output's values are far from N(0, scale) (softmax)
        share = 1.0 if above is None else above(FEEDBACK.get(dtype, FEEDBACK_DEFAULT)[0])
        return min(1.0, rows * cols * share / math.prod(shape)), rng.uniform(0.3, 2.0), False, "tail"
    return 1.0 / (shape[-2] if len(shape) > 1 else shape[-1]), rng.uniform(0.3, 2.0), False, "row"


def mismatch_text(bug: str, shape: tuple, dtype: str, scale: float, rng, site: tuple | None = None,
                  above=None) -> str:
    """torch.testing.assert_close's AssertionError for an output of `shape` and `dtype` whose
    reference values have magnitude ~`scale`, spoiled by `bug` (at `site`, for an off_by_one whose
    bound off_by_one_site read): the greatest absolute and the greatest relative difference each
    at its own element (the relative one where the reference is nearest zero), values in the
    output's dtype, printed as Python prints a float. What the bug spoils is drawn from an RNG of
    its own (keyed on the bug and one draw of `rng`), so each bug's texts stay as they are when
    another bug is added."""
    numel = math.prod(shape)
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    own = random.Random(f"mismatch:{bug}:{rng.getrandbits(64)}")
    if site is not None and site[0] == "unwritten_rows" and len(shape) > 1:
        return _unwritten_rows_text(shape, dtype, site[1], site[2], scale, own, rng)
    if site is not None and site[0] == "lost_row" and len(shape) > 1:
        return _lost_row_text(shape, dtype, site[1], own, rng)
    frac, rel, proportional, where = _spoiled(bug, shape[-1], own) if site is None \
        else _site_spoiled(site, shape, dtype, scale, own, above)
    bad = max(1, min(numel, round(frac * numel)))
    if site is not None and site[0] == "head" and site[6]:
        return _nonfinite_text(shape, bad, frac * numel / max(1, site[1] * min(site[2], shape[-1])), atol, rtol, rng)
    tail = _columns(site, dtype) if site and site[0] == "columns" else \
        min(site[2], shape[-1]) if site and site[0] == "head" else site[1] if site and site[0] == "first_cols" else \
        max(1, round(frac * (shape[-2] if where in ("first_rows", "last_rows") and len(shape) > 1 else shape[-1])))
    abs_at, rel_at = _position(shape, where, tail, rng), _position(shape, where, tail, rng)
    sign = rng.choice((-1, 1))
    if dtype in INTEGER:
        # the spoiled elements' references and values: integers uniform on [0, big) (a sampled token id
        # of randn logits is any id alike). The greatest absolute difference is the largest |a - e| of
        # `bad` such pairs; the greatest relative one sits at the smallest reference (inf where it is
        # 0). torch on the CPU, 256 ids of V = 128256: 115255 and 164.59 (it was one pair's ratio, 2.04)
        big = max(2, int(scale * 2))
        diff = max(1, int(big * (1 - math.sqrt(1 - rng.random() ** (1 / bad)))))
        least = int(big * (1 - (1 - rng.random()) ** (1 / bad)))
        rel_diff = math.inf if least == 0 else \
            max(in_dtype(abs(rng.randrange(big) - least) / least, "fp32"), in_dtype(diff / big, "fp32"))
        return (f"AssertionError: Tensor-likes are not equal!\n\nMismatched elements: {bad} / {numel} "
                f"({bad / numel:.1%})\nGreatest absolute difference: {diff} at index {abs_at}\n"
                f"Greatest relative difference: {rel_diff} at index {rel_at}")
    if proportional:      # the error grows with the value: largest where the reference is largest
        top = scale * _extreme(bad, rng.random())
        if above is not None:     # a reference far from N(0, scale): its largest of numel values
            top = _largest(above, numel)
        e_abs, err_abs = top, rel * top * rng.uniform(0.8, 1.2)
        e_rel = scale * abs(rng.gauss(0, 1)) + atol
        err_rel = rel * e_rel * rng.uniform(1.0, 1.3)
    else:                 # garbage of its own size: relative error largest where the reference is ~0
        e_abs, err_abs = scale * abs(rng.gauss(0, 1)), rel * scale * _extreme(bad, rng.random())
        e_rel = scale * max(_smallest(bad, rng.random()), 1e-6)
        err_rel = max(rel * scale * abs(rng.gauss(0, 1)), atol + rtol * e_rel) * rng.uniform(1.0, 1.5)

    def diffs(expected: float, err: float) -> tuple[float, float]:
        e = in_dtype(sign * expected, dtype)
        a = in_dtype(e + sign * err, dtype)
        d = in_dtype(abs(a - e), dtype)
        return d, (in_dtype(d / abs(e), dtype) if e else math.inf)

    at_abs = diffs(e_abs, max(err_abs, atol + rtol * e_abs))
    at_rel = at_abs if bad == 1 else diffs(e_rel, err_rel)     # one spoiled element: both are its own
    if bad == 1:
        rel_at = abs_at
    if at_rel[0] > at_abs[0]:           # each greatest difference is over every element
        abs_at = rel_at
    if at_abs[1] > at_rel[1]:
        rel_at = abs_at
    abs_diff, rel_diff = max(at_abs[0], at_rel[0]), max(at_abs[1], at_rel[1])
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {abs_diff} at index {abs_at} (up to {atol} allowed)\n"
            f"Greatest relative difference: {rel_diff} at index {rel_at} (up to {rtol} allowed)")


def _nonfinite_text(shape: tuple, bad: int, landed: float, atol: float, rtol: float, rng) -> str:
    """assert_close's AssertionError where non-finite values were written over the head of the rows after the
    first (an over-read's write past its row), a share `landed` of them after the row's own: torch's max of
    |actual - expected| is nan at the first NaN in row-major order (row 1's first landed column), both greatest
    differences at that one index (torch 2.13 on the CPU prints them so).

    >>> print(_nonfinite_text((64, 4096), 8064, 0.5, 0.01, 0.01, random.Random(0)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 8064 / 262144 (3.1%)
    Greatest absolute difference: nan at index (1, 2) (up to 0.01 allowed)
    Greatest relative difference: nan at index (1, 2) (up to 0.01 allowed)
    """
    numel = math.prod(shape)
    first = 0 if landed >= 1 else int(math.log(1 - rng.random()) / math.log(1 - max(landed, 1e-9)))
    at = (0,) * (len(shape) - 2) + (1, min(first, shape[-1] - 1))
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: nan at index {at} (up to {atol} allowed)\n"
            f"Greatest relative difference: nan at index {at} (up to {rtol} allowed)")


def _unwritten_rows_text(shape: tuple, dtype: str, first: int, period: int, scale: float, own, rng) -> str:
    """assert_close's AssertionError for an output whose rows r with r % period < first were never
    written and hold their fresh allocation's zeros (a store loop started a stride late): every
    such element fails where |ref| passes atol + rtol |ref|; the greatest absolute difference is
    the largest |ref| there, the greatest relative one exactly 1.0, first reached at the first
    element (torch reports the first of the ties).

    >>> print(_unwritten_rows_text((4096, 4096), "fp16", 8, 64, 1.0, random.Random(0), random.Random(1)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 2080250 / 16777216 (12.4%)
    Greatest absolute difference: 5.3671875 at index (1089, 2089) (up to 0.01 allowed)
    Greatest relative difference: 1.0 at index (0, 0) (up to 0.01 allowed)
    """
    numel, rows, cols = math.prod(shape), shape[-2], shape[-1]
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    lead = math.prod(shape[:-2])
    unwritten = lead * sum(1 for r in range(rows) if r % period < first) * cols
    bad = max(1, round(unwritten * math.erfc(atol / (1 - rtol) / scale / math.sqrt(2))))
    top = in_dtype(scale * _extreme(unwritten, own.random()), dtype)
    row = rng.randrange(max(1, rows // period)) * period + rng.randrange(min(first, rows))
    at = tuple(rng.randrange(d) for d in shape[:-2]) + (min(row, rows - 1), rng.randrange(cols))
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {top} at index {at} (up to {atol} allowed)\n"
            f"Greatest relative difference: 1.0 at index {(0,) * len(shape)} (up to {rtol} allowed)")


# -- attention at another temperature -------------------------------------------------------------

def softmax_spread(c: float, sigma: float, keys: int) -> tuple[float, float]:
    """(RMS of the reference output, RMS of the candidate's error) of attention whose scores are
    c times the reference's, N(0, sigma) over `keys` keys, with values N(0, 1): the output is
    sum_i w_i v_i, so its RMS is sqrt(sum q_i^2) with q = softmax(z), the error's
    sqrt(sum (p_i - q_i)^2) with p = softmax(c z). The scores are the keys' normal quantiles (one
    typical row, its top keys where a row's largest scores lie), not a draw.

    >>> [round(x, 4) for x in softmax_spread(128 ** 0.5, 1.0, 4096)]       # D = 128: scale dropped
    [0.0255, 0.948]
    >>> [round(x, 4) for x in softmax_spread(math.log(2), 1.0, 4096)]      # exp2 without log2 e
    [0.0255, 0.0087]
    """
    dist = NormalDist(0, sigma)
    z = [dist.inv_cdf((i + 0.5) / keys) for i in range(keys)]
    top = z[-1]
    q = [math.exp(x - top) for x in z]
    p = [math.exp(c * (x - top)) for x in z]
    sq, sp = sum(q), sum(p)
    ref = math.sqrt(sum((x / sq) ** 2 for x in q))
    err = math.sqrt(sum((a / sp - b / sq) ** 2 for a, b in zip(p, q)))
    return ref, err


def unweighted_spread(topk: int) -> tuple[float, float]:
    """(RMS of the reference, RMS of the error) of an MoE combine that adds its `topk` expert rows
    x_j ~ N(0, 1) without their router weights w = softmax(randn(topk)) (the reference's inputs):
    the reference sum w_j x_j has mean square E sum w_j^2, the error sum (1 - w_j) x_j
    E sum (1 - w_j)^2. The expectations over the weights: 4096 rows of an RNG of its own (fixed).

    >>> [round(x, 3) for x in unweighted_spread(2)]
    [0.799, 0.799]
    """
    rng, ref, err, n = random.Random("unweighted_spread"), 0.0, 0.0, 4096
    for _ in range(n):
        e = [math.exp(rng.gauss(0, 1)) for _ in range(topk)]
        total = sum(e)
        ref += sum((x / total) ** 2 for x in e)
        err += sum((1 - x / total) ** 2 for x in e)
    return math.sqrt(ref / n), math.sqrt(err / n)


# -- a norm's weight left out --------------------------------------------------------------------

def weight_mismatch_text(shape: tuple, dtype: str, spread: float, rng, bias: float = 0.0) -> str:
    """assert_close's AssertionError for a norm that leaves out its weight (missing_scale): the
    reference is n * w with n ~ N(0, 1) the normalized value and w = 1 + spread * z one weight a
    column (the harness's nn.Parameter(1 + 0.1 * torch.randn(D))), the candidate n alone. Column j
    is off by |n| |w_j - 1|: out of tolerance where that exceeds atol + rtol |n w_j|, its relative
    difference |w_j - 1| / |w_j| on every row. The D weights are drawn (an RNG of the bug's own,
    as mismatch_text's), and each column's largest |n| over its rows is the order statistic of
    that many normals, so the greatest differences are those of one such draw, not a guess.
    With a bias (layernorm: b = `bias` * z a column) the reference n w + b crosses zero at
    n = -b / w: the row nearest it (a gap drawn as the nearest of that many normals) has the
    column's greatest relative difference, and the share out of tolerance is integrated over n.

    >>> print(weight_mismatch_text((2048, 4096), "fp16", 0.1, random.Random(1)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 5936403 / 8388608 (70.8%)
    Greatest absolute difference: 1.298828125 at index (258, 2896) (up to 0.01 allowed)
    Greatest relative difference: 0.45556640625 at index (1044, 2626) (up to 0.01 allowed)
    """
    rows, cols = math.prod(shape[:-1]), shape[-1]
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    own = random.Random(f"mismatch:missing_scale:weight:{rng.getrandbits(64)}")
    bad, top, worst = 0.0, (0.0, 0), (0.0, 0)
    gauss, uniform = own.gauss, own.random      # (the loop runs once a column: thousands of times a call)
    for j in range(cols):
        w = in_dtype(1 + spread * gauss(0, 1), dtype)
        if bias:
            b = in_dtype(bias * gauss(0, 1), dtype)
            bad += rows * _biased_share(abs(w - 1), w, b, atol, rtol)
            worst = max(worst, (_nearest_zero_rel(abs(w - 1), w, b, rows, uniform(), dtype), j))
        else:
            over = abs(w - 1) - rtol * abs(w)            # |n| times this must pass atol to fail
            if over > 0:
                bad += rows * math.erfc(atol / (over * math.sqrt(2)))
        n = in_dtype(_extreme(rows, uniform()), dtype)
        top = max(top, (in_dtype(abs(n - in_dtype(n * w, dtype)), dtype), j))
        if not bias:
            worst = max(worst, (in_dtype(abs(w - 1) / abs(w), dtype), j))
    numel = rows * cols
    bad = max(1, min(numel, round(bad)))
    lead = shape[:-1]

    def at(col: int) -> tuple:                         # a row of that column, anywhere in the leading dims
        flat = rng.randrange(rows)
        idx = []
        for d in reversed(lead):
            flat, r = divmod(flat, d)
            idx.append(r)
        return tuple(reversed(idx)) + (col,)
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {top[0]} at index {at(top[1])} (up to {atol} allowed)\n"
            f"Greatest relative difference: {worst[0]} at index {at(worst[1])} (up to {rtol} allowed)")


_GRID = [-6 + 12 * (i + 0.5) / 64 for i in range(64)]         # midpoints over +-6 sigma
_WEIGHTS = [math.exp(-z * z / 2) * 12 / 64 / math.sqrt(2 * math.pi) for z in _GRID]
_HALF = list(zip(_GRID[32:], _WEIGHTS[32:]))     # the grid's positive half; -z and its weight mirror each (exactly)


def _biased_share(off: float, w: float, b: float, atol: float, rtol: float) -> float:
    """The share of n ~ N(0, 1) where |n| off > atol + rtol |n w + b| (midpoint rule; the same weights
    summed in the same order whatever the loop's form: the same float). Asked once a column (thousands a
    text), a point and its mirror at a time: (-z) w is -(z w) and |-(z w) + b| is |z w - b| exactly (IEEE
    rounding is symmetric in sign), so each point's test is the plain one's, z w and |z| off found once."""
    neg, pos = [], []
    for z, q in _HALF:
        zw, lhs = z * w, z * off
        if lhs > atol + rtol * abs(zw - b):
            neg.append(q)
        if lhs > atol + rtol * abs(zw + b):
            pos.append(q)
    neg.reverse()                      # the negative half in the grid's order (most negative first)
    return sum(neg + pos)


def _nearest_zero_rel(off: float, w: float, b: float, rows: int, u: float, dtype: str) -> float:
    """|n| off / |n w + b| at the row whose n lies nearest -b / w, the reference's zero: of `rows`
    normals the nearest is an exponential gap away, its rate 2 rows phi(-b / w)."""
    star = -b / w
    gap = -math.log(1 - u) / (2 * rows * math.exp(-star * star / 2) / math.sqrt(2 * math.pi))
    ref = in_dtype(abs(w) * gap, dtype)
    return in_dtype(abs(star) * off / ref, dtype) if ref else math.inf


# -- partial sums started at one ----------------------------------------------------------------

def offset_mismatch_text(shape: tuple, dtype: str, offset: int, scale: float, rng) -> str:
    """assert_close's AssertionError for an output whose every element is `offset` too large: a
    sum whose `offset` partial sums (one a thread) each started at 1 instead of 0 (reduction_cuda's
    wrong_init: grid x THREADS of them, all added into the one result). The reference elements are
    N(0, scale); the candidate's is the reference plus the offset, rounded to the output's dtype.

    >>> print(offset_mismatch_text((1,), "fp32", 4194304, 4096.0, random.Random(2)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 1 (100.0%)
    Greatest absolute difference: 4194304.0 at index (0,) (up to 0.0001 allowed)
    Greatest relative difference: 1880.9024658203125 at index (0,) (up to 0.0001 allowed)
    """
    numel = math.prod(shape)
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    own = random.Random(f"mismatch:wrong_init:offset:{rng.getrandbits(64)}")
    big = in_dtype(scale * _extreme(numel, own.random()), dtype)             # where |ref| is largest
    small = in_dtype(scale * max(_smallest(numel, own.random()), 1e-6), dtype) if numel > 1 \
        else big                                                              # ... and nearest zero
    sign = own.choice((-1, 1))

    def diff(ref: float) -> float:
        return in_dtype(abs(in_dtype(ref + offset, dtype) - ref), dtype)

    def rounded_diff(value: float) -> float:    # the kernel rounds its fp32 sum plus the offset once
        return in_dtype(abs(in_dtype(value + offset, dtype) - in_dtype(value, dtype)), dtype)
    # the offset plus the output dtype's rounding, at its worst over the elements (64 drawn stand for them)
    abs_diff = max([diff(sign * big), diff(sign * small)]
                   + [rounded_diff(scale * own.gauss(0, 1)) for _ in range(64 if numel > 1 else 0)])
    rel_diff = in_dtype(diff(sign * small) / small, dtype)
    bad = numel if offset > atol + rtol * big else max(1, round(numel * math.erf(
        (offset - atol) / rtol / scale / math.sqrt(2))))
    abs_at = _position(shape, "scattered", 1, rng)
    rel_at = abs_at if numel == 1 else _position(shape, "scattered", 1, rng)
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {abs_diff} at index {abs_at} (up to {atol} allowed)\n"
            f"Greatest relative difference: {rel_diff} at index {rel_at} (up to {rtol} allowed)")


# -- a statistic off by a constant: every element its reference times a factor --------------------

def scaled_mismatch_text(shape: tuple, dtype: str, typical: float, smallest: float, spread: float, rng) -> str:
    """assert_close's AssertionError for a norm's output whose every element is its reference times
    a factor of its row, `typical` on most rows and `smallest` on the row where it is least
    (rmsnorm's wrong_init: each of a row's partial sums of squares starts at D, so the row's mean
    square m reads m + THREADS and its output shrinks by sqrt(m / (m + THREADS))). The reference
    is n w, n ~ N(0, 1) the normalized value and w = 1 + spread z a column's weight (drawn, as
    weight_mismatch_text draws them); an element fails where |ref| |1 - factor| passes
    atol + rtol |ref|. The greatest absolute difference is at the largest |n w|; the relative one
    is 1 - factor with the output dtype's rounding, whose greatest value many elements share, so
    torch reports the first of them: on the first row, among its first columns.

    >>> print(scaled_mismatch_text((8192, 5120), "bf16", 0.0312, 0.0300, 0.1, random.Random(3)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 41237660 / 41943040 (98.3%)
    Greatest absolute difference: 6.3125 at index (2136, 4020) (up to 0.02 allowed)
    Greatest relative difference: 0.97265625 at index (0, 1) (up to 0.02 allowed)
    """
    rows, cols = math.prod(shape[:-1]), shape[-1]
    numel = rows * cols
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    own = random.Random(f"mismatch:scaled:{rng.getrandbits(64)}")
    over = abs(1 - typical) - rtol                   # |ref| times this must pass atol to fail
    bad = 0 if over <= 0 else max(1, min(numel, round(numel * math.erfc(atol / (over * math.sqrt(2))))))
    top = (0.0, 0)
    for j in range(cols):                            # the largest |n w|: each column's largest |n| times its w
        w = in_dtype(1 + spread * own.gauss(0, 1), dtype)
        top = max(top, (in_dtype(_extreme(rows, own.random()) * abs(w), dtype), j))
    abs_diff = in_dtype(abs(in_dtype(top[0] * typical, dtype) - top[0]), dtype)
    refs = [in_dtype(max(abs(own.gauss(0, 1)), 0.05), dtype) for _ in range(64)]
    rel_diff = max(in_dtype(in_dtype(abs(in_dtype(r * smallest, dtype) - r), dtype) / r, dtype) for r in refs)
    lead = tuple(rng.randrange(d) for d in shape[:-1])
    first = min(cols - 1, int(-math.log(1 - rng.random()) * 3))    # the first element at the tie
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {abs_diff} at index {lead + (top[1],)} (up to {atol} allowed)\n"
            f"Greatest relative difference: {rel_diff} at index {(0,) * len(lead) + (first,)} (up to {rtol} allowed)")


# -- every element times a power of two -----------------------------------------------------------

def unrescaled_factor(parts: int, per: int, spread: float) -> float:
    """The factor every output of a softmax row is off by when its `parts` partial sums, each over
    `per` values of spread * randn and kept relative to its own max m_k, are added without
    e^(m_k - m) (m the row's max): the sum is too large by sum d_k / sum d_k e^(m_k - m), so each
    output is times sum d_k e^(m_k - m) / sum d_k, the mean of e^(m_k - m) where the d_k agree (a
    part's sum relative to its own max depends on its values below that max alike). The m_k: the
    maxima of `per` normals at the parts' quantiles, (k + 1/2) / parts of Phi(x)^per.

    >>> round(unrescaled_factor(8, 4000, 4.0), 3), round(unrescaled_factor(2048, 16, 4.0), 4)
    (0.23, 0.0018)
    """
    tops = [spread * NormalDist().inv_cdf(((k + 0.5) / parts) ** (1 / per)) for k in range(parts)]
    return sum(math.exp(t - tops[-1]) for t in tops) / parts


def power_of_two_mismatch_text(shape: tuple, dtype: str, factor: float, above, top: float, rng,
                               exact: bool = True) -> str:
    """assert_close's AssertionError for an output whose every element is its reference times
    `factor`, a power of two (bias_gelu without its 0.5: twice the reference), exact in floating
    point: every nonzero element's relative difference is |factor - 1| itself, so torch reports it
    at the first element; the absolute one |factor - 1| times the largest |ref| (`top`); an
    element fails where its |ref| passes atol / (|factor - 1| - rtol): `above(t)`, the share of
    the reference's elements above t.

    >>> print(power_of_two_mismatch_text((1, 18176), "bf16", 2.0, lambda t: 0.95, 5.1, random.Random(1)))
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 17267 / 18176 (95.0%)
    Greatest absolute difference: 5.09375 at index (0, 2067) (up to 0.02 allowed)
    Greatest relative difference: 1.0 at index (0, 0) (up to 0.02 allowed)
    """
    numel = math.prod(shape)
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    off = abs(factor - 1)
    bad = max(1, round(numel * above(atol / (off - rtol)))) if off > rtol else 0
    at = tuple(rng.randrange(d) for d in shape)
    # (`exact` False: a factor the dtype's rounding spreads, whose greatest relative difference is
    # wherever the rounding was worst, not tied at the first element)
    first = (0,) * len(shape) if exact else tuple(rng.randrange(d) for d in shape)
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {in_dtype(off * in_dtype(top, dtype), dtype)} at index {at} (up to {atol} allowed)\n"
            f"Greatest relative difference: {in_dtype(off, dtype)} at index {first} (up to {rtol} allowed)")
