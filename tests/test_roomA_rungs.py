"""roomA's rungs (issue 26 item 2): chunked_prefill_cuda's wgmma rung indexes the chunk (prefix offset, KV-head base)
where flash_prefill_cuda's kernel indexes a whole sequence; both wgmma rungs' BLOCK_M 128 runs two warpgroups, each
on its own 64 rows of the Q tile (an H100 ran both); flash_prefill_triton's descriptor rung runs behind its pointer twin as the H100 measured;
launch-model fixes hold measured figures."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task


def _render(name, tag, params, dtype="bf16", gpu="H100", bug=None):
    m = REGISTRY[name]
    v = m.variant(tag)
    task = make_task(m, gpu, dtype, dict(m.check_shape))
    return m, v, task, m.render(v, {**v.defaults(), **params}, task, bug)


# the wgmma renders (checked on an H100 by scripts/roomA_device.py plan a1), in a fresh interpreter
UNCHECKED = r"""
from kernelstrain import compilers
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def render(name, params, dtype="bf16", bug=None):
    m = REGISTRY[name]
    v = m.variant("wgmma_warpgroup")
    task = make_task(m, "H100", dtype, dict(m.check_shape))
    return m, v, task, m.render(v, {**v.defaults(), **params}, task, bug)


# chunked_prefill_cuda's wgmma kernel indexes the chunk where flash_prefill_cuda's indexes a whole sequence
for bm in (64, 128):
    for dtype in ("bf16", "fp16"):
        *_, code = render("chunked_prefill_cuda", {"BLOCK_M": bm}, dtype)
        assert "flash_prefill" not in code and " S " not in code.split("chunked_prefill_kernel(")[1].split("{")[0]
        for piece in ("const size_t base = (size_t)blockIdx.x * C * HEAD_DIM;",     # Q and O: the head's chunk rows
                      "k + (size_t)(bh / GROUP) * (P + C) * HEAD_DIM",                # K/V: the KV head's P + C keys
                      "kb + (size_t)j * BLOCK_N * HEAD_DIM", "vb + (size_t)j * BLOCK_N * HEAD_DIM",
                      "(P + m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N",                   # through the chunk's diagonal
                      "n0 + BLOCK_N - 1 > P + row0", "e % 2 > P + row0 + g + e / 2 * 8",   # chunk row r sits at P + r
                      "chunked_prefill_kernel<<<dim3(B * NUM_HEADS, C / BLOCK_M), THREADS, smem, stream>>>"):
            assert piece in code, piece
        *_, off = render("chunked_prefill_cuda", {"BLOCK_M": bm}, dtype, bug="off_by_one")
        assert "e % 2 >= P + row0" in off
# BLOCK_M 128: two warpgroups, each wgmma's A operand its own 64 rows of the Q tile
for name in ("flash_prefill_cuda", "chunked_prefill_cuda"):
    *_, one = render(name, {"BLOCK_M": 64})
    m, v, task, two = render(name, {"BLOCK_M": 128})
    assert "constexpr int THREADS = 128;" in one and "warp / 4" not in one
    assert "#define BLOCK_M 128" in two and "constexpr int THREADS = 256;" in two
    assert "sw128_desc(Qs + c * BLOCK_M * 128 + warp / 4 * 64 * 128)" in two
    a, b = (m.launch(v, {**v.defaults(), "BLOCK_M": bm}, task) for bm in (64, 128))
    assert (a.threads, b.threads) == (128, 256) and b.grid * 2 == a.grid
    assert b.smem_bytes - a.smem_bytes == 64 * task["D"] * 2      # the second warpgroup's Q rows
if BUILD:
    *_, code = render("chunked_prefill_cuda", {"BLOCK_M": 128, "BLOCK_N": 128, "stages": 3})
    r = compilers.compile_cuda(code, GPUS["H100"].arch)
    assert r.ok, (r.log or "")[-400:]
