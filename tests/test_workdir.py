"""Agent workspaces (`kernelstrain workdir`) and the KernelBench export: the files are generated,
parse, import (PyTorch CPU where installed), carry the candidate and the reference unchanged,
and bad input exits 2 with nothing written. Running the kernels needs a GPU (scripts/)."""
import ast
import json
import re
import sys
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.gpucheck.adapters import check_shape
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task

ROOT_TESTS = Path(__file__).parent


def episodes(data):
    """Every episode: the train split's file, then the validation split's."""
    return [json.loads(line) for name in ("episodes.jsonl", "episodes.validation.jsonl") for line in (data / name).open()]


def first(data, impl):
    return next(r for r in episodes(data) if r["impl"] == impl and r["gpu"] != "MI300X")


def load(path, name):
    sys.path.insert(0, str(path.parent))
    try:
        import importlib.util
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(path.parent))


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_workdir_holds_reference_candidate_and_scripts(small_dataset, tmp_path, impl):
    row = first(small_dataset, impl)
    step = row["best"]["step"] or 1
    out = tmp_path / "w"
    assert main(["workdir", row["task_id"], "--data", str(small_dataset), "--out", str(out),
                 "--episode", row["id"], "--step", str(step)]) == 0
    task = json.loads((out / "task.json").read_text())
    module = REGISTRY[row["module"]]
    t = make_task(module, row["gpu"], row["dtype"], row["shape"])
    assert (out / "model.py").read_text() == module.reference(t)
    code = next(s["code"] for s in row["steps"] if s["step"] == step)
    assert (out / task["kernel"]).read_text() == code
    assert task["candidate"]["step"] == step and task["candidate"]["episode"] == row["id"]
    for name in ("model.py", "model_new.py", "build.py", "verify.py", "profile.py", "harness.py"):
        ast.parse((out / name).read_text())
    if impl == "triton":
        ast.parse((out / task["kernel"]).read_text())
    assert ((out / "binding" / "binding.cpp").exists()) == (impl == "cuda")
    skill = (out / "SKILL.md").read_text()
    assert "No PyTorch operators on the custom path" in skill and "read-only" in skill
    assert f"{row['best']['time_ms']:.4f} ms" in skill


def test_workdir_of_holdout_task_uses_its_baseline(small_dataset, tmp_path):
    row = json.loads((small_dataset / "tasks_holdout.jsonl").open().readline())
    out = tmp_path / "h"
    assert main(["workdir", row["task_id"], "--data", str(small_dataset), "--out", str(out)]) == 0
    task = json.loads((out / "task.json").read_text())
    assert task["split"] == row["split"] and (out / task["kernel"]).read_text() == row["baseline"]["code"]
    assert (out / "model.py").read_text() == row["reference"]


def test_model_new_imports_and_keeps_the_constructor(small_dataset, tmp_path):
    torch = pytest.importorskip("torch")
    row = first(small_dataset, "cuda")
    out = tmp_path / "c"
    assert main(["workdir", row["id"], "--data", str(small_dataset), "--out", str(out)]) == 0
    ref = load(out / "model.py", "model")
    new = load(out / "model_new.py", "model_new")
    assert issubclass(new.ModelNew, ref.Model) and callable(new.build) and callable(new.set_poison)
    torch.manual_seed(0)
    a = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(0)
    b = new.ModelNew(*ref.get_init_inputs())
    assert a.state_dict().keys() == b.state_dict().keys()
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_fused_workdir_runs_its_reference_forward_on_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    fz = tmp_path / "fz"
    assert main(["tasks", "fused", "--count", "2", "--seed", "3", "--out", str(fz), "--quiet"]) == 0
    tid = json.loads((fz / "candidates_fused.jsonl").open().readline())["id"]
    out = tmp_path / "f"
    assert main(["workdir", tid, "--data", str(fz), "--out", str(out)]) == 0
    assert "def fused_forward(self" in (out / "kernels" / "fused_reference.py").read_text()
    harness = load(out / "harness.py", "harness")
    ref = load(out / "model.py", "model")
    new = load(out / "model_new.py", "model_new")
    init = ref.get_init_inputs()
    m = harness.make_model(ref.Model, init, 0, "cpu")
    n = harness.make_model(new.ModelNew, init, 0, "cpu")
    x = harness.make_inputs(ref, 0, "cpu")
    with torch.no_grad():
        r = harness.compare(n(*harness.clone(x)), m(*x), {"atol": 1e-4, "rtol": 1e-4})
    assert r["ok"] and r["nbad"] == 0
    with torch.no_grad():   # the check itself fails a wrong output and names the element
        bad = m(*x).clone()
        bad.view(-1)[3] += 1.0
        r = harness.compare(bad, m(*x), {"atol": 1e-4, "rtol": 1e-4})
    assert not r["ok"] and r["nbad"] == 1 and r["first_bad"] == list(torch.unravel_index(torch.tensor(3), bad.shape))


