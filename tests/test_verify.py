"""`verify` on a small generated dataset: real compilers agree with every recorded status."""
import json
import shutil

import pytest

from kernelstrain.cli import main
from kernelstrain.verify import pick_sample, recorded_class

try:
    import triton  # noqa: F401
    HAVE_TRITON = True
except ImportError:
    HAVE_TRITON = False


def test_sample_is_stratified_and_deterministic(small_dataset):
    a = pick_sample(small_dataset, 25, seed=0)
    assert a == pick_sample(small_dataset, 25, seed=0) and len(a) == 25
    assert a != pick_sample(small_dataset, 25, seed=1)


def test_sample_covers_every_outcome_and_target_family_first(small_dataset):
    """A sample of one step a stratum reaches every (outcome, target family) stratum: each failure
    class on each tool (old: modules first, and a class rare in every module could be missed);
    a sample of two a stratum takes at least two where a stratum has them, from two modules where it has."""
    from kernelstrain.gpus import GPUS
    from kernelstrain.ops import REGISTRY
    rows = [json.loads(line) for name in ("episodes.jsonl", "episodes.validation.jsonl")   # numbered on, as verify does
            for line in (small_dataset / name).read_text().splitlines()]
    strata = {}
    for n, ep in enumerate(rows, 1):
        family = f"{REGISTRY[ep['module']].impl}/{GPUS[ep['gpu']].vendor}"
        for i, s in enumerate(ep["steps"]):
            if s["kind"] != "rebench":
                status = s["status"] if s["failure"] is None else f"{s['status']}/{s['failure']}"
                strata.setdefault((status, family), []).append(((n, i), ep["module"]))
    assert len(strata) > 4
    picked = pick_sample(small_dataset, len(strata), seed=0)
    assert all(sum(key in picked for key, _ in v) == 1 for v in strata.values())
    twice = pick_sample(small_dataset, 2 * len(strata), seed=0)
    assert set(picked) <= set(twice)
    for v in strata.values():
        chosen = [m for key, m in v if key in twice]
        assert len(chosen) >= min(2, len(v)) and len(set(chosen)) >= min(2, len({m for _, m in v}))


def test_sample_spreads_over_gpus(tmp_path, monkeypatch):
    """Within a module, picks go round the GPUs in a seeded order (old: each module's first picks
    all fell on the alphabetically first GPU)."""
    import kernelstrain.verify as verify
    gpus, rows = ["A10", "A100", "H100", "RTX5090"], []
    for m in range(8):
        for g in gpus:
            rows.append({"module": f"mod{m}_cuda", "gpu": g,
                         "steps": [{"kind": "joint", "tag": t, "status": "ok", "failure": None} for t in ("a", "b")]})
    # rows of no real module: the dataset reader (its manifest and layout) stands aside
    monkeypatch.setattr(verify, "_rows", lambda data: (data / "episodes.jsonl", enumerate(rows, 1), lambda ep: ep["steps"]))
    gpu_of = {n: r["gpu"] for n, r in enumerate(rows, 1)}
    first = pick_sample(tmp_path, 8, seed=0)
    assert len({gpu_of[n] for n, _ in first}) > 1
    four = pick_sample(tmp_path, 32, seed=0)
    for m in range(8):
        assert sorted(gpu_of[n] for n, _ in four if rows[n - 1]["module"] == f"mod{m}_cuda") == gpus


def test_recorded_error_classes():
    assert recorded_class("ptxas error   : Entry function 'k' uses too much shared data (0xfa00 bytes, 0xc000 max)", "smem") == "smem"
    assert recorded_class("ptxas /tmp/x.ptx, line 3; error   : Instruction 'wgmma.fence' not supported on .target 'sm_80'", "arch") == "arch"
    assert recorded_class('candidate.cu(12): error: identifier "row" is undefined', "syntax") == "syntax"
    assert recorded_class("cudaFuncSetAttribute(k, MaxDynamicSharedMemorySize, 1) failed: invalid argument", "smem") == "launch"
    # a typo nvcc reports on the opt-in line quotes it: still a syntax error
    assert recorded_class('candidate.cu(176): error: identifier "smem" is undefined\n      cudaFuncSetAttribute('
                          'k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) failed: x;', "syntax") == "syntax"
    assert recorded_class("RuntimeError: CUDA error: too many resources requested for launch", "resources") == "launch"
    assert recorded_class("RuntimeError: CUDA error: invalid argument\nCUDA kernel errors ...", "smem") == "launch"
    assert recorded_class("torch.AcceleratorError: CUDA error: invalid argument\nSearch for ...", "smem") == "launch"
    assert recorded_class("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 1, "
                          "Hardware limit: 0.", "smem") == "smem"


