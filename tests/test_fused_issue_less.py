"""Rungs whose fused call issues less on the host: fused_rows (consecutive row kernels in one, Triton) and the
CUDA graph rungs (graphs.py; checked on an H100: fused j1, measurements/h100_fused_graph_j1.jsonl)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.engine import Episode
from kernelstrain.fused.kernels import kernels_of
from kernelstrain.fused.module import GRAPHED, FusedModule, fused_module, module_name
from kernelstrain.fused.tasks import usable
from kernelstrain.fused.timing import HOST_DISPATCH_US, HOST_MODULE_US, HOST_REPLAY_US, HOST_TRITON_US
from kernelstrain.plan import seeded_rng
from kernelstrain.profiles import load_profile
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parent.parent
NORM_THEN_LOGSUMEXP = 9211       # layer_norm -> logsumexp -> gelu (seed 0): two row kernels in fused_row


def _task(m, gpu="H100"):
    return make_task(m, gpu, m.dtypes[0], m.shapes[0])


def _tags(m) -> list:
    return [v.tag for v in m.variants]


def test_fused_rows_keeps_the_row_in_registers_from_the_norm_to_the_reduction():
    """fused_row writes the normalized row out and a second kernel reads it back for the logsumexp; fused_rows is
    one kernel (one Triton launch fewer on the host, one round trip of the row fewer on the GPU), Triton only."""
    m = fused_module(module_name(0, NORM_THEN_LOGSUMEXP, "triton"))
    assert "fused_rows" in _tags(m) and _tags(m).index("fused_rows") > _tags(m).index("fused_row")
    assert [k.steps for k in kernels_of(m._plans["fused_row"])] == [(0,), (1, 2)]
    assert [k.steps for k in kernels_of(m._plans["fused_rows"])] == [(0, 1, 2)]
    assert m.host_us("fused_row") - m.host_us("fused_rows") == HOST_TRITON_US
    task = _task(m)
    v = m.variant("fused_rows")
    code = v.source(v.defaults(), task)
    assert code.count("@triton.jit") == 1 and code.index("rstd = ") < code.index("s = tl.sum") < code.index("tl.store(y_ptr + rows")
    assert "fused_rows" not in _tags(fused_module(module_name(0, NORM_THEN_LOGSUMEXP, "cuda")))
    moved = {t: sum(km[2].bytes for km in m._kernel_models(t, m.variant(t).defaults(), task)) for t in ("fused_row", "fused_rows")}
    assert moved["fused_rows"] < moved["fused_row"]        # the normalized row is neither written nor read again


@pytest.mark.slow
def test_fused_rows_match_the_reference_under_the_interpreter():
    """TRITON_INTERPRET=1 on the CPU: fused_rows at its defaults and another launch shape against the reference
    Model (KernelBench's tolerance, two seeded trials each); every bug the rung offers fails."""
    pytest.importorskip("triton")
    run = subprocess.run([sys.executable, "scripts/fused_rows_interpret.py", "--index", f"{NORM_THEN_LOGSUMEXP},10682"],
                         capture_output=True, text=True, timeout=1200, cwd=ROOT, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 problems" in run.stdout and run.stdout.count('"bug": null') >= 4


def test_the_graph_rungs_replay_the_leanest_plan_and_the_gemm_epilogue():
    m = FusedModule(0, 1, "triton")         # linear -> gelu -> ... : a library GEMM and a gemm_epilogue plan
    assert _tags(m)[-2:] == ["cuda_graph", "cuda_graph_gemm"]
    tags = _tags(m)
    assert m._kernel_tag("cuda_graph") == tags[tags.index("gemm_epilogue") - 1]      # the leanest plan keeping cuBLAS
    assert m._kernel_tag("cuda_graph_gemm") == "gemm_epilogue"
    assert usable(m, _task(m)) and [v.tag for v in m.variants if v.tag in GRAPHED] == list(GRAPHED)
    assert "cuda_graph_gemm" not in _tags(FusedModule(0, 9, "triton"))      # layer_norm -> ...: no GEMM to write


def test_the_task_set_is_the_fusion_ladders(monkeypatch):
    """tasks.usable asks the fusion rungs only: a program no fusion speeds up by tasks.ROOM is not a task because a
    graph would (the task set is the same with and without the graph rungs)."""
    import kernelstrain.fused.tasks as tasks
    from kernelstrain.fused.module import FusedModule as FM
    checked = 0
    for index in range(40):
        m = FM(0, index, "cuda")
        plain = [v for v in m.variants if v.tag not in GRAPHED]
        monkeypatch.setattr(m, "variants", tuple(plain))
        without = tasks.usable(m, _task(m))
        monkeypatch.undo()
        checked += without != tasks.usable(m, _task(m))
    assert checked == 0


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_a_graphed_call_issues_one_replay_and_a_copy_an_input(impl):
    """The host: ModelNew's call, a copy_ an input and the replay; the GPU: the base plan's kernels and a copy kernel
    an input; the call the longer of the two (timing.call_ms)."""
    m = FusedModule(0, 29, impl)         # bmm -> ... : two inputs
    task, base = _task(m), m._kernel_tag("cuda_graph")
    params = m.variant("cuda_graph").defaults()
    assert params == m.variant(base).defaults()
    n = len(m.view.program.inputs)
    assert n == 2 and m.host_us("cuda_graph") == HOST_MODULE_US + n * HOST_DISPATCH_US + HOST_REPLAY_US
    kernels, plan = m.kernels_ms("cuda_graph", params, task), m.kernels_ms(base, params, task)
    assert kernels[:len(plan)] == plan and len(kernels) == len(plan) + n
    # Triton's plan (a bmm and a Triton launch) issues more than the replay and two copies; CUDA's (a bmm and an
    # extension call) less: no engineer captures that call (the engine's could_beat does not climb to it)
    assert (m.host_us("cuda_graph") < m.host_us(base)) == (impl == "triton")


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_a_graphed_solution_replays_its_base_plan(impl):
    """`run` is the base rung's forward, line for line; forward copies the inputs in and replays; the CUDA kernels
    launch on PyTorch's current stream (the capture's: a legacy-stream launch fails capture); no side stream (which
    KernelBench's static checker flags as stream injection), no try/except."""
    m = FusedModule(0, 4, impl)
    task = _task(m)
    v, base = m.variant("cuda_graph"), m.variant(m._kernel_tag("cuda_graph"))
    code, plain = v.source(v.defaults(), task), base.source(base.defaults(), task)
    body = plain[plain.rindex("    def forward(self, x):\n") + len("    def forward(self, x):\n"):]      # ModelNew's (the last)
    assert "    def run(self, x):\n" + body.rstrip("\n") in code
    assert "s.copy_(a)" in code and "self.graph.replay()" in code and "torch.cuda.graph(self.graph)" in code
    assert not re.search(r"torch\.cuda\.Stream\s*\(|wait_stream|with\s+torch\.cuda\.stream|\btry\s*:", code)
    if impl == "cuda":
        launches = re.findall(r"<<<(.+?)>>>", code)
        assert launches and all(s.endswith("c10::cuda::getCurrentCUDAStream()") for s in launches)
        assert "#include <c10/cuda/CUDAStream.h>" in code
        assert not re.findall(r"<<<(.+?)>>>", plain)[0].endswith("getCurrentCUDAStream()")


def test_a_host_bound_episode_climbs_to_the_graph():
    """A host-bound best whose call a replay issues faster is captured: some episode of the first programs writes a
    graph rung after its fusion rungs."""
    search, climbed = load_profile("fused").search, 0
    for index in range(12):
        m = FusedModule(0, index, "triton")
        task = _task(m)
        if not usable(m, task):
            continue
        streams = {s: seeded_rng("test-graph", m.name, s) for s in ("policy", "noise", "clock", "wording")}
        steps = list(Episode(m, task, streams, 40, 0.0, 0.0, search=search).run())
        tags = [s.tag for s in steps]
        climbed += any(t in GRAPHED for t in tags)
    assert climbed > 0


def test_a_graph_is_recorded_after_the_kernels_it_replays_have_run():
    """An expert-first engineer's first leap goes to the top rung that writes kernels (Episode.leap_target): a CUDA
    graph captures a call whose kernels already ran correct, so no episode's first steps write a graph rung before
    a kernel rung of the same episode has run ok (on 13da929's engine a quarter of fused episodes did)."""
    search, early, episodes = load_profile("fused").search, 0, 0
    for index in range(24):
        for impl in ("cuda", "triton"):
            m = FusedModule(0, index, impl)
            task = _task(m)
            if not usable(m, task):
                continue
            streams = {s: seeded_rng("test-leap", m.name, s) for s in ("policy", "noise", "clock", "wording")}
            steps = list(Episode(m, task, streams, 12, 0.0, 0.0, search=search).run())
            episodes += 1
            for s in steps:
                if s.tag in GRAPHED:
                    early += not any(t.status == "ok" and t.tag not in GRAPHED and t.step < s.step for t in steps)
                    break
    assert episodes >= 20 and early == 0, (episodes, early)