CUDA_MODULES = sorted(n for n, m in REGISTRY.items() if m.impl == "cuda")


@pytest.mark.parametrize("name", CUDA_MODULES)
def test_binding_declares_every_name_it_uses(name):
    """C++ sees only declared names: every dim a shape expression or scalar value uses is a
    parameter or a `const int64_t`, and no Python `//` reaches the code."""
    m = REGISTRY[name]
    dtype = "bf16" if "bf16" in m.dtypes else m.dtypes[0]
    t = make_task(m, "H100", dtype, check_shape(m))
    src = m.entry.trampoline_binding(t)
    body = src[src.index(" forward("):src.index("PYBIND11_MODULE")]
    code = re.sub(r'"[^"]*"', '""', body)
    assert "//" not in code
    declared = set(re.findall(r"(?:torch::Tensor|int64_t|double|auto) (\w+)", code))
    for expr in re.findall(r"== \((.*?)\), \"\"\);|int64_t\)\((.*?)\)", code):
        for ident in re.findall(r"[A-Za-z_]\w*", "".join(expr)):
            assert ident in declared, f"{name}: {ident} used in {expr} but not declared"
    n_formals = len(re.search(r'extern "C" int ks_entry\((.*?)\);', src).group(1).split(","))
    assert n_formals == len(m.entry.ctypes_params(t))


def test_export_kernelbench(small_dataset, tmp_path):
    kb = tmp_path / "kb"
    assert main(["export", "kernelbench", str(small_dataset), "--out", str(kb), "--status", "ok,wrong_result"]) == 0
    index = json.loads((kb / "index.json").read_text())
    rows = episodes(small_dataset)
    assert {p["task_id"] for p in index["problems"]} >= {r["task_id"] for r in rows}
    wrong = sum(s["status"] == "wrong_result" for r in rows for s in r["steps"])
    assert 0 < sum(s["status"] == "wrong_result" for s in index["solutions"]) <= wrong
    for p in index["problems"]:
        tree = ast.parse((kb / p["file"]).read_text())
        names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names and p["file"].startswith("level1/")
    for s in index["solutions"][::7]:
        tree = ast.parse((kb / s["file"]).read_text())
        assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    best = tmp_path / "best"
    assert main(["export", "kernelbench", str(small_dataset), "--out", str(best), "--best-only"]) == 0
    sols = json.loads((best / "index.json").read_text())["solutions"]
    assert len(sols) == len(rows) and all(s["best"] and s["status"] == "ok" for s in sols)


def test_exported_solutions_import(small_dataset, tmp_path):
    torch = pytest.importorskip("torch")
    kb = tmp_path / "kb"
    assert main(["export", "kernelbench", str(small_dataset), "--out", str(kb), "--best-only"]) == 0
    index = json.loads((kb / "index.json").read_text())
    impls = ["cuda"] + (["triton"] if _has("triton") else [])
    from unittest import mock
    for impl in impls:
        s = next(x for x in index["solutions"] if x["impl"] == impl and x["gpu"] != "MI300X")
        with mock.patch("torch.utils.cpp_extension.load_inline", lambda *a, **k: None):   # no build here
            mod = load(kb / s["file"], f"sol_{impl}")
        torch.manual_seed(0)
        model = mod.ModelNew(*mod.reference_init_inputs())
        assert isinstance(model, mod.Reference)


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_workspace_kernelbench_files_follow_the_export_rules(small_dataset, tmp_path, impl):
    """kernelbench/solution.py of a single-op workspace is the export's solution of its candidate:
    no __file__, nothing KernelBench's static checker refuses, loadable by exec (CUDA: the build a
    stand-in) and by import from a file (Triton); kernelbench/problem.py is the export's problem."""
    from unittest import mock

    from kernelstrain.export.kb_form import problem_source, solution_source
    from kernelstrain.workdir.subject import find_subject
    from test_kernelbench_contract import static_problems
    row = first(small_dataset, impl)
    out = tmp_path / "w"
    assert main(["workdir", row["task_id"], "--data", str(small_dataset), "--out", str(out), "--episode", row["id"]]) == 0
    subject = find_subject(small_dataset, row["task_id"], episode=row["id"])
    sol, prob = (out / "kernelbench" / "solution.py").read_text(), (out / "kernelbench" / "problem.py").read_text()
    assert sol == solution_source(subject) and prob == problem_source(subject)
    assert "__file__" not in sol and static_problems(sol, impl) == []
    assert "kernelbench/solution.py" in (out / "SKILL.md").read_text()
    torch = pytest.importorskip("torch")
    if impl == "cuda":
        ns, built = {}, []
        with mock.patch("torch.utils.cpp_extension.load_inline", lambda *a, **k: built.append(a) or mock.Mock()):
            exec(compile(sol, "<solution>", "exec"), ns)  # noqa: S102 - the workspace's own file
        cls = ns["ModelNew"]
        assert len(built) == 1 and issubclass(cls, ns["Reference"])
    elif _has("triton"):
        cls = load(out / "kernelbench" / "solution.py", "ks_workspace_solution").ModelNew
    else:
        return
    problem = {}
    exec(compile(prob, "<problem>", "exec"), problem)  # noqa: S102
    torch.manual_seed(0)
    assert isinstance(cls(*problem["get_init_inputs"]()), torch.nn.Module)


