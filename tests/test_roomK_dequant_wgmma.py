"""roomK: the dequant_then_wgmma rungs of gemm_fp4_cuda and gemm_int4_cuda (_dequant_wgmma.py): a copy pass writes
16-bit operands, then the Hopper TMA + wgmma GEMM runs on them, as an H100 ran them (scripts/roomK_device.py plan
k5, measurements/h100_roomK_k5.json); fp8 split-K's half-empty 128-row tiles from the same run."""
import json
import math
from pathlib import Path

from kernelstrain.ops import REGISTRY
from kernelstrain.ops.matmul import _dequant_wgmma
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

CASES = (("gemm_fp4_cuda", "cp_async_dequant", {"M": 1024, "N": 2048, "K": 4096, "G": 16}),
         ("gemm_int4_cuda", "split_k_small_m", {"M": 1024, "N": 14336, "K": 4096}))


def _render(name, shape, bug=None, dtype="bf16", **params):
    m = REGISTRY[name]
    v = m.variant("dequant_then_wgmma")
    return m.render(v, {**v.defaults(), **params}, make_task(m, "H100", dtype, shape), bug)


def test_the_rung_follows_the_register_dequant_rungs_and_runs_only_where_wgmma_does():
    for name, below, shape in CASES:
        m = REGISTRY[name]
        tags = [v.tag for v in m.variants]
        assert tags.index("dequant_then_wgmma") == tags.index(below) + 1, tags
        v = m.variant("dequant_then_wgmma")
        for gpu, ok in (("H100", True), ("H200", True), ("A100", False)):
            assert simulate(m, v, v.defaults(), make_task(m, gpu, "bf16", shape)).ok is ok, (name, gpu)


def test_the_code_copies_then_calls_the_wgmma_kernel_and_the_bugs_change_it():
    for name, _, shape in CASES:
        op = REGISTRY[name].op
        good = _render(name, shape)
        assert f"{op}_wgmma(" in good and "wgmma.mma_async" in good and "cudaMallocAsync" in good
        assert "#include <cudaTypedefs.h>" in good            # the tensor-map encoder's type
        assert f"#define BN 256" in _render(name, shape, BN=256)
        scaled = good.count(" * s)")
        assert scaled and _render(name, shape, bug="missing_scale").count(" * s)") == 0, name
        assert "kt < KT - 1;" in _render(name, shape, bug="off_by_one") and "kt < KT - 1;" not in good
    fp4 = _render("gemm_fp4_cuda", CASES[0][2])
    assert "fp4_to_16bit<<<" in fp4 and fp4.count("fp4_to_16bit<<<") == 2       # A and B
    assert _render("gemm_int4_cuda", CASES[1][2]).count("dequant_int4<<<") == 1  # W only


def test_the_copy_pass_is_its_bytes_at_the_copy_bandwidth_before_the_gemm():
    for name, _, shape in CASES:
        m = REGISTRY[name]
        v = m.variant("dequant_then_wgmma")
        task = make_task(m, "H100", "bf16", shape)
        launch = v.launch(v.defaults(), task)
        n, k = shape["N"], shape["K"]
        w16 = n * k * 2 + (shape["M"] * k * 2 if name == "gemm_fp4_cuda" else 0)   # the 16-bit copies written
        assert launch.later_s > w16 / (task.gpu.bw_tbs * 1e12 * _dequant_wgmma.COPY_EFF), name
        assert launch.launches == (3 if name == "gemm_fp4_cuda" else 2)


K5 = json.loads((Path(__file__).resolve().parents[1] / "measurements" / "h100_roomK_k5.json").read_text())["rows"]


def _row_sim(r):
    m = REGISTRY[r["module"]]
    v = m.variant(r["variant"])
    return simulate(m, v, {**v.defaults(), **r["params"]}, make_task(m, "H100", r["dtype"], r["shape"])).time_ms


def _rows(module, variant):
    return [r for r in K5 if r["module"] == module and r["variant"] == variant and not r["bug"] and r["ok"]]


def test_the_h100_rows_of_the_rung_sit_near_their_model():
    """plan k5: WGMMA_LEVEL takes the 19 fp4 and 10 int4 rows from 1.22x / 2.30x the device to within 0.85-1.15x."""
    for name in ("gemm_fp4_cuda", "gemm_int4_cuda"):
        rows = _rows(name, "dequant_then_wgmma")
        logs = [math.log(_row_sim(r) / r["time_ms"]) for r in rows]
        assert len(rows) >= 10 and 0.85 < math.exp(sum(logs) / len(logs)) < 1.15, name


def test_the_rung_beats_the_one_below_where_the_h100_ran_it_faster():
    for name, below in (("gemm_fp4_cuda", "cp_async_dequant"), ("gemm_int4_cuda", "split_k_small_m")):
        for r in _rows(name, below):
            mine = [x for x in _rows(name, "dequant_then_wgmma") if x["shape"] == r["shape"]]
            fastest = min(mine, key=lambda x: x["time_ms"])
            assert (fastest["time_ms"] < r["time_ms"]) == (_row_sim(fastest) < _row_sim(r)), (name, r["shape"])


def test_a_half_empty_128_row_split_k_tile_ranks_as_the_h100_ran_it():
    """fp8 wgmma_split_k: BM 128 over M=16 slower than BM 64 (36.8 vs 33.2 us), over M=128 faster, on both."""
    for name in ("gemm_fp8_cuda", "gemm_fp8_blockwise_cuda"):
        rows = _rows(name, "wgmma_split_k")
        for shape in {json.dumps(r["shape"], sort_keys=True) for r in rows}:
            pair = sorted((r for r in rows if json.dumps(r["shape"], sort_keys=True) == shape), key=lambda r: r["params"]["BM"])
            assert len(pair) == 2
            assert (pair[0]["time_ms"] < pair[1]["time_ms"]) == (_row_sim(pair[0]) < _row_sim(pair[1])), (name, shape)
