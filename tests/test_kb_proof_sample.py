"""scripts/kb_official_eval.py's sample for the device proof: one solution per module and status over
all the exports given (of the chosen GPUs, a problem whose baseline is quick and whose traffic is
small preferred, none whose inputs are too big to draw on the CPU), a few per impl and status for fused
programs, every case of a kb_pinned.py directory, pinned cases first, then CUDA cases."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("kb_official_eval", ROOT / "scripts" / "kb_official_eval.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _export(path: Path, solutions: list, pinned: bool = False) -> Path:
    """An export directory holding just an index.json: solutions (module, impl, status, gpu, ms, level)."""
    problems, rows = [], []
    for n, (module, impl, status, gpu, ms, level) in enumerate(solutions, 1):
        problems.append({"problem_id": n, "file": f"level{level}/{n}.py", "dtype": "bf16", "baseline_ms": ms})
        rows.append({"file": f"solutions/level{level}/{n}_s1.py", "problem_id": n, "module": module, "impl": impl,
                     "status": status, "tag": "t", "gpu": gpu})
    path.mkdir(parents=True)
    index = {"problems": problems, "solutions": rows, **({"pinned": []} if pinned else {})}
    (path / "index.json").write_text(json.dumps(index))
    return path


def test_one_per_module_and_status_over_the_exports(tmp_path):
    k = _script()
    a = _export(tmp_path / "ex_ks", [("softmax_triton", "triton", "ok", "H100", 0.1, 1),
                                     ("softmax_triton", "triton", "wrong_result", "H100", 5.0, 1),
                                     ("rmsnorm_cuda", "cuda", "ok", "A100", 0.1, 1)])
    b = _export(tmp_path / "ex_ki", [("softmax_triton", "triton", "ok", "H200", 0.2, 1),
                                     ("softmax_triton", "triton", "wrong_result", "H100", 0.3, 1),
                                     ("rmsnorm_cuda", "cuda", "ok", "H100", 3.0, 1),
                                     ("rmsnorm_cuda", "cuda", "ok", "H100", 2.0, 1)])
    rows = k.sample([a, b], {"H100", "H200"}, ("ok", "wrong_result"), seed=0)
    assert sorted((r["module"], r["status"]) for r in rows) == [
        ("rmsnorm_cuda", "ok"), ("softmax_triton", "ok"), ("softmax_triton", "wrong_result")]
    assert rows[0]["impl"] == "cuda"                      # CUDA builds start first
    by = {(r["module"], r["status"]): r for r in rows}
    # the quick problem (0.3 ms) over the slow one (5 ms); among slow ones only, the quickest
    assert Path(by[("softmax_triton", "wrong_result")]["export"]).name == "ex_ki"
    assert by[("rmsnorm_cuda", "ok")]["problem"] == "level1/4.py"


def test_fused_programs_by_impl_and_pinned_cases_whole(tmp_path):
    k = _script()
    fused = _export(tmp_path / "ex_fu", [(f"fused_s0_{i:05d}_triton", "triton", "ok", "H100", 0.1, 2) for i in range(5)]
                    + [("fused_s0_00009_cuda", "cuda", "ok", "H200", 0.1, 2)])
    pinned = _export(tmp_path / "pinned", [("softmax_cuda", "cuda", "wrong_result", "H100", 9.0, 1)] * 3, pinned=True)
    rows = k.sample([fused, pinned], {"H100", "H200"}, ("ok", "wrong_result"), seed=1)
    fused_rows = [r for r in rows if r["export"].endswith("ex_fu")]
    assert sorted(r["impl"] for r in fused_rows) == ["cuda"] + ["triton"] * k.FUSED_PICKS
    pinned_rows = [r for r in rows if r["export"].endswith("pinned")]
    assert len(pinned_rows) == 3 and all(r["diagnose"] for r in pinned_rows)
    assert not any(r["diagnose"] for r in fused_rows)
    assert [r["diagnose"] for r in rows] == [True] * 3 + [False] * len(fused_rows)   # pinned cases start first


def test_problems_too_big_to_draw_are_left_to_the_filled_cases(tmp_path):
    k = _script()
    ex = _export(tmp_path / "ex_ks", [("grad_clip_cuda", "cuda", "ok", "H100", 0.5, 1),
                                      ("grad_clip_cuda", "cuda", "wrong_result", "H100", 24.0, 1),
                                      ("grad_clip_cuda", "cuda", "wrong_result", "H100", 30.0, 1)])
    index = json.loads((ex / "index.json").read_text())
    for p, n in zip(index["problems"], (1 << 20, 3212749824, 4 << 30)):      # fp32 elements: 8 MB ... 32 GB moved
        p.update(module="grad_clip_cuda", gpu="H100", dtype="fp32", shape={"N": n})
    (ex / "index.json").write_text(json.dumps(index))
    rows = k.sample([ex], {"H100", "H200"}, ("ok", "wrong_result"), seed=0)
    assert [(r["status"], r["problem"]) for r in rows] == [("ok", "level1/1.py")]


def test_an_evaluation_that_raises_gets_kernelbench_batch_verdict():
    """eval_kernel_against_ref raising (a kernel's illegal memory access surfacing in its cleanup, the
    moe_scatter_cuda case of the 21:20 call) is a verdict, as KernelBench's eval_from_generations.py
    records it: not compiled, not correct, the CUDA error kept; not a case without a verdict."""
    k = _script()
    crash = k.last_level_catch(RuntimeError("CUDA error: an illegal memory access was encountered"), 1.0)
    assert crash["compiled"] is False and crash["correct"] is False and "illegal memory" in crash["metadata"]["cuda_error"]
    assert list(k.last_level_catch(ValueError("bad shape"), 0.0)["metadata"]) == ["other_error"]
    row = {"status": "wrong_result", "impl": "cuda", "module": "moe_scatter_cuda", "tag": "vectorized_uint4",
           "export": "build/ex_ks", "file": "solutions/level1/1_s1.py", **crash}
    text = k.table([row], {})
    assert "no verdict (the case timed out or its process failed): 0" in text
    assert "label disagreements (ok not correct, or wrong_result correct): 0" in text
    assert "eval_kernel_against_ref raised" in text and "illegal memory" in text


def test_module_table_gives_each_case_its_verdict_and_call():
    k = _script()
    rows = [{"module": "m_cuda", "status": "ok", "compiled": True, "correct": True, "call": 1},
            {"module": "m_cuda", "status": "wrong_result", "compiled": True, "correct": True, "call": 2},
            {"module": "m_cuda", "status": "wrong_result", "compiled": None, "correct": None, "error": "deadline", "call": 2},
            {"module": "n_triton", "status": "ok", "compiled": True, "correct": False, "call": 1},
            {"module": "n_triton", "status": "wrong_result", "call": 3, **k.last_level_catch(RuntimeError("CUDA error"), 0)}]
    lines = k.module_table(rows).splitlines()
    assert lines[1].split() == ["m_cuda", "C1", "C!2", "-2"]
    assert lines[2].split() == ["n_triton", "F!1", "F3"]


def test_the_first_modules_start_after_the_pinned_cases(tmp_path):
    """--first: the modules a deadline must not leave out (those changed since the last proof) start
    right after the diagnosed cases, CUDA before Triton within each group, as sample() orders them."""
    k = _script()
    a = _export(tmp_path / "ex_ks", [("softmax_triton", "triton", "ok", "H100", 0.1, 1),
                                     ("rmsnorm_cuda", "cuda", "ok", "H100", 0.1, 1),
                                     ("selective_scan_triton", "triton", "ok", "H100", 0.1, 1),
                                     ("selective_scan_cuda", "cuda", "ok", "H100", 0.1, 1),
                                     ("f", "triton", "ok", "H100", 0.1, 2)])
    pinned = _export(tmp_path / "pinned", [("softmax_cuda", "cuda", "ok", "H100", 0.1, 1)], pinned=True)
    rows = k.sample([a, pinned], {"H100"}, ("ok",), 0)
    order = [r["module"] for r in k.run_order(rows, {"selective_scan_cuda", "selective_scan_triton", "fused"})]
    assert order == ["softmax_cuda", "selective_scan_cuda", "f", "selective_scan_triton", "rmsnorm_cuda",
                     "softmax_triton"]
    assert [r["module"] for r in k.run_order(rows, set())] == [r["module"] for r in rows]