def test_feedback_and_verify_read_the_stage_from_the_failure_class():
    """The feedback's "launch failed" / "compile error" and verify's launch-time class are one
    test (messages.fails_at_launch): a typo on the opt-in line is a compile error, the opt-in
    slip's runtime "invalid argument" a launch failure."""
    from kernelstrain.episodes import Verdict
    from kernelstrain.messages import step_feedback
    verdict = Verdict(1.0, 0, 0, None, 0.01, 0.02, False)
    cases = [("syntax", 'k.cu(176): error: identifier "smem" is undefined\n  cudaFuncSetAttribute(k, '
                        'cudaFuncAttributeMaxDynamicSharedMemorySize, smem) failed: ', "compile error", "syntax"),
             ("smem", "RuntimeError: CUDA error: invalid argument\nCUDA kernel errors might be ...", "launch failed", "launch"),
             ("resources", "RuntimeError: Triton Error [CUDA]: too many resources requested for launch", "launch failed", "launch"),
             ("smem", "ptxas error   : Entry function 'k' uses too much shared data (0xfa00 bytes, 0xc000 max)",
              "compile error", "smem")]
    for failure, error, said, cls in cases:
        step = {"step": 3, "kind": "joint", "status": "compile_error", "failure": failure, "error": error, "best_ms": 1.0}
        assert step_feedback(step, verdict, 2.0).split("\n", 1)[0] == f"Step 3: {said}."
        assert recorded_class(error, failure) == cls


@pytest.mark.skipif(shutil.which("nvcc") is None or not HAVE_TRITON, reason="needs nvcc and triton")
def test_verify_small_sample_agrees(small_dataset, tmp_path, capsys):
    report = tmp_path / "report.json"
    code = main(["verify", str(small_dataset), "--sample", "14", "--jobs", "2", "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    assert data["compiled"] == 14 and not data["problems"]


def test_verify_reports_a_disagreement(dataset_copy, capsys):
    """An ok step whose code cannot compile is a disagreement: exit 1."""
    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc")
    path = dataset_copy / "episodes.jsonl"
    for line in path.read_text().splitlines():
        ep = json.loads(line)
        if ep["impl"] == "cuda" and ep["gpu"] != "MI300X":
            break
    for s in ep["steps"]:
        if s["status"] != "compile_error":       # ok and wrong_result code must compile
            s["code"] += "\nthis is not C++;\n"
    path.write_text(json.dumps(ep, ensure_ascii=False, separators=(",", ":")) + "\n")
    assert main(["verify", str(dataset_copy), "--sample", "6", "--jobs", "2"]) == 2   # not what the recipe renders
    assert "--trust-dataset" in capsys.readouterr().err
    code = main(["verify", str(dataset_copy), "--sample", "6", "--jobs", "2", "--trust-dataset"])
    out = capsys.readouterr().out
    assert code == 1 and "does not compile" in out


def test_a_fused_solution_is_skipped_with_its_reason():
    """verify compiles op-module candidates; a fused program's candidate is a whole KernelBench
    solution file, which it reports as skipped (compiled as CUDA it read as false disagreements)."""
    from kernelstrain.fused.module import fused_module, module_name
    from kernelstrain.verify import FUSED_SKIP, _compile_job
    name = module_name(0, 0, "cuda")
    assert fused_module(name) is not None
    assert _compile_job({"module": name, "gpu": "H100", "code": "import torch\n"})["skipped"] == FUSED_SKIP


def test_triton_compiles_refuse_the_interpreter_and_cache_nothing(monkeypatch, tmp_path):
    """With TRITON_INTERPRET=1 in the process @triton.jit makes interpreter functions, which compile for no target:
    every candidate "failed" with the interpreter's AttributeError and that answer was cached as the compiler's (a
    test importing an interpreter script left it set; later verify runs read the poisoned cache)."""
    from kernelstrain import compilers
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(compilers, "CACHE_DIR", tmp_path)
    with pytest.raises(compilers.MissingCompiler, match="TRITON_INTERPRET"):
        compilers.compile_triton("import triton\n", [], "sm_90a")
    assert not list(tmp_path.iterdir())
