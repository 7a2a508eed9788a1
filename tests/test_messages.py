"""Texts in each tool's words, chat rows as a pure function of the episode row, windows."""
import json
import re
from pathlib import Path

import pytest

from kernelstrain import messages
from kernelstrain.episodes import chat_rows, weight, replay
from kernelstrain.training import is_validation
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.tasks import make_task


def test_scalar_output_mismatch_has_no_2d_index():
    m = REGISTRY["reduction_cuda"]
    task = make_task(m, "A100", "fp32", {"N": 16777216})
    text = messages.mismatch_text("wrong_init", m, task, seeded_rng("m", 1))
    assert "Mismatched elements: 1 / 1 (100.0%)" in text and "at index (0,)" in text
    diff = float(re.search(r"Greatest absolute difference: ([\d.e+-]+)", text).group(1))
    assert diff > 100          # relative to the output's scale (sqrt(N) ~ 4096), not a fixed 0.3-8


def test_mismatch_index_fits_the_output_shape():
    """An off-by-one loop bound spoils the last column of every row: both greatest differences
    sit in that column, each in a row of its own choosing (assert_close's two argmaxes)."""
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", "fp16", {"T": 4096, "D": 4096})
    rows = set()
    for seed in range(20):
        text = messages.mismatch_text("off_by_one", m, task, seeded_rng("m", seed))
        assert text.startswith("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 4096 / 16777216 (0.0%)")
        found = re.findall(r"difference: \S+ at index \((\d+), (\d+)\) \(up to 0.01 allowed\)", text)
        assert len(found) == 2 and all(d == "4095" for _, d in found)
        rows |= {t for t, _ in found}
    assert len(rows) > 20             # rows spread over the output, not always the last


def test_mismatch_numbers_are_floats_of_the_output_dtype():
    """Values print as Python prints the .item() of an fp16 / bf16 / fp32 tensor."""
    from kernelstrain.runtime_texts import in_dtype
    for name, dtype in (("rmsnorm_cuda", "fp16"), ("rmsnorm_cuda", "bf16"), ("adafactor_cuda", "fp32")):
        m = REGISTRY[name]
        task = make_task(m, "A100", dtype, m.shapes[0])
        for seed in range(10):
            text = messages.mismatch_text("missing_barrier", m, task, seeded_rng("m", seed))
            for value in re.findall(r"Greatest \w+ difference: (\S+) at", text):
                assert in_dtype(float(value), dtype) == float(value) and repr(float(value)) == value


def test_mismatch_layout_matches_torch():
    """The same AssertionError torch 2.x prints, down to the layout (skipped without torch)."""
    torch = pytest.importorskip("torch")
    a = torch.zeros(4, 8)
    b = a.clone()
    b[1, 7], b[2, 3] = 0.5, 0.25
    a[2, 3] = 0.125
    try:
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
    except AssertionError as e:
        real = f"AssertionError: {e}"
    m = REGISTRY["adafactor_cuda"]
    task = make_task(m, "A100", "fp32", m.shapes[0])
    ours = messages.mismatch_text("wrong_init", m, task, seeded_rng("m", 3))
    shape = r"AssertionError: Tensor-likes are not close!\n\nMismatched elements: \d+ / \d+ \(\d+\.\d%\)\n" \
            r"Greatest absolute difference: \S+ at index \([\d, ]+\) \(up to 0.0001 allowed\)\n" \
            r"Greatest relative difference: \S+ at index \([\d, ]+\) \(up to 0.0001 allowed\)"
    assert re.fullmatch(shape, real) and re.fullmatch(shape, ours)


def test_ptxas_lists_every_offending_instruction():
    m = REGISTRY["gemm_fp8_cuda"]
    task = make_task(m, "A100", m.dtypes[0], m.shapes[0])
    v = m.variant("wgmma_tma")
    text = messages.arch_error(v.needs - task.gpu.features, task, m, m.render(v, v.defaults(), task))
    lines = text.splitlines()
    assert len(lines) > 3 and lines[-1] == "ptxas fatal   : Ptx assembly aborted due to errors"
    assert any("Instruction 'wgmma.fence' not supported on .target 'sm_80'" in l for l in lines)
    numbers = [int(re.search(r"line (\d+);", l).group(1)) for l in lines[:-1]]
    assert numbers == sorted(numbers)