def _has(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize("args, message", [
    (["workdir", "nope", "--data", "{data}", "--out", "{out}"], "no task or episode 'nope'"),
    (["workdir", "x", "--data", "{missing}", "--out", "{out}"], "not a directory"),
    (["workdir", "{holdout}", "--data", "{data}", "--out", "{out}", "--step", "2"], "held out"),
    (["workdir", "{episode}", "--data", "{data}", "--out", "{out}", "--step", "999"], "has no step 999"),
    (["workdir", "{episode}", "--data", "{data}", "--out", "{full}"], "not empty"),
    (["export", "kernelbench", "{data}", "--out", "{out}", "--status", "bogus"], "unknown status bogus"),
    (["export", "kernelbench", "{full}", "--out", "{out}"], "not a dataset"),
    (["export", "csv", "{data}", "--out", "{out}"], "invalid choice"),
])
def test_bad_input_exits_2_and_writes_nothing(small_dataset, tmp_path, capsys, args, message):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    holdout = json.loads((small_dataset / "tasks_holdout.jsonl").open().readline())["task_id"]
    fill = {"data": small_dataset, "out": tmp_path / "out", "missing": tmp_path / "missing", "full": full,
            "holdout": holdout, "episode": episodes(small_dataset)[0]["id"]}
    assert main([a.format(**fill) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kernelstrain: error:") and message in err
    assert not (tmp_path / "out").exists() and sorted(p.name for p in full.iterdir()) == ["keep.txt"]


NVIDIA_MODULES = sorted(n for n, m in REGISTRY.items() if "nvidia" in m.vendors)


def _subject(name, gpu="H100"):
    from kernelstrain.workdir.subject import Candidate, Subject
    m = REGISTRY[name]
    t = make_task(m, gpu, m.dtypes[0], m.shapes[0])
    v = m.variants[0]
    code = m.render(v, {p.name: p.default for p in v.params}, t, None)
    return Subject(task_id="t", kind="single", split="train", reference=m.reference(t), dtype=t.dtype, title=m.title,
                   desc="", module=m, task=t, gpu=gpu, arch=t.gpu.arch, candidate=Candidate(code, "baseline", "ok", None))


@pytest.mark.parametrize("name", NVIDIA_MODULES)
def test_model_new_calls_the_kernel_as_its_entry_takes_it(name):
    """ModelNew (workspace form, and the standalone solution where it imports here) builds from
    the reference's constructor on the meta device and calls the binding / wrapper with the
    arguments it declares: no missing attribute (gemv's W), no missing scalar (attention's
    scale), a tensor where a tensor goes, a list of tensors where the entry takes a pointer array
    (adamw)."""
    pytest.importorskip("torch")
    from kernelstrain.export.kb_form import solution_source
    from kernelstrain.workdir.dry import dry_call
    from kernelstrain.workdir.render import model_new
    s = _subject(name)
    forms = [model_new(s)] + ([solution_source(s)] if s.module.impl == "cuda" or _has("triton") else [])
    for src in forms:
        problem = dry_call(s, src)
        assert problem is None, problem


@pytest.mark.parametrize("name, broken, error", [
    ("gemv_cuda", ("self.weight", "self.W"), "AttributeError"),
    ("flash_decode_triton", (", 0.08838834764831845)", ")"), "TypeError"),
    ("flash_prefill_cuda", (", 0.08838834764831845)", ")"), "TypeError: forward() takes 4 arguments"),
])
def test_dry_call_catches_the_calls_that_failed_on_the_gpu(name, broken, error):
    """The H200 misses of the last session (ModelNew passing self.W, or no scale): the CPU
    check names them, so the device is not spent on them."""
    pytest.importorskip("torch")
    from kernelstrain.workdir.dry import dry_call
    from kernelstrain.workdir.render import model_new
    s = _subject(name)
    src = model_new(s)
    assert broken[0] in src and dry_call(s, src) is None
    assert dry_call(s, src.replace(*broken)).startswith(error)


def test_cuda_build_targets_the_task_arch():
    """sm_90a tasks build for the arch-specific target (wgmma / FP8 mma exist only there);
    older archs carry their PTX, so an A100 task runs on a newer GPU."""
    from kernelstrain.workdir.render import model_new
    assert "-gencode=arch=compute_90a,code=sm_90a" in model_new(_subject("gemm_fp8_blockwise_cuda"))
    assert "-gencode=arch=compute_80,code=[sm_80,compute_80]" in model_new(_subject("rmsnorm_cuda", "A100"))


def test_sessions_layout_gives_workdirs_and_an_export(tmp_path):
    """A kernelinfer-layout dataset (sessions.jsonl: code re-rendered from the trace) serves
    `workdir` and `export kernelbench` like episodes.jsonl does, with the same code."""
    from kernelstrain.sessions import episode_row
    data = tmp_path / "s"
    profile = ROOT_TESTS / "fixtures" / "sessions_profile.toml"
    assert main(["generate", "--seed", "0", "--config", str(profile), "--out", str(data), "--episodes", "2",
                 "--quiet", "--workers", "1"]) == 0
    assert not (data / "episodes.jsonl").exists()
    session = json.loads((data / "sessions.jsonl").open().readline())
    ep = episode_row(session)
    step = next(s["step"] for s in ep["steps"] if s["status"] == "ok")
    out = tmp_path / "w"
    assert main(["workdir", session["task_id"], "--data", str(data), "--out", str(out), "--step", str(step)]) == 0
    task = json.loads((out / "task.json").read_text())
    assert (out / task["kernel"]).read_text() == next(s["code"] for s in ep["steps"] if s["step"] == step)
    kb = tmp_path / "kb"
    assert main(["export", "kernelbench", str(data), "--out", str(kb)]) == 0
    index = json.loads((kb / "index.json").read_text())
    mine = [s for s in index["solutions"] if s["episode"] == session["id"]]
    assert mine and {s["step"] for s in mine} <= {0} | {s["step"] for s in ep["steps"] if s["status"] == "ok"}


def test_quantized_outputs_keep_their_own_tolerance(tmp_path):
    """fp8_quant's q is compared as fp8 values with one e4m3 step allowed (raw uint8 codes viewed
    as fp8), its scales as fp32: task.json says so per output and verify's comparison applies it."""
    torch = pytest.importorskip("torch")
    from kernelstrain.workdir import output_tolerances
    tols = output_tolerances(_subject("fp8_quant_cuda"))
    assert [(t["name"], t["class"], t["view"]) for t in tols] == [("q", "fp8q", "torch.float8_e4m3fn"),
                                                                   ("scales", "fp32", None)]
    assert [t["class"] for t in output_tolerances(_subject("int8_kv_quant_triton"))] == ["int8q"] * 2 + ["fp32"] * 2
    assert output_tolerances(_subject("rmsnorm_cuda")) is None
    harness = load(ROOT_TESTS.parent / "kernelstrain" / "workdir" / "templates" / "harness.py", "harness")
    ref = (torch.linspace(-400, 400, 4096)).to(torch.float8_e4m3fn)
    near = ref.view(torch.uint8).clone()
    near[100] += 1                                   # one code step: a rounding-boundary difference
    far = ref.view(torch.uint8).clone()
    far[100] += 9                                    # nine steps: wrong
    codes = ref.view(torch.uint8)
    assert harness.compare(*harness.viewed(near, codes, tols[0]), tols[0])["ok"]
    assert not harness.compare(*harness.viewed(far, codes, tols[0]), tols[0])["ok"]
    assert not harness.compare(near, codes, {"rtol": 0.0, "atol_rel": 0.0})["ok"]     # as raw codes: exact
