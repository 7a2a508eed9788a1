"""simS's device plan (issue 30, the short memory-bound modules): scripts/room_device_check.py's harness (every case
built, checked against the PyTorch reference and timed beside the simulator) over the sweeps below, then each group's
values ranked by the device and by the simulator (room_device_check_triton.ranking, per rung and across rungs).

    python3 scripts/simS_device.py                      # on a CUDA machine; writes $OUT/summary.txt, knob_device.json, ranking.txt
    SIMS_PLAN=s2 python3 scripts/simS_device.py          # another plan of PLANS (default: s1; s2: the follow-up;
                                                         # s3: the norms' re-read against L1; s4: its follow-up)
    KNOBA_REHEARSE=3 python3 scripts/simS_device.py      # no GPU: the first 3 cases through every path but the GPU's

s1: the cases the launch-model fixes rest on (cross_entropy_bwd_triton's registers a thread: BLOCK 8192 on 4 warps
beside 2048 and the other rungs) and parameter sweeps at the fresh seeds' held-out shapes where the model orders the
device's rows wrongly (kv_append_cuda's words.VEC, the thread counts of fp8_quant_cuda / rmsnorm_cuda /
add_rmsnorm_cuda, swiglu_fwd_triton's flat BLOCK, fp8_quant_triton's ROWS x num_warps, the norms' whole-row warps).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_device_check  # noqa: E402
import room_device_check_triton  # noqa: E402

CE = [{"T": 16384, "V": 32000}, {"T": 2048, "V": 128256}]
KV = [{"T": 4096, "H": 16, "D": 256, "P": 32}, {"T": 4096, "H": 8, "D": 128, "P": 16}]
FP8 = [{"T": 4096, "D": 4096}, {"T": 512, "D": 5120}]
NORM = [{"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}]
SWIGLU = [{"T": 512, "I": 13824}, {"T": 4096, "I": 11008}]
# (module, rung, parameter, shapes, base, values[, dtype]): as room_device_check's entries
S1 = [
    ("cross_entropy_bwd_triton", "persistent_evict_first", "BLOCK", CE, {"num_warps": 4, "programs_per_sm": 4, "num_stages": 2},
     (2048, 4096, 8192)),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_warps", CE[:1], {"BLOCK": 8192, "programs_per_sm": 4, "num_stages": 2},
     (8, 16)),
    ("cross_entropy_bwd_triton", "row_tiled_2d", "BLOCK", CE[:1], {"num_warps": 4}, (1024, 2048, 4096, 8192)),
    ("cross_entropy_bwd_triton", "fused_flat", "BLOCK", CE[:1], {"num_warps": 4}, (1024, 2048, 4096)),
    ("kv_append_cuda", "block_per_token", "vec", KV, {"threads": 256}, (1, 2, 4), "fp16"),
    ("kv_append_cuda", "block_per_token", "vec", KV[:1], {"threads": 128}, (1, 2, 4), "fp16"),
    ("fp8_quant_cuda", "register_cached", "threads", FP8[:1], {"rows_per_block": 1}, (128, 256, 512, 1024), "fp16"),
    ("fp8_quant_cuda", "ptx_cvt_e4m3x2", "threads", FP8[:1], {"rows_per_block": 1}, (128, 256, 512, 1024), "fp16"),
    ("rmsnorm_cuda", "register_cached", "threads", NORM[:1], {"rows_per_block": 1}, (64, 256, 512)),
    ("rmsnorm_cuda", "vectorized_uint4", "threads", NORM[:1], {}, (128, 256)),
    ("rmsnorm_cuda", "warp_shuffle", "vec", NORM[:1], {"threads": 256}, (1, 2, 4)),
    ("add_rmsnorm_cuda", "register_cached", "threads", NORM[1:], {"rows_per_block": 1}, (256, 512, 1024), "fp16"),
    ("add_rmsnorm_cuda", "register_cached", "min_blocks", NORM[1:], {"rows_per_block": 1, "threads": 1024}, (2, 3), "fp16"),
    ("add_rmsnorm_cuda", "vectorized_uint4", "threads", NORM[1:], {}, (256, 512, 1024), "fp16"),
    ("swiglu_fwd_triton", "flat_index", "BLOCK", SWIGLU, {"num_warps": 4}, (64, 128, 256), "fp16"),
    ("swiglu_fwd_triton", "row_program", "BLOCK", SWIGLU[:1], {"num_warps": 4, "num_stages": 1}, (1024, 2048, 4096), "fp16"),
    ("fp8_quant_triton", "fp8_native_cast", "ROWS", FP8, {"num_warps": 4}, (1, 2, 4)),
    ("fp8_quant_triton", "fp8_native_cast", "num_warps", FP8[:1], {"ROWS": 1}, (2, 8, 16)),
    ("add_rmsnorm_triton", "whole_row_registers", "num_warps", [{"T": 4096, "D": 4096}], {}, (1, 2, 4, 8, 16)),
    ("rmsnorm_triton", "multi_row_tile", "num_warps", [{"T": 4096, "D": 4096}], {"ROWS": 2}, (2, 4, 8, 16)),
]
# s2 (follow-up): words.narrow_of beyond the rows it was fitted on (embedding_gather_cuda row_per_block, kv_append at
# other shapes and bf16, swiglu_fwd_cuda row_grid_2d, fp8_quant_cuda fused_smem_block); the two-pass norm rungs'
# re-read of the row against the register-cached rung across threads and D (how much of the row an SM's L1 keeps);
# rope_triton's 2-warp tiles at the held-out shape; the persistent cross-entropy tile's stages and programs an SM
GATHER = [{"T": 4096, "V": 128256, "D": 4096}, {"T": 8192, "V": 152064, "D": 3584}]
ROPE = [{"T": 2048, "H": 16, "D": 256}]
S2 = [
    ("embedding_gather_cuda", "row_per_block", "vec", GATHER, {"threads": 256}, (1, 2, 4), "fp16"),
    ("kv_append_cuda", "block_per_token", "vec", [{"T": 16384, "H": 8, "D": 128, "P": 16}, {"T": 256, "H": 8, "D": 128, "P": 16}],
     {"threads": 256}, (1, 2, 4)),
    ("swiglu_fwd_cuda", "row_grid_2d", "vec", [{"T": 4096, "I": 11008}], {"threads": 256}, (1, 2, 4)),
    ("fp8_quant_cuda", "fused_smem_block", "vec", FP8[:1], {"threads": 256}, (1, 2, 4), "fp16"),
    ("rmsnorm_cuda", "vectorized_uint4", "threads", [{"T": 16384, "D": 8192}, {"T": 2048, "D": 2048}], {}, (128, 256, 512, 1024)),
    ("rmsnorm_cuda", "register_cached", "threads", [{"T": 16384, "D": 8192}, {"T": 2048, "D": 2048}], {"rows_per_block": 1},
     (256, 1024)),
    ("add_rmsnorm_cuda", "warp_shuffle", "threads", NORM, {"vec": 4}, (128, 512), "fp16"),
    ("add_rmsnorm_cuda", "register_cached", "threads", NORM[:1], {"rows_per_block": 1}, (256, 512), "fp16"),
    ("add_rmsnorm_cuda", "vectorized_uint4", "threads", NORM[:1], {}, (128, 512), "fp16"),
    ("rope_triton", "token_head_grid", "num_warps", ROPE, {"BLOCK_H": 16}, (2, 4, 8)),
    ("rope_triton", "token_head_grid", "BLOCK_H", ROPE, {"num_warps": 2}, (4, 8, 32)),
    ("rope_triton", "token_program", "num_warps", ROPE, {"BLOCK_H": 16}, (2, 4, 8)),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_stages", CE[:1], {"BLOCK": 8192, "num_warps": 4, "programs_per_sm": 4},
     (1, 3)),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "programs_per_sm", CE[:1], {"BLOCK": 8192, "num_warps": 4, "num_stages": 2},
     (2, 8)),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "programs_per_sm", CE[:1], {"BLOCK": 2048, "num_warps": 4, "num_stages": 3},
     (8,)),
]
# s3 (this session): the two-pass norms' re-read against the L1 (kernelstrain/ops/row_reread.py): the threads a row
# at row sizes whose working set an SM holds (T=16384 D=2048: 132 KiB at 64 threads) and whose it does not
# (D=4096 at 64 threads: 264 KiB; D=6144 at 64: 396 KiB), each beside register_cached; add_rmsnorm_cuda's
# vectorized_uint4 (re-read of the residual it wrote) and fp8_quant_cuda's warp_shuffle_vectorized likewise; then
# bias_gelu_cuda's ROWS x threads and
# fp8_quant_cuda's threads at the kernelinfer seed's held-out shapes (rows the model orders against the device)
REREAD = [{"T": 16384, "D": 2048}, {"T": 8192, "D": 4096}, {"T": 8192, "D": 6144}]
S3 = [
    ("rmsnorm_cuda", "vectorized_uint4", "threads", REREAD, {}, (64, 128, 256, 512)),
    ("rmsnorm_cuda", "register_cached", "threads", REREAD, {"rows_per_block": 1}, (256,)),
    ("rmsnorm_cuda", "vectorized_uint4", "threads", [{"T": 8192, "D": 5120}], {}, (64,)),
    ("add_rmsnorm_cuda", "vectorized_uint4", "threads", REREAD[1:], {}, (64, 128, 256), "fp16"),
    ("add_rmsnorm_cuda", "register_cached", "threads", REREAD[1:], {"rows_per_block": 1}, (256,), "fp16"),
    ("fp8_quant_cuda", "warp_shuffle_vectorized", "threads", REREAD[2:], {}, (64, 128, 512)),
    ("bias_gelu_cuda", "bias_in_registers", "rows", [{"T": 8192, "N": 16384, "TANH": 1}], {"threads": 512}, (1, 2, 4, 8)),
    ("bias_gelu_cuda", "bias_in_registers", "rows", [{"T": 8192, "N": 16384, "TANH": 1}], {"threads": 128}, (8,)),
    ("fp8_quant_cuda", "ptx_cvt_e4m3x2", "threads", [{"T": 512, "D": 5120}], {"rows_per_block": 1}, (128, 256, 512), "fp16"),
]
# s4 (follow-up): the exposed second pass (row_reread.exposed_reread: waves ** -0.3 of the re-read where L1 serves it):
# one row size at one- to many-wave grids (T=1024 / 4096 / 16384 at D=4096: 1-16 waves of 256-thread blocks), each
# beside register_cached; add_rmsnorm_cuda's vector rung beside register_cached on the short grid; fp8_quant_cuda's
# shuffle rung across threads at a second row size
WAVES = [{"T": 1024, "D": 4096}, {"T": 4096, "D": 4096}, {"T": 16384, "D": 4096}]
S4 = [
    ("rmsnorm_cuda", "vectorized_uint4", "threads", WAVES, {}, (128, 256, 512)),
    ("rmsnorm_cuda", "register_cached", "threads", WAVES, {"rows_per_block": 1}, (256,)),
    ("rmsnorm_cuda", "warp_shuffle", "threads", WAVES[1:], {"vec": 4}, (64, 256)),
    ("add_rmsnorm_cuda", "vectorized_uint4", "threads", [{"T": 1024, "D": 4096}, {"T": 16384, "D": 4096}], {}, (64, 256),
     "fp16"),
    ("add_rmsnorm_cuda", "register_cached", "threads", [{"T": 1024, "D": 4096}, {"T": 16384, "D": 4096}],
     {"rows_per_block": 1}, (256,), "fp16"),
    ("fp8_quant_cuda", "warp_shuffle_vectorized", "threads", [{"T": 16384, "D": 4096}], {}, (64, 128, 256, 512)),
    ("fp8_quant_cuda", "ptx_cvt_e4m3x2", "threads", [{"T": 16384, "D": 4096}], {"rows_per_block": 1}, (256,)),
]
PLANS = {"s1": ([], S1), "s2": ([], S2), "s3": ([], S3), "s4": ([], S4)}


def modelled(entries: list, gpu: str = "H100") -> list:
    """The entries with only the values the model can time (roomA_device.modelled's rule)."""
    from kernelstrain.ops import REGISTRY
    from kernelstrain.sim import simulate
    from kernelstrain.tasks import make_task
    out = []
    for e in entries:
        m = REGISTRY[e[0]]
        v = m.variant(e[1])
        dtype = e[6] if len(e) > 6 else "bf16" if "bf16" in m.dtypes else m.dtypes[0]
        keep = []
        for value in e[5]:
            try:
                for shape in e[3]:
                    simulate(m, v, {**v.defaults(), **e[4], e[2]: value}, make_task(m, gpu, dtype, shape))
                keep.append(value)
            except (KeyError, IndexError, ValueError) as err:
                print(f"simS_device: {e[0]} {e[1]} {e[2]}={value} left out ({err!r})", file=sys.stderr)
        if keep:
            out.append(e[:5] + (tuple(keep),) + e[6:])
    return out


room_device_check.PLANS["default"] = tuple(modelled(x) for x in PLANS[os.environ.get("SIMS_PLAN", "s1")])

if __name__ == "__main__":
    sys.exit(room_device_check_triton.run_ranked(across=True))
