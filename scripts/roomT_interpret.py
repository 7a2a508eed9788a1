"""Correctness on the CPU of the Triton values roomT added (issue 26 Build 2): Triton's interpreter
(TRITON_INTERPRET=1) runs each new value at 2-3 small shapes against the module's PyTorch reference (inputs made on
the CPU), and every bug render at the same values must fail. fp16 only (the interpreter's numpy has no bfloat16).
This is the values' correctness proof until a device job runs them (roomT/j1, roomT/j4).

    TRITON_INTERPRET=1 python3 scripts/roomT_interpret.py [MODULE or RUNG ...]   # exit 1 if a value is wrong or a bug passes

2026-12-07 (a): cross_attention_triton split_kv at 32 splits: every split full (Skv 2048, 64 keys each at BLOCK_N 32),
a ragged key tail with the last ten splits empty (Skv 2050: 96-key splits), a decode step (Sq 1) and a ragged query
tile (Sq 20 at BLOCK_M 16), both BLOCK_N, D 64 and 128.
2026-12-07 (b), the short-horizon families: rope_triton's head tiles of 2 heads (a head count of 5 leaves a ragged
last tile; one token, several, and a tile of 2 tokens) and 16 warps on the four head-tiled rungs (on the menus);
paged_kv_copy_triton persistent on 2 warps (the grid on SMS "SMs", so each program walks several (pair, tile) items),
softmax_triton's chunked rungs on 2 warps (rows of 1,000 and 5,000 columns: ragged last chunks; 1-3 rows; on the
menus since the H100 ran them ahead of 4, roomT/j4) and fp8_quant_triton persistent_rows at 16 programs an SM
(correct; off the menus: its modelled gain is a fitted exponent past its range, and the H100 ran it level with 8). Output buffers are poisoned (NaN) as
the device check's are, so a bug that leaves elements unwritten cannot pass on a reused allocation.
The number of warps does not change what the interpreter computes (it runs a program as whole-tile numpy), so a warp
value's cases check that its candidate renders and runs with its bugs caught; its build for each target is
scripts/room_compile_triton.py's.
fp8_quant_triton persistent_rows at 16 programs an SM: the interpreter's fp8 cast rounds otherwise than a GPU's (every
value of the rung, and fp8_native_cast, land at rel_l2 5.5e-2 of the reference), so 16's outputs must equal those of
8 exactly (8 ran correct on the H100 with its bugs failing: h100_roomS_order.json, roomT/j3), with 300 rows on SMS x
16 = 32 programs (several row tiles each).
2026-12-07 (c, tenth session): gemm_fp4_triton split_k_dot_scaled (new rung): full, short and empty splits, masked rows
and a ragged row tile, and the probes past its lists' ends (BLOCK_N 256, BLOCK_M 128, 2 warps); its bugs fail
(bad_combine_index only where the last split has K tiles). The H100 ran it correct with its bugs failing (roomT/j1-j2).
2026-12-07 (d, eleventh session): selective_scan_triton split_l_state_outer (new rung): 6 shapes (spans full, short,
empty; a ragged channel block; one chunk only), 0 problems with its four bugs failing where offered (the end state read
early passed at L 256 in a 512-step chunk, rel_l2 7.9e-7: bad_combine_index is now offered only where a next chunk reads
it, _scan_triton.chunks_chained, and for state_outer_scan too). The H100 ran it correct with its bugs failing (roomT/j1).
The rung is not in the registry's menus without its device check's environment until then: run with
KERNELSTRAIN_DEVICE_UNCHECKED=1 on a tree before roomT's j2 commit.
Not here: rmsnorm_triton persistent's 16 programs an SM cannot run under Triton
3.9's interpreter at any value of the rung (its `mask & (pid < T)` is typed int32 and refused by the numpy load; its
`range(pid, T, step)` row is a Python int without .to); the H100 ran it correct (roomT/j3).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TRITON_INTERPRET", "1")      # before triton is imported

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelstrain.gpucheck.adapters import entry_triton_adapter  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402
from roomA_interpret_room import SM_COUNT, SMS, flat  # noqa: E402  (a persistent grid on SMS "SMs")
from roomK_interpret import on_cpu  # noqa: E402

CROSS = [{"B": 1, "H": 2, "Sq": 1, "Skv": 2048, "D": 64}, {"B": 2, "H": 1, "Sq": 20, "Skv": 2050, "D": 64},
         {"B": 1, "H": 1, "Sq": 1, "Skv": 2050, "D": 128}]
ROPE = [{"T": 1, "H": 5, "D": 64}, {"T": 3, "H": 4, "D": 128}, {"T": 5, "H": 3, "D": 32}]
ROPE_TILED = ("token_program", "token_head_grid", "multi_token_tile", "persistent")
PAGED = [{"NB": 16, "M": 5, "P": 4, "H": 2, "D": 32}, {"NB": 32, "M": 9, "P": 8, "H": 2, "D": 64}]
FP8 = [{"T": 70, "D": 256}, {"T": 300, "D": 200}]
SOFTMAX = [{"R": 3, "C": 1000}, {"R": 1, "C": 5000}, {"R": 2, "C": 4096}]
# gemm_fp4_triton split_k_dot_scaled: every split full (K 512 at BLOCK_K 64: 8 tiles, 2 a split), a short last split
# (K 384 at 128: 3 tiles over 2 splits), empty splits (16 splits of 8 tiles; 4 of 3), rows masked (M 5) and a
# ragged second row tile (M 40 at BLOCK_M 32)
FP4_SPLIT = [({"M": 16, "N": 128, "K": 512, "G": 32}, {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 4}),
             ({"M": 5, "N": 256, "K": 384, "G": 32}, {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 2}),
             ({"M": 5, "N": 256, "K": 384, "G": 32}, {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "SPLIT_K": 4}),
             ({"M": 40, "N": 128, "K": 512, "G": 32}, {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 16}),
             ({"M": 40, "N": 128, "K": 512, "G": 32}, {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 8,
                                                       "num_warps": 4})]
# roomT/j2's probes past the lists' ends (BLOCK_N 256, BLOCK_M 128, 2 warps): a ragged row tile, two N tiles
FP4_SPLIT_PROBES = [({"M": 130, "N": 512, "K": 512, "G": 32}, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "SPLIT_K": 2,
                                                             "num_warps": 2}),
                    ({"M": 16, "N": 512, "K": 512, "G": 32}, {"BLOCK_M": 16, "BLOCK_N": 256, "BLOCK_K": 64, "SPLIT_K": 4,
                                                            "num_warps": 4})]
# selective_scan_triton split_l_state_outer (eleventh session): 4 spans, the last short (L 200 in 64-step spans); 4 full spans and a ragged channel block (D 6 at
# BLOCK_D 4); a ragged last span with 3 of 8 spans empty (L 300 in 64-step spans); 8 of 16 spans empty with a ragged
# last chunk (L 1000); one span only (L 256 in a 512-step chunk: the fold bug not offered there); 2 spans, the second short
SCAN_SPLIT = [({"B": 1, "L": 200, "D": 3, "N": 16}, {"BLOCK_D": 2, "CHUNK": 64, "SPLITS": 4, "num_warps": 1}),
              ({"B": 1, "L": 512, "D": 6, "N": 16}, {"BLOCK_D": 4, "CHUNK": 64, "SPLITS": 4, "num_warps": 2}),
              ({"B": 2, "L": 300, "D": 5, "N": 16}, {"BLOCK_D": 2, "CHUNK": 64, "SPLITS": 8, "num_warps": 1}),
              ({"B": 1, "L": 1000, "D": 3, "N": 16}, {"BLOCK_D": 1, "CHUNK": 128, "SPLITS": 16, "num_warps": 4}),
              ({"B": 1, "L": 256, "D": 4, "N": 16}, {"BLOCK_D": 2, "CHUNK": 512, "SPLITS": 2, "num_warps": 8}),
              ({"B": 2, "L": 600, "D": 16, "N": 16}, {"BLOCK_D": 16, "CHUNK": 256, "SPLITS": 2, "num_warps": 4})]
# mla_decode_triton latent_halves (twelfth session): a ragged last key tile (S 100 at BLOCK_N 32), a ragged head block
# (H 20 at BLOCK_H 16) over 64-key tiles, one whole tile and a ragged tail (S 50) unpipelined, and a 32-head
# block at 3 stages on 8 warps
MLA_HALVES = [({"B": 1, "H": 16, "S": 100}, {"BLOCK_H": 16, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}),
              ({"B": 2, "H": 20, "S": 300}, {"BLOCK_H": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}),
              ({"B": 1, "H": 8, "S": 50}, {"BLOCK_H": 16, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}),
              ({"B": 2, "H": 32, "S": 300}, {"BLOCK_H": 32, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3})]
# grouped_gemm_triton persistent_tma's 256-wide N tiles (twelfth session): two N blocks with K ragged (192 at 128-wide
# K: one whole tile, one half), three N blocks on 8 warps with 64-row tiles, and 16-row-ish experts (T 40 top-2 over 4
# experts) so several programs loop over several tiles on the SMS-program grid
GROUPED_N256 = [({"T": 40, "E": 4, "K": 192, "N": 512, "topk": 2}, {"BLOCK_M": 32, "BLOCK_N": 256, "BLOCK_K": 128}),
                ({"T": 96, "E": 4, "K": 320, "N": 768, "topk": 2}, {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64,
                                                                     "num_warps": 8}),
                ({"T": 24, "E": 8, "K": 256, "N": 256, "topk": 2}, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                                                                     "num_warps": 8, "num_stages": 2})]
# gemm_fp4_triton copies_persistent_tma (thirteenth session): a ragged row tile and A's rows padded to 16 (M 40 at
# BLOCK_M 64), a ragged 256-wide N tile (N 384) over 3 K tiles, 128-row tiles at 5 stages with more tiles than the
# SMS-program grid (each program loops over several), and 128-wide K tiles
FP4_COPIES_TMA = [({"M": 40, "N": 384, "K": 384, "G": 32}, {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 128}),
                  ({"M": 256, "N": 256, "K": 256, "G": 32}, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64,
                                                           "num_stages": 5, "num_warps": 8}),
                  ({"M": 130, "N": 512, "K": 512, "G": 32}, {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128,
                                                           "num_stages": 2})]
CASES = (
    [("cross_attention_triton", "split_kv", {"num_splits": 32, "BLOCK_M": 16, "BLOCK_N": bn, "num_stages": 2}, s,
      "fp16") for s in CROSS for bn in (32, 64)]
    + [("rope_triton", tag, {"BLOCK_H": 2}, s, "fp16") for tag in ROPE_TILED for s in ROPE]
    + [("rope_triton", tag, {"num_warps": 16}, ROPE[0], "fp16") for tag in ROPE_TILED]
    + [("rope_triton", tag, {"BLOCK_H": 2, "BLOCK_T": 2}, ROPE[2], "fp16") for tag in ("multi_token_tile", "persistent")]
    + [("paged_kv_copy_triton", "persistent", {"num_warps": 2, "BLOCK": b}, s, "fp16") for s in PAGED for b in (512, 1024)]
    + [("softmax_triton", tag, {"num_warps": 2, "BLOCK": 512}, s, "fp16")
       for tag in ("chunked_three_pass", "online_softmax", "split_row_online") for s in SOFTMAX]
    # the interpreter's tl.float8e4nv cast rounds otherwise than the GPU's cvt (rel_l2 5.5e-2 at every value of
    # the rung and on fp8_native_cast alike), so 16 programs an SM must give 8's outputs (the H100 ran 8 correct)
    + [("fp8_quant_triton", "persistent_rows", {"programs_per_sm": 16, "ROWS": r}, s, "fp16", {"programs_per_sm": 8})
       for s in FP8 for r in (1, 2)]
    + [("gemm_fp4_triton", "split_k_dot_scaled", over, s, "fp16") for s, over in FP4_SPLIT + FP4_SPLIT_PROBES]
    + [("selective_scan_triton", "split_l_state_outer", over, s, "fp16") for s, over in SCAN_SPLIT]
    + [("mla_decode_triton", "latent_halves", over, s, "fp16") for s, over in MLA_HALVES]
    + [("grouped_gemm_triton", "persistent_tma", over, s, "fp16") for s, over in GROUPED_N256]
    + [("gemm_fp4_triton", "copies_persistent_tma", over, s, "fp16") for s, over in FP4_COPIES_TMA]
)



def adapter(module):
    """The gpu check's own argument mapping: the module's check_adapter, else its entry's (a Model's buffer,
    rope's cos/sin cache, passed as the wrapper's argument)."""
    return getattr(module, "check_adapter", None) or entry_triton_adapter(module)


def poisoned(make):
    """torch.empty / empty_like whose memory is poisoned, as the device check's output buffers are: an element a
    bug leaves unwritten must not pass on what a freed buffer of the run before held (CPU allocations are reused)."""
    def empty(*args, **kwargs):
        t = make(*args, **kwargs)
        return t.fill_(float("nan") if t.is_floating_point() else 123)
    return empty


def outputs(module, variant, params, task, bug, model, inputs):
    """The candidate's outputs (its in-place results where the entry has them) as one fp32 vector."""
    ns = {}
    src = SM_COUNT.sub(str(SMS), on_cpu(module.render(variant, params, task, bug)))
    exec(compile(src, f"<{module.name}>", "exec"), ns)
    args, outs_of = adapter(module)(dict(task.shape), model, [x.clone() for x in inputs])
    empty, empty_like = torch.empty, torch.empty_like
    torch.empty, torch.empty_like = poisoned(empty), poisoned(empty_like)
    try:
        ret = ns[module.entry.py_name or module.entry.name](*args)
    finally:
        torch.empty, torch.empty_like = empty, empty_like
    return flat([o[1] for o in outs_of(ret, ret)])