print("ok")
"""


def test_wgmma_renders():
    env = dict(os.environ)
    code = f"BUILD = {shutil.which('nvcc') is not None}\n" + UNCHECKED
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parents[1], timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


@pytest.mark.parametrize("params, measured", [
    ({"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}, 131.1 / 121.8),
    ({"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, 110.2 / 104.3),
    ({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, 143.6 / 124.5)])
def test_descriptor_rung_runs_behind_pointer_loads_as_the_h100_measured(params, measured):
    """H100 (scripts/roomA_device.py plan a1): flash_prefill_triton's descriptor rung ran 1.01-1.15x its pointer twin."""
    m = REGISTRY["flash_prefill_triton"]
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})
    tma, ptr = (simulate(m, m.variant(tag), params, task).time_ms for tag in ("tma_descriptors", "pipelined"))
    assert 1.0 < tma / ptr < 1.2 and measured > 1.0


def test_qkv_rope_64_wide_pipelined_tiles_cost_what_the_h100_measured():
    """H100 (measurements/h100_gpucheck_kigrid.json): 128 x 64 x 64 tiles at 3 stages, 8 warps, 175.9 us against
    128 x 128's 149.7 (1.17x) at T=4096 HID=2048 H=16 KVH=16 D=64; gemm_fp16_triton's 64-wide factor said 2.08x."""
    m = REGISTRY["fused_qkv_rope_triton"]
    v = m.variant("pipelined_stages")
    task = make_task(m, "H100", "bf16", {"T": 4096, "HID": 2048, "H": 16, "KVH": 16, "D": 64})
    base = {"BLOCK_M": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_stages": 3, "num_warps": 8}
    n64, n128 = (simulate(m, v, {**base, "BLOCK_N": bn}, task).time_ms for bn in (64, 128))
    assert 1.0 < n64 / n128 < 1.4


@pytest.mark.parametrize("stages, measured_us", [(2, 223.6), (3, 443.8)])
def test_spilling_persistent_window_tiles_cost_what_the_h100_measured(stages, measured_us):
    """sliding_window_attn_triton's persistent 128 x 64 tiles on 4 warps spill (~300 registers a thread); H100
    (measurements/h100_sim30_checks.json, B=2 H=16 S=3000 D=128 W=1024): 223.6 us at 2 stages, 443.8 at 3 (one
    program an SM). The spill penalty of 255 / (255 + 2 spill) timed them 1.3-1.45x slow (27 such rows: 1.29x)."""
    m = REGISTRY["sliding_window_attn_triton"]
    task = make_task(m, "H100", "bf16", {"B": 2, "H": 16, "S": 3000, "D": 128, "W": 1024})
    params = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": stages}
    assert 0.8 < simulate(m, m.variant("persistent_tiles"), params, task).time_ms * 1e3 / measured_us < 1.25


# H100, plan a4 (docs/roomA_device_h100_a4/): warp_specialized / wgmma_warpgroup us at the same tiles
A4_PAIRS = [("flash_prefill_cuda", {"B": 1, "H": 32, "S": 2048, "D": 128}, {"BLOCK_M": 64, "BLOCK_N": 64, "stages": 2}, 110.5, 136.3),
            ("flash_prefill_cuda", {"B": 1, "H": 32, "S": 2048, "D": 128}, {"BLOCK_M": 128, "BLOCK_N": 64, "stages": 2}, 116.3, 131.0),
            ("flash_prefill_cuda", {"B": 1, "H": 32, "S": 2048, "D": 128}, {"BLOCK_M": 128, "BLOCK_N": 64, "stages": 3}, 117.0, 129.8),
            ("chunked_prefill_cuda", {"B": 2, "H": 16, "KVH": 4, "C": 512, "P": 1536, "D": 128},
             {"BLOCK_M": 128, "BLOCK_N": 64, "stages": 3}, 53.4, 58.4),
            ("chunked_prefill_cuda", {"B": 2, "H": 16, "KVH": 4, "C": 512, "P": 1536, "D": 128},
             {"BLOCK_M": 128, "BLOCK_N": 128, "stages": 3}, 41.8, 55.1)]


@pytest.mark.parametrize("name, shape, params, ws_us, wgmma_us", A4_PAIRS)
def test_warp_specialized_beats_the_wgmma_rung_as_the_h100_measured(name, shape, params, ws_us, wgmma_us):
    """The producer warpgroup ran 1.09-1.34x faster than the wgmma rung at the same tiles at D=128 (_flash_ws.WS_GAIN:
    by consumer warpgroups and key tile): the model orders every pair the same way, within 0.8-1.25x of each measured
    time and of each measured gain."""
    m = REGISTRY[name]
    task = make_task(m, "H100", "bf16", shape)
    ws, wg = (simulate(m, m.variant(t), params, task).time_ms * 1e3 for t in ("warp_specialized", "wgmma_warpgroup"))
    assert ws < wg
    assert 0.8 < ws / ws_us < 1.35 and 0.8 < wg / wgmma_us < 1.25
    assert 0.8 < (wg / ws) / (wgmma_us / ws_us) < 1.25


def test_warp_specialized_orders_its_own_tiles_as_the_h100_measured():
    """a4 / a5: flash_prefill_cuda's 128 x 128 tiles 91.7 us, 64 x 64 110.5 against 116.3-117.0 at 128 x 64 (2-4
    stages: flat); chunked_prefill_cuda's 128 x 128 41.8 against 52.6-53.4 at 128 x 64 and 63.6 at 64 x 128 (two
    consumers on 128-key tiles take the producer's registers by setmaxnreg: no spill at the 384-thread cap, as the
    wgmma rung's 208 registers would)."""
    f, c = REGISTRY["flash_prefill_cuda"], REGISTRY["chunked_prefill_cuda"]
    ft = make_task(f, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})
    ct = make_task(c, "H100", "bf16", {"B": 2, "H": 16, "KVH": 4, "C": 512, "P": 1536, "D": 128})
    fv, cv = f.variant("warp_specialized"), c.variant("warp_specialized")
    best = simulate(f, fv, {"BLOCK_M": 64, "BLOCK_N": 64, "stages": 2}, ft).time_ms
    assert simulate(f, fv, {"BLOCK_M": 128, "BLOCK_N": 128, "stages": 2}, ft).time_ms < best
    assert all(best < simulate(f, fv, {"BLOCK_M": 128, "BLOCK_N": 64, "stages": s}, ft).time_ms for s in (2, 3, 4))
    wide = simulate(c, cv, {"BLOCK_M": 128, "BLOCK_N": 128, "stages": 3}, ct).time_ms
    assert all(wide < simulate(c, cv, {"BLOCK_M": 128, "BLOCK_N": 64, "stages": s}, ct).time_ms for s in (2, 3, 4))
    assert wide < simulate(c, cv, {"BLOCK_M": 64, "BLOCK_N": 128, "stages": 3}, ct).time_ms
    assert c.launch(cv, {"BLOCK_M": 128, "BLOCK_N": 128, "stages": 3}, ct).regs <= 168


