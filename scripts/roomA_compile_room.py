"""Triton's own compiler on the tile values roomA added to the attention rungs (issue 26 item 2): scripts/
room_compile_triton.check for each, on every target its module runs on (a value the simulator runs must build within
the shared-memory cap; one it fails for shared memory must be over the cap in metadata.shared).

    python3 scripts/roomA_compile_room.py              # the added values; exit 1 on a disagreement
    python3 scripts/roomA_compile_room.py --new-rung   # fused_qkv_rope_triton persistent_tma at its check shape
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_compile_triton  # noqa: E402

ADDED = [
    ("swa_decode_triton", "gqa_dot", "BLOCK_N", (256,)),
    ("flash_decode_triton", "online_softmax", "BLOCK_N", (256,)),
    ("flash_decode_triton", "split_kv", "BLOCK_N", (256,)),
]

# the new rung fused_qkv_rope_triton persistent_tma, at its check shape: every parameter's ends (the others at defaults)
NEW_RUNG = [
    ("fused_qkv_rope_triton", "persistent_tma", "BLOCK_N", (128, 256)),
    ("fused_qkv_rope_triton", "persistent_tma", "BLOCK_M", (64,)),
    ("fused_qkv_rope_triton", "persistent_tma", "num_stages", (2, 4)),
    ("fused_qkv_rope_triton", "persistent_tma", "num_warps", (4,)),
]


def check_shape_only(m) -> list:
    return [dict(m.check_shape)]


if __name__ == "__main__":
    if sys.argv[1:] == ["--new-rung"]:
        room_compile_triton.ADDED, room_compile_triton.shapes, sys.argv[1:] = NEW_RUNG, check_shape_only, []
    else:
        room_compile_triton.ADDED = ADDED
    sys.exit(room_compile_triton.main())