def check(name, tag, over, shape, dtype, twin=None) -> int:
    """Problems of one case: the value wrong, or one of its bugs passing. With `twin` (parameters a device ran
    correct), the value must give the twin's outputs here exactly (and its bugs must not): for code whose reference
    comparison the interpreter itself cannot pass (fp8 casts)."""
    m = REGISTRY[name]
    v = m.variant(tag)
    params = {**v.defaults(), **over}
    task = make_task(m, "H100", dtype, shape)
    ref_ns = {}
    exec(compile(on_cpu(m.reference(task)), "<reference>", "exec"), ref_ns)
    torch.manual_seed(0)
    inputs = ref_ns["get_inputs"]()
    prepare = getattr(m, "check_prepare", None)
    if prepare is not None:
        prepare(dict(task.shape), inputs)
    model = ref_ns["Model"](*ref_ns["get_init_inputs"]())
    ref = model(*[x.clone() for x in inputs])
    ref = flat(ref)
    if twin is not None:
        ref = outputs(m, v, {**params, **twin}, task, None, model, inputs)
    problems = 0
    for bug in [None] + [b for b in v.bugs_for(dtype, params) if v.breaks_at(b, task, params)]:
        out = outputs(m, v, params, task, bug, model, inputs)
        err = ((out - ref).norm() / ref.norm()).item()
        ok = (err == 0 if twin is not None else err < 1e-2) and bool(torch.isfinite(out).all())
        err = err if torch.isfinite(out).all() else float("nan")
        bad = ok != (bug is None)
        problems += bad
        print(f"{'PROBLEM ' if bad else ''}{name} {tag} {over} {shape} {dtype} bug={bug}: rel_l2 {err:.2e}", flush=True)
    return problems


if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    found = sum(check(*c) for c in CASES if not wanted or c[0] in wanted or c[1] in wanted)   # modules or rungs
    print(f"{found} problems")
    sys.exit(1 if found else 0)