@pytest.mark.parametrize("name", ["flash_prefill_cuda", "chunked_prefill_cuda"])
@pytest.mark.parametrize("bm, bn", [(64, 64), (128, 64), (128, 128)])
def test_warp_specialized_rung_is_fa3s_producer_and_consumers(name, bm, bn):
    """The warp_specialized rung: warpgroup 0 only produces (Q and each K/V tile by TMA, counted on a full barrier,
    a slot refilled only after its empty barrier says every consumer thread left it); the consumers wait on the full
    barrier where the wgmma rung waited on its own cp.async groups and a __syncthreads, and hand the slot back after
    their last wgmma on it. Its launch is the wgmma rung's plus the producer warpgroup's 128 threads."""
    params = {"BLOCK_M": bm, "BLOCK_N": bn, "stages": 3}
    m, v, task, code = _render(name, "warp_specialized", params)
    _, w, _, base = _render(name, "wgmma_warpgroup", {**params, "stages": 2})
    body = code.split("_kernel(const __grid_constant__ CUtensorMap tq")[1]
    assert "cp.async.cg" not in code and "__syncthreads();" in body and body.count("__syncthreads()") == 1  # the init
    for piece in ("mbar_init(&empty[i], CONSUMERS)", "if (warp < 0) {", "return;\n    }",
                  "mbar_wait(&empty[j % STAGES], (j / STAGES - 1) & 1)", "mbar_expect_tx(&full[j % STAGES], 2 * BLOCK_N * HEAD_DIM * 2)",
                  "mbar_wait(&full[j % STAGES], (j / STAGES) & 1)", "mbar_arrive(&empty[j % STAGES])",
                  f"constexpr int CONSUMERS = {bm * 2};", "CU_TENSOR_MAP_SWIZZLE_128B", "#include <cudaTypedefs.h>"):
        assert piece in code, piece
    assert ("setmaxnreg" in code) == (bm == 128 and bn == 128)     # where 384 threads' 168-register cap would spill
    assert code.index("mbar_wait(&full[j % STAGES]") < code.index("wgmma_tile(s,") < code.index("mbar_arrive(&empty")
    a, b = m.launch(v, params, task), m.launch(w, params, task)
    assert a.threads == b.threads + 128 and a.grid == b.grid and a.smem_bytes == b.smem_bytes
    if name == "chunked_prefill_cuda":
        assert "tma_load_2d(Qs + c * BLOCK_M * 128, &tq, c * 64, blockIdx.x * C + m0, &q_full)" in code
        assert "bh / GROUP * (P + C) + j * BLOCK_N" in code and "kmajor_map(k, B * (NUM_HEADS / GROUP) * (P + C)" in code
    if shutil.which("nvcc") and (bm, bn) == (128, 128):
        from kernelstrain import compilers
        r = compilers.compile_cuda(code, "sm_90a")
        assert r.ok, (r.log or "")[-400:]