def test_faults_read_like_the_runtime():
    m = REGISTRY["grouped_gemm_cuda"]
    task = make_task(m, "H100", "fp16", m.shapes[0])
    text = messages.fault_text("missing_barrier", m, task, seeded_rng("f", 0))
    assert text.startswith("torch.AcceleratorError: CUDA error: ") and "CUDA_LAUNCH_BLOCKING=1" in text
    assert text.endswith("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    hip = make_task(m, "MI300X", "fp16", m.shapes[0])
    for seed in range(30):
        text = messages.fault_text("no_bounds_check", m, hip, seeded_rng("f", seed))
        address = re.search(r"on address 0x([0-9a-f]+)\.", text)
        assert address is None or int(address.group(1), 16) < 2 ** 47 and address.group(1).endswith("000")


def test_chat_rows_are_a_pure_function_of_the_episode_row(small_dataset):
    eps = [json.loads(l) for l in (small_dataset / "episodes.jsonl").read_text().splitlines()]
    mts = [json.loads(l) for l in (small_dataset / "sft_multiturn.jsonl").read_text().splitlines()]
    steps = [json.loads(l) for l in (small_dataset / "sft_steps.jsonl").read_text().splitlines()]
    rebuilt_mt, rebuilt_steps = [], []
    for ep in (e for e in eps if not is_validation(e["task_id"], 0.05)):     # the train split's files
        mt, st = chat_rows(ep, False, 16000)
        rebuilt_mt += mt
        rebuilt_steps += st
    assert rebuilt_mt == mts and rebuilt_steps == steps


def test_windows_stay_in_budget_and_prompts_carry_the_last_result(small_dataset):
    ep = max((json.loads(l) for l in (small_dataset / "episodes.jsonl").read_text().splitlines()),
             key=lambda e: len(e["steps"]))
    whole, st = chat_rows(ep, False, 0)
    assert len(whole) == 1
    windows, _ = chat_rows(ep, False, 6000)
    assert len(windows) > 1 and all(w["windows"] == len(windows) for w in windows)
    assert sum(m["role"] == "assistant" for w in windows for m in w["messages"]) == len(ep["steps"])
    for w in windows:
        assert w["messages"][-1]["role"] == "assistant"
        size = sum(messages.tokens(m["content"]) for m in w["messages"])
        assert size <= 6000 or sum(m["role"] == "assistant" for m in w["messages"]) == 1
    assert "\n\nCurrent best (" in windows[1]["messages"][1]["content"]
    for row, (s, v) in zip(st[1:], list(replay(ep))[:-1]):
        assert "\nLast result:\nStep " + str(s["step"]) in row["messages"][1]["content"]
    for row, (s, v) in zip(st, replay(ep)):
        assert row["weight"] == weight(s, v) == row["messages"][-1]["weight"]
        assert row["weight"] == 0 or s["status"] == "ok"


def test_a_load_inline_candidate_s_build_error_is_load_inline_s():
    """A fused CUDA candidate is a Python file whose CUDA load_inline builds: nvcc's text reaches the
    harness inside load_inline's RuntimeError, naming the extension's cuda.cu in torch's cache (whose
    line numbers are the file's), after ninja's nvcc command for the card's compute capability, and
    ending on ninja's last line (torch's layout, read from a real failed load_inline build here)."""
    from dataclasses import replace as with_fields
    from kernelstrain import slips
    from kernelstrain.episodes import as_built
    from kernelstrain.fused.module import module_name
    from kernelstrain.schema import Step

    module = REGISTRY[module_name(0, 3, "cuda")]
    task = make_task(module, "A100", module.dtypes[0], module.shapes[0])
    v = module.variants[-1]
    code = module.render(v, v.defaults(), task)
    broken, text = slips.apply(code, "cuda", slips.encode("semicolon", 0))
    name = re.search(r'name="(\w+)"', broken).group(1)
    step = Step(step=3, kind="structural", tag=v.tag, params=v.defaults(), code=broken, status="compile_error",
                failure="syntax", bug=None, typo=slips.encode("semicolon", 0), time_ms=None, smem_bytes=0, regs=32,
                error=text, kept=False, best_ms=1.0, elapsed_s=60)
    built = as_built(step, task.gpu.arch).error
    where = f"/root/.cache/torch_extensions/py312_cu130/{name}/cuda.cu"
    first, failed, command = built.split("\n")[:3]
    assert first.startswith(f"RuntimeError: Error building extension '{name}': [1/3] /usr/local/cuda/bin/nvcc ")
    assert failed == "FAILED: [code=2] cuda.cuda.o " and first.endswith(command)
    assert " -gencode=arch=compute_80,code=sm_80 " in command and command.count("-gencode") == 1
    assert command.endswith(f"-O3 -std=c++17 -c {where} -o cuda.cuda.o ")
    line = int(re.search(r"cuda\.cu\((\d+)\): error", built).group(1))
    assert built.split("\n")[3] == text.split("\n")[0].replace("candidate.cu", where)
    assert f'in the compilation of "{where}".' in built and "candidate.cu" not in built
    assert built.endswith("main.o \nninja: build stopped: subcommand failed.")
    assert 1 <= line <= len(broken.split("\n"))
    assert not messages.fails_at_launch("syntax", built)
    # a launch's error is the launch's, and a CUDA candidate without load_inline keeps nvcc's own text
    launch = with_fields(step, failure="resources", error="torch.AcceleratorError: CUDA error: invalid argument")
    assert as_built(launch, task.gpu.arch) is launch
    plain = REGISTRY["rmsnorm_cuda"]
    plain_task = make_task(plain, "A100", "fp16", plain.shapes[0])
    assert messages.load_inline_error(text, plain.render(plain.variants[0], plain.variants[0].defaults(), plain_task),
                                      "sm_80") == text


@pytest.mark.parametrize("name", ["cand_3_semicolon", "cand_5_identifier"])
def test_a_load_inline_build_error_is_the_one_torch_printed_on_the_h100(name):
    """Device job reader/j1 (torch 2.11.0+cu130, ninja 1.13, an H100, 2026-12-07) built two fused
    candidates with a slip through load_inline: its RuntimeError differed from ours in four lines
    (nvcc's -MD -MF and -ccbin /opt/gcc/bin/gcc, one -gencode compute_90a / sm_90a, ninja's
    `FAILED: [code=2]`, main.cpp built by /opt/gcc/bin/g++); nvcc's own block was identical."""
    d = Path(__file__).parent / "fixtures" / "load_inline_h100"
    real = (d / f"{name}.h100.txt").read_text().split("\n", 1)
    assert real[0] == "builtins.RuntimeError"           # the job's first line: the exception's type
    ours = messages.load_inline_error((d / f"{name}.nvcc.txt").read_text(), (d / f"{name}.py").read_text(), "sm_90a")
    assert ours == "RuntimeError: " + real[1].rstrip("\n")


def test_a_fused_programs_prompt_asks_for_the_solution_file_it_is_answered_with():
    """A fused program's baseline is the eager PyTorch program and every answer a KernelBench solution
    (Python, class ModelNew): the prompt said "make this CUDA C++ kernel faster ... Reply with the
    complete CUDA C++ source" and fenced that Python as ```cuda. A kernel task keeps its own words."""
    from kernelstrain.fused.module import module_name

    for impl, kernels in (("cuda", "CUDA C++"), ("triton", "Triton")):
        module = REGISTRY[module_name(0, 12112, impl)]
        task = make_task(module, "A100", module.dtypes[0], module.shapes[0])
        base = module.variants[0]
        prompt = messages.task_prompt(module, task, module.render(base, base.defaults(), task), 0.14,
                                      module.reference(task))
        assert prompt.startswith(f"Task: make this PyTorch program faster with custom {kernels} kernels — ")
        assert prompt.endswith("Reply with the complete solution file (Python: class ModelNew, "
                               + ("its CUDA kernels built with load_inline" if impl == "cuda" else
                                  "its Triton kernels in the file") + ") in one fenced block.")
        assert "```cuda" not in prompt and prompt.count("```python") == 2
        top = module.variants[-1]
        assert messages.fence(module.render(top, top.defaults(), task), impl).startswith("```python\n")
    kernel = REGISTRY["rmsnorm_cuda"]
    task = make_task(kernel, "A100", "fp16", kernel.shapes[0])
    code = kernel.render(kernel.variants[0], kernel.variants[0].defaults(), task)
    prompt = messages.task_prompt(kernel, task, code, 0.1, kernel.reference(task))
    assert prompt.startswith("Task: make this CUDA C++ kernel faster — ") and "```cuda\n" in prompt
    assert prompt.endswith("Reply with the complete CUDA C++ source in one fenced block.")


def test_a_refused_launch_reads_as_torch_printed_it_on_the_h100():
    """Device job reader/j2 (torch 2.11.0+cu130, an H100, 2026-12-07) ran fused-s8383-000000 step 4, whose
    gemm kernel launches 2048 threads a block under __launch_bounds__(2048): torch.allclose, the next launch
    check, raised "CUDA error: invalid argument" with the asynchronous-report note. We printed "invalid
    configuration argument" with a CUDA_LOG_FILE line."""
    from kernelstrain.ops.base import Launch
    d = Path(__file__).parent / "fixtures" / "launch_h100"
    kind, real = (d / "h100.txt").read_text().split("\n", 1)
    assert "__launch_bounds__(K1_GEMM_THREADS)" in (d / "cand.py").read_text()
    m = REGISTRY["rmsnorm_cuda"]
    task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
    launch = Launch(grid=64, threads=2048)
    assert messages.resources_error(launch, m, task) == f"{kind}: {real.rstrip()}"
