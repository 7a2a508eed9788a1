"""Build every tuning value added to the Triton rungs (issue 26 item 2, roomT) with Triton's own compiler, for each
target its module runs on, beside the simulator's verdict: a value the simulator runs must compile, one it fails for
shared memory must be over the cap in the compiler's metadata.shared (Triton's launcher then refuses it), and the model's shared memory is printed against the
compiler's metadata.shared. Every bug render of each new value compiles too (bugs fail at run time, not in the build).

    python3 scripts/room_compile_triton.py [MODULE ...]     # exit 1 on a disagreement

Targets: one GPU of each architecture the catalog has (sm_80, sm_86, sm_89, sm_90a, sm_120, gfx942) where the module
supports it; shapes: the module's check shape and its first and last menu shapes, in its first dtype.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.compilers import compile_triton  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate, smem_cap  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

# (module, rung, parameter, the values added)
ADDED = [
    ("gemm_fp16_triton", "pipelined_stages", "BLOCK_N", (64,)),
    ("gemm_fp16_triton", "pipelined_stages", "num_stages", (2,)),
    ("gemm_fp16_triton", "persistent_tma", "num_stages", (2,)),
    ("fused_qkv_rope_triton", "dot_then_rope", "num_warps", (8,)),
    ("fused_qkv_rope_triton", "fused_epilogue", "num_warps", (8,)),
    ("fused_qkv_rope_triton", "grouped_swizzle", "num_warps", (8,)),
    ("fused_qkv_rope_triton", "pipelined_stages", "num_stages", (2,)),
    ("flash_prefill_triton", "persistent", "num_stages", (4,)),
    ("chunked_prefill_triton", "persistent", "num_stages", (4,)),
    ("sliding_window_attn_triton", "persistent_tiles", "num_stages", (4,)),
    ("cross_attention_triton", "split_kv", "num_stages", (4,)),
    ("tree_attention_triton", "split_kv", "num_stages", (4,)),
    ("cross_entropy_fwd_triton", "chunked_two_pass", "num_stages", (2, 3, 4)),
    ("cross_entropy_fwd_triton", "online_softmax", "num_stages", (2, 3, 4)),
    ("cross_entropy_bwd_triton", "persistent_evict_first", "num_stages", (1, 3)),
    ("paged_decode_triton", "gqa_dot", "num_warps", (2,)),
    ("paged_decode_triton", "split_kv", "num_warps", (2,)),
    ("paged_decode_triton", "split_kv", "NUM_SPLITS", (32,)),
    ("int8_kv_quant_triton", "multi_token_tile", "num_warps", (16,)),
    ("gemm_fp4_triton", "pipelined_copies", "num_stages", (3, 4)),
    ("gemm_fp4_triton", "pipelined_copies", "GROUP_M", (4,)),
    # roomK (2026-12-07); the 2026-12-07 run (Triton 3.9.0, all six targets, 0 disagreements) also built
    # gemm_splitk_triton's 2 warps and grouped_gemm_triton block_lookup's 128-wide K / 5 stages, not offered
    ("gemm_fp4_triton", "pipelined_copies", "BLOCK_M", (256,)),
    ("grouped_gemm_triton", "m_fastest_order", "BLOCK_N", (256,)),
    # roomT (2026-12-07): split counts add programs, not shared memory
    ("cross_attention_triton", "split_kv", "num_splits", (32,)),
    ("rmsnorm_triton", "persistent", "programs_per_sm", (16,)),
    ("fp8_quant_triton", "persistent_rows", "programs_per_sm", (8,)),
    # roomT (2026-12-07, the short-horizon families): the ends of the lists their sessions stopped at
    ("fp8_quant_triton", "persistent_rows", "programs_per_sm", (16,)),
    ("rope_triton", "token_program", "BLOCK_H", (2,)),
    ("rope_triton", "token_head_grid", "BLOCK_H", (2,)),
    ("rope_triton", "multi_token_tile", "BLOCK_H", (2,)),
    ("rope_triton", "persistent", "BLOCK_H", (2,)),
    ("rope_triton", "token_program", "num_warps", (16,)),
    ("rope_triton", "token_head_grid", "num_warps", (16,)),
    ("rope_triton", "multi_token_tile", "num_warps", (16,)),
    ("rope_triton", "persistent", "num_warps", (16,)),
    ("paged_kv_copy_triton", "persistent", "num_warps", (2,)),
    ("softmax_triton", "chunked_three_pass", "num_warps", (2,)),
    ("softmax_triton", "online_softmax", "num_warps", (2,)),
    ("softmax_triton", "split_row_online", "num_warps", (2,)),
    # roomT (2026-12-07, tenth session): gemm_fp4_triton's split_k_dot_scaled rung, each list from its defaults
    ("gemm_fp4_triton", "split_k_dot_scaled", "SPLIT_K", (2, 4, 8, 16)),
    ("gemm_fp4_triton", "split_k_dot_scaled", "BLOCK_M", (16, 32, 64)),
    ("gemm_fp4_triton", "split_k_dot_scaled", "BLOCK_N", (32, 64, 128)),
    ("gemm_fp4_triton", "split_k_dot_scaled", "BLOCK_K", (64, 128)),
    ("gemm_fp4_triton", "split_k_dot_scaled", "num_stages", (3, 4)),
    ("gemm_fp4_triton", "split_k_dot_scaled", "num_warps", (4,)),     # 8 built too (0 disagreements), off: slower
    # roomT (2026-12-07, eleventh session): selective_scan_triton's split_l_state_outer rung, each list from its defaults.
    # Run so far (the loaded 2-core machine, ~1 min a build: /tmp/roomT/s11/compile_scan.py): SPLITS 2 on all six
    # targets and 16 on sm_90a / sm_80, clean renders, 0 disagreements; the H100 built 15 configurations (roomT/j1)
    ("selective_scan_triton", "split_l_state_outer", "SPLITS", (2, 4, 8, 16)),
    ("selective_scan_triton", "split_l_state_outer", "BLOCK_D", (1, 2, 4, 8, 16)),
    ("selective_scan_triton", "split_l_state_outer", "CHUNK", (64, 128, 256, 512)),
    ("selective_scan_triton", "split_l_state_outer", "num_warps", (1, 2, 4, 8)),
]
TARGETS = ("A100", "A10", "RTX4090", "H100", "RTX5090", "MI300X")


def shapes(m) -> list:
    out = [dict(m.check_shape)] if m.check_shape else []
    return out + [s for s in (m.shapes[0], m.shapes[-1]) if s not in out]


def check(name: str, tag: str, param: str, values) -> tuple[int, int]:
    m = REGISTRY[name]
    v = m.variant(tag)
    built = bad = 0
    for g in TARGETS:
        gpu = GPUS[g]
        dtype = next((d for d in (v.dtypes or m.dtypes) if m.supports(gpu, d)), None)
        if dtype is None or v.needs - gpu.features:
            continue
        for shape in shapes(m):
            task = make_task(m, g, dtype, shape)
            for value in values:
                params = {**v.defaults(), param: value}
                sim = simulate(m, v, params, task)
                for bug in [None] + (list(v.bugs_for(dtype, params)) if sim.ok else []):
                    r = compile_triton(m.render(v, params, task, bug), m.compile_specs(v, params, task), gpu.arch)
                    built += 1
                    # Triton builds past the cap; its launcher refuses (OutOfResources) where metadata.shared exceeds it
                    over = r.ok and r.smem_bytes is not None and r.smem_bytes > smem_cap(v, m, gpu)
                    agree = (r.ok and not over) == sim.ok or (not sim.ok and sim.error_class != "smem")
                    model = m.launch(v, params, task).smem_bytes
                    line = (f"{name} {tag} {param}={value} {g} {dtype} {shape} bug={bug}: compile "
                            f"{'ok' if r.ok else r.error_class} smem {r.smem_bytes} (model {model}), sim "
                            f"{'ok' if sim.ok else sim.error_class}")
                    if not agree:
                        bad += 1
                        line = "DISAGREE " + line + " | " + " ".join((r.log or "").splitlines()[-1:])[:160]
                    print(line, flush=True)
    return built, bad


def main() -> int:
    wanted = set(sys.argv[1:])
    built = bad = 0
    for entry in ADDED:
        if not wanted or entry[0] in wanted:
            b, x = check(*entry)
            built, bad = built + b, bad + x
    print(f"{built} builds, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