def test_pipelined_flash_triton_orders_stages_and_key_tiles_as_the_h100_measured():
    """H100 (docs/roomA_device_h100_a1/, B=1 H=32 S=2048 D=128, 4 warps): 64 x 64 tiles 121.8 / 104.3 / 131.2 us at
    2 / 3 / 4 stages, 64 x 32 116.8 / 124.5 / 125.6 at 3 / 4 / 5 (the model had 4-5 stages on 32-key tiles fastest):
    a third stage pays on Hopper, more do not, and 32-key tiles trail 64-key ones (_fused_launch's hopper_ring)."""
    m = REGISTRY["flash_prefill_triton"]
    v = m.variant("pipelined")
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})

    def t(bn, stages):
        return simulate(m, v, {"BLOCK_M": 64, "BLOCK_N": bn, "num_warps": 4, "num_stages": stages}, task).time_ms
    assert t(64, 3) < t(64, 2) and t(64, 3) < t(64, 4)
    assert t(64, 3) < t(32, 3) < t(32, 4)          # (5 stages, off the list: 125.6 measured, ~4 modelled)
    a100 = make_task(m, "A100", "bf16", {"B": 1, "H": 32, "S": 2048, "D": 128})    # no Hopper term elsewhere
    assert m.launch(v, {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 4}, a100).compute_scale == \
        m.launch(v, {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, a100).compute_scale


def test_qkv_wgmma_rung_is_gemm_fp16s_kernel_with_the_rope_epilogue():
    """fused_qkv_rope_cuda's wgmma_tma (on the ladder with KERNELSTRAIN_DEVICE_UNCHECKED=1 until a device times it):
    gemm_fp16_cuda's TMA producer / wgmma consumer kernel whose accumulator pair (d[2i], d[2i+1], adjacent columns)
    goes through rope_store; x and w are the K-major maps; both bug renders change the code; it builds for sm_90a."""
    from kernelstrain.ops.attention.fused_qkv_rope_cuda import wgmma_rope_src
    m = REGISTRY["fused_qkv_rope_cuda"]
    task = make_task(m, "H100", "bf16", m.check_shape)
    p = {"BM": 128, "BN": 128, "stages": 4}
    body = wgmma_rope_src(p, task)
    for piece in ("rope_store(q, k, v, cos, sin, row, col, v0, v1);", "kmajor_map(x, T, HID, BM)",
                  "kmajor_map(w, QKV_COLS, HID, BN)", "mbar_wait(&full[s], (it / STAGES) & 1)", "setmaxnreg"):
        assert piece in body, piece
    assert body != wgmma_rope_src(p, task, wait_full=False) and body != wgmma_rope_src(p, task, kt_end="KT - 1")
    if shutil.which("nvcc"):
        from kernelstrain import compilers
        code = m.assemble(body, SimpleNamespace(needs=frozenset({"wgmma", "tma"})), p, task)
        r = compilers.compile_cuda(code, "sm_90a")
        assert r.ok, (r.log or "")[-400:]


def test_qkv_triton_pipelined_128_wide_k_tiles_as_the_h100_measured():
    """fused_qkv_rope_triton's pipelined rung offers BLOCK_K 128 (plan a1, H100, T=1000 HID=2048 H=16 KVH=4 D=128, 64 x
    128 tiles, 3 stages, 8 warps: 51.4 us against BLOCK_K 64's 57.0): the model puts it ahead by a similar margin."""
    m = REGISTRY["fused_qkv_rope_triton"]
    v = m.variant("pipelined_stages")
    assert 128 in v.param("BLOCK_K").values
    task = make_task(m, "H100", "bf16", {"T": 1000, "HID": 2048, "H": 16, "KVH": 4, "D": 128})
    t = {bk: simulate(m, v, {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": bk, "GROUP_M": 8, "num_stages": 3,
                             "num_warps": 8}, task).time_ms for bk in (64, 128)}
    assert 1.0 < t[64] / t[128] < 57.0 / 51.4 * 1.15


@pytest.mark.parametrize("name", ["flash_prefill_cuda", "chunked_prefill_cuda"])
def test_pingpong_hands_the_tensor_cores_between_the_two_consumer_warpgroups(name):
    """warp_specialized_pingpong (on the ladder at 128 x 128 tiles since plan a9 ran it on the H100, roomT): the
    warp_specialized kernel at 128 rows with FA3's ping-pong, every GEMM issue between a bar.sync on its own named
    barrier (1 or 2) and a bar.arrive on the other's; warpgroup 1 lets warpgroup 0 go first; it builds for sm_90a."""
    from kernelstrain.ops.attention import _chunked_wgmma
    from kernelstrain.ops.attention._flash_ws import flash_ws_src, pingpong
    render = flash_ws_src if name == "flash_prefill_cuda" else _chunked_wgmma.ws_src
    m = REGISTRY[name]
    task = make_task(m, "H100", "bf16", dict(m.check_shape))
    p = {"BLOCK_M": 128, "BLOCK_N": 64, "stages": 2}
    plain, body = render(p, task), pingpong(render)(p, task)
    assert "named_sync" not in plain and body.count("named_sync(1 + cw);") == 2 and body.count("named_arrive(2 - cw);") == 2
    assert "if (cw == 1) named_arrive(1);" in body and "bar.sync %0, 256" in body and "bar.arrive %0, 256" in body
    loop = body[body.index("for (int j = 0; j < ntiles; ++j) {\n        mbar_wait(&full"):]
    turn, issue, hand = loop.index("named_sync(1 + cw)"), loop.index("wgmma_tile(s,"), loop.index("named_arrive(2 - cw)")
    assert turn < issue < hand < loop.index("fence_acc(s)")
    assert pingpong(render)(p, task, mask=">=") != body       # the bug renders still change the code
    if shutil.which("nvcc"):
        from kernelstrain import compilers
        r = compilers.compile_cuda(m.assemble(body, SimpleNamespace(needs=frozenset({"wgmma", "tma"})), p, task), "sm_90a")
        assert r.ok, (r.log or "")[-400:]


@pytest.mark.parametrize("tag", ["split_kv", "gqa_cp_async"])
def test_swa_decode_128_key_partitions_double_the_grid_and_the_partials(tag):
    """swa_decode_cuda's 128-key partitions (room_table: the best at 256, the list's end): the code's PARTITION, twice
    the CTAs of 256-key ones, twice the fp32 partials the combine kernel reads; at B=1 W=4096 (256-key partitions: 128
    gqa_cp_async CTAs on a 132-SM H100) the model gains from them. Device-unverified (plans a7 / a8 time them): on the
    lists only with KERNELSTRAIN_DEVICE_UNCHECKED=1."""
    m = REGISTRY["swa_decode_cuda"]
    v = m.variant(tag)
    task = make_task(m, "H100", "bf16", {"B": 1, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128})
    unchecked = os.environ.get("KERNELSTRAIN_DEVICE_UNCHECKED") == "1"
    assert v.param("partition").values == ((128,) if unchecked else ()) + (256, 512, 1024)
    p = {**v.defaults(), "threads": 256, "keys_per_step": 8}
    assert "#define PARTITION 128\n" in m.render(v, {**p, "partition": 128}, task)
    small, big = (m.launch(v, {**p, "partition": x}, task) for x in (128, 256))
    assert small.grid == 2 * big.grid and small.traffic > big.traffic
    if tag == "gqa_cp_async":
        t = {x: simulate(m, v, {**p, "tile_n": 16, "partition": x}, task).time_ms for x in (128, 256)}
        assert t[128] < t[256]
