"""roomA's room of this session (issue 26 item 2): fused_qkv_rope_triton's persistent_tma rung (Triton's persistent
matmul with the rope epilogue) and the 256-key / 256-column tiles of swa_decode_triton gqa_dot and flash_decode_triton
online_softmax / split_kv. Their correctness is the interpreter's (scripts/roomA_interpret_room.py, TRITON_INTERPRET=1
on the CPU against the PyTorch reference; one case of each here, skipped without triton), their shared memory
Triton's own (scripts/roomA_compile_room.py), their times the launch models'."""
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.ops.attention.fused_qkv_rope_triton import PERSISTENT_TMA
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parents[1]
QKV = REGISTRY["fused_qkv_rope_triton"]


def us(module, tag, gpu, shape, dtype="fp16", **params):
    m = REGISTRY[module]
    v = m.variant(tag)
    r = simulate(m, v, {**v.defaults(), **params}, make_task(m, gpu, dtype, shape))
    return r.time_ms * 1e3 if r.ok else None


def test_persistent_smem_is_tritons_figure():
    """Every bug-free build of docs/roomA_compile_room_new_rung.txt (Triton 3.9's metadata.shared over sm_80/86/89/90a/
    120): the model's figure is the compiler's, the epilogue's conversion beside the K ring and the TMA barriers."""
    v = PERSISTENT_TMA
    line = re.compile(r"persistent_tma (\w+)=(\d+) (\w+) fp16 (\{.*\}) bug=None: compile ok smem (\d+)")
    rows = [m.groups() for m in map(line.search, (ROOT / "docs/roomA_compile_room_new_rung.txt").read_text().splitlines())
            if m]
    assert len(rows) >= 20
    for name, value, gpu, shape, smem in rows:
        task = make_task(QKV, gpu, "fp16", eval(shape))      # noqa: S307 - the log's own dict
        assert QKV.launch(v, {**v.defaults(), name: int(value)}, task).smem_bytes == int(smem), (name, value, gpu)


@pytest.mark.parametrize("shape", [{"T": 4096, "HID": 4096, "H": 32, "KVH": 8, "D": 128},
                                   {"T": 1024, "HID": 3584, "H": 28, "KVH": 4, "D": 128},
                                   {"T": 1000, "HID": 2048, "H": 16, "KVH": 4, "D": 128}])
def test_persistent_rung_gains_what_gemm_fp16s_persistent_rung_measured(shape):
    """The persistent rung's best runs ahead of the pipelined rung's best by about what gemm_fp16_triton's persistent
    rung ran ahead of its pipelined one on the H100 (1.18-1.86x, measurements/h100_*), and under the tensor peak; at
    the check shape (192 tiles of 128 x 128: 1.45 rounds of 132 programs) about level (0.94x)."""
    def best(tag):
        v = PERSISTENT_TMA if tag == "persistent_tma" else QKV.variant(tag)
        task = make_task(QKV, "H100", "bf16", shape)
        grid = itertools.product(*(p.values for p in v.params))
        times = [r.time_ms for values in grid
                 if (r := simulate(QKV, v, dict(zip((p.name for p in v.params), values)), task)).ok]
        return min(times), task
    persistent, task = best("persistent_tma")
    pipelined, _ = best("pipelined_stages")
    # T=1024: 0.997 since the fit's parameter terms hold at their rows' edges (sim, 2026-12-07); the H100 (plan a10)
    # ran persistent behind pipelined at all three shapes, so level is no further from the device than a lead
    assert (0.9 if shape["T"] == 1000 else 0.97) < pipelined / persistent < 1.9, (pipelined, persistent)
    assert persistent > QKV.cost(task).flops / task.gpu.peak("fp16") * 1e3


def test_persistent_rung_is_off_the_menus_where_the_h100_ran_it_slower():
    """roomT (2026-12-07): plan a10 ran persistent_tma correct but behind pipelined_stages at all three shapes, where
    the model (above) puts it ahead; it is offered only with KERNELSTRAIN_DEVICE_UNCHECKED=1."""
    offered = [v.tag for v in QKV.variants]
    assert ("persistent_tma" in offered) == (os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1")


def test_256_key_tiles_order_as_the_h100_measured():
    """H100 plan a1: swa_decode gqa_dot 256 keys at 2 stages 21.9 us against 128's 24.5, both behind 128 at 3 stages
    (17.2), where 256 keys do not fit; decode6: flash_decode online_softmax on 2 warps 256 keys 30.3 us against 128's
    66.0 at D=64, 945.6 against 734.1 at D=128 (the register file spills)."""
    swa = {"B": 8, "H": 32, "KVH": 8, "S": 4096, "W": 1000, "D": 128}
    at2 = [us("swa_decode_triton", "gqa_dot", "H100", swa, BLOCK_N=n, num_warps=8, num_stages=2) for n in (128, 256)]
    best = us("swa_decode_triton", "gqa_dot", "H100", swa, BLOCK_N=128, num_warps=8, num_stages=3)
    assert best < at2[1] < at2[0]
    assert us("swa_decode_triton", "gqa_dot", "H100", swa, BLOCK_N=256, num_warps=8, num_stages=3) is None
    for shape, faster in (({"B": 16, "H": 16, "S": 1024, "D": 64}, True), ({"B": 32, "H": 32, "S": 4096, "D": 128}, False)):
        t128, t256 = (us("flash_decode_triton", "online_softmax", "H100", shape, "bf16", BLOCK_N=n, num_warps=2,
                         num_stages=1) for n in (128, 256))
        assert (t256 < t128) == faster, (shape, t128, t256)


# one interpreter case of each addition (the script runs 2-3 shapes of each, and every bug)
CHECK = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/scripts"]
import roomA_interpret_room as r
r.CASES = [c for c in r.CASES if c[3] in (r.SWA[1], r.DECODE[0], r.QKV[1])][::3]
sys.exit(r.main())
"""


@pytest.mark.slow       # the interpreter: about a minute
def test_added_values_are_correct_under_the_interpreter():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", CHECK, str(ROOT)], capture_output=True, text=True,
                       env={**os.environ, "TRITON_INTERPRET": "1", "KERNELSTRAIN_DEVICE_UNCHECKED": "1"}, timeout=900)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
