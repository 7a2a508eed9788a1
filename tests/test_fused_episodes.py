"""Episodes on fused programs (--config fused): the synthesized ladders, their solutions, bugs,
times, the degenerate-program rules, and a tiny run through every reading command."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.engine import Episode
from kernelstrain.fused.degenerate import reason
from kernelstrain.fused.kernels import kernels_of
from kernelstrain.fused.module import FusedModule, fused_module, module_name
from kernelstrain.fused.tasks import usable
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.profiles import load_profile
from kernelstrain.tasks import make_task

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = range(24)


def _modules():
    for index in PROGRAMS:
        for impl in ("cuda", "triton"):
            yield fused_module(module_name(0, index, impl))


def _task(m, gpu="H100"):
    return make_task(m, gpu, m.dtypes[0], m.shapes[0])


def _static_rules(code: str, impl: str) -> list[str]:
    """KernelBench's static checker's strict rules, in our words: comments (# and //) stripped line by
    line; no try/except or pass; CUDA: a __global__ kernel and load_inline; Triton: @triton.jit and tl.*."""
    text = "\n".join(line.split("#")[0].split("//")[0] for line in code.split("\n"))
    out = [rule for rule, bad in (("try/except", re.search(r"\btry\s*:|\bexcept\b", text)),
                                  ("pass", re.search(r"\bpass\b", text))) if bad]
    if impl == "cuda" and ("__global__" not in text or "load_inline" not in text):
        out.append("cuda kernel")
    if impl == "triton" and not (re.search(r"@triton\.jit", text) and re.search(r"\btl\.\w+", text)):
        out.append("triton kernel")
    return out


def test_registry_makes_fused_modules_on_demand_and_lists_only_its_own():
    m = REGISTRY["fused_s0_00001_cuda"]
    assert isinstance(m, FusedModule) and REGISTRY.get("fused_s0_00001_cuda") is m
    assert "fused_s0_00001_cuda" not in REGISTRY and len(REGISTRY) == 75
    assert REGISTRY.get("no_such_module") is None


def test_every_rung_renders_a_kernelbench_solution():
    seen = 0
    for m in _modules():
        task = _task(m)
        assert m.variants[0].tag == "eager"
        for v in m.variants[1:]:
            for bug in (None, *v.bugs):
                code = m.render(v, v.defaults(), task, bug)
                compile(code, m.name, "exec")            # valid Python, as KernelBench loads it
                assert "class ModelNew(nn.Module)" in code and "__file__" not in code
                assert _static_rules(code, m.impl) == [], (m.name, v.tag, bug)
                if m.impl == "cuda":     # the CUDA string opens on line 4: nvcc's line numbers are the file's
                    assert code.split("\n")[3] == 'cuda_source = r"""'
                seen += 1
    assert seen > 100


def test_eager_rung_is_the_pytorch_eager_time_and_ok_steps_respect_the_roofline():
    for m in _modules():
        task = _task(m, "H200")
        eager, compiled = m.torch_ms(task)
        assert m.simulate(m.variants[0], {}, task).time_ms == eager and compiled > 0
        floor = max(m.cost(task).flops / task.gpu.peak(m.variants[0].path), m.cost(task).bytes / (task.gpu.bw_tbs * 1e12)) * 1e3
        for v in m.variants:
            r = m.simulate(v, v.defaults(), task)
            assert not r.ok or r.time_ms >= floor


def test_bugs_are_offered_only_where_they_break_the_program():
    for m in _modules():
        for v in m.variants:
            geo = [m.view.kernel_geometry(k) for k in kernels_of(m._plans.get(v.tag, []))]
            if "broadcast_index" in v.bugs or "wrong_reduce_dim" in v.bugs:
                assert any(g.inner > 1 for g in geo)
            if "missing_tail" in v.bugs:       # only for a vector width that leaves a tail
                (_, param, least), = v.bug_params
                assert param == "vec" and any(g.numel % least for g in geo)
            if "no_bounds_check" in v.bugs:
                assert m.impl == "triton" and any(g.C & (g.C - 1) for g in geo)


def test_the_engine_drives_fused_episodes_unchanged():
    for name in ("fused_s0_00001_cuda", "fused_s0_00007_triton", "fused_s0_00006_cuda"):
        m = REGISTRY[name]
        streams = {s: seeded_rng("test", name, s) for s in ("policy", "noise", "clock", "wording")}
        ep = Episode(m, _task(m), streams, 30, 0.1, 0.08, search=load_profile("fused").search)
        steps = ep.run()
        assert ep.base.variant.tag == "eager" and steps
        assert all(s.status == "ok" for s in steps if s.kept)
        assert all((s.time_ms is None) == (s.status != "ok") for s in steps)


def test_degenerate_programs_are_rejected():
    assert reason([{"op": "softmax", "params": {"dim": -1}}, {"op": "relu", "params": {}}])
    assert reason([{"op": "sigmoid", "params": {}}, {"op": "clamp", "params": {"clamp_min": -1.0, "clamp_max": 2.0}}])
    assert reason([{"op": "sigmoid", "params": {}}, {"op": "clamp", "params": {"clamp_min": 0.5, "clamp_max": 2.0}}]) is None
    assert reason([{"op": "log_softmax", "params": {"dim": 1}}, {"op": "logsumexp", "params": {"dim": 1}}])
    assert reason([{"op": "gelu", "params": {}}, {"op": "relu", "params": {}}]) is None


def _tiny_profile(tmp_path: Path, programs: int) -> Path:
    text = (ROOT / "configs" / "fused.toml").read_text().replace('name = "fused"', 'name = "fused_tiny"')
    text = re.sub(r"(?m)^episodes = \d+", f"episodes = {programs}", text)
    text = re.sub(r"(?m)^programs = \d+", f"programs = {programs}", text)
    path = tmp_path / "fused_tiny.toml"
    path.write_text(text)
    return path


def test_fused_profile_tasks_are_distinct_usable_programs(tmp_path):
    from kernelstrain.plan import make_plan
    assert load_profile("fused").fused.programs == 6000
    plan = make_plan(load_profile(_tiny_profile(tmp_path, 30)), 0)
    ops = [tuple(REGISTRY[t.module].view.ops) for t in plan.train]
    assert len(ops) == 30 and len(set(ops)) == 30
    assert all(usable(REGISTRY[t.module], t) and not reason(REGISTRY[t.module].view.steps) for t in plan.train)


def test_tiny_fused_run_through_the_reading_commands(tmp_path, capsys):
    profile = _tiny_profile(tmp_path, 40)
    out = tmp_path / "data"
    assert main(["generate", "--config", str(profile), "--seed", "0", "--episodes", "4", "--out", str(out), "--quiet"]) in (0, 1)
    assert main(["validate", str(out)]) == 0
    assert main(["stats", str(out)]) == 0
    ep = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    assert ep["torch_eager_ms"] and ep["torch_compile_ms"] and ep["baseline"]["tag"] == "eager"
    assert main(["show", str(out), ep["id"]]) == 0
    wd = tmp_path / "wd"
    assert main(["workdir", ep["id"], "--data", str(out), "--out", str(wd)]) == 0
    best = next(s for s in ep["steps"] if s["step"] == ep["best"]["step"]) if ep["best"]["step"] else ep["baseline"]
    assert (wd / "kernels" / "fused_candidate.py").read_text() == best["code"]
    kb = tmp_path / "kb"
    assert main(["export", "kernelbench", str(out), "--out", str(kb)]) == 0
    index = json.loads((kb / "index.json").read_text())
    assert index["solutions"] and all(p["level"] == 2 for p in index["problems"])
    for s in index["solutions"]:
        assert _static_rules((kb / s["file"]).read_text(), s["impl"]) == []


@pytest.mark.skipif(importlib.util.find_spec("triton") is None or importlib.util.find_spec("torch") is None,
                    reason="the Triton interpreter check needs triton and torch (pip install 'kernelstrain[verify]' torch)")
def test_triton_candidates_match_eager_under_the_interpreter_and_bugs_do_not():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fused_check.py"), "interp", "--programs", "3",
                        "--max-numel", "70000"], capture_output=True, text=True, cwd=ROOT, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"interpreter: (\d+) of \1 candidates", r.stdout)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the execution filter's checks need torch")
def test_outputs_a_zero_or_constant_kernel_passes_are_rejected():
    import torch

    from kernelstrain.fused.execute import kb_trivial
    torch.manual_seed(0)
    y = torch.randn(64, 32)
    assert kb_trivial(y, "fp32") is None and kb_trivial(y, "bf16") is None
    assert kb_trivial(y * 2e-3, "bf16") == "zero_passes" and kb_trivial(y * 2e-3, "fp32") is None   # max |y| ~ 7e-3
    assert kb_trivial(3.0 + y * 1e-3, "bf16") == "constant_passes" and kb_trivial(3.0 + y * 1e-3, "fp32") is None


def test_a_host_bound_call_gets_one_probe_then_only_rewrites_whose_calls_issue_less():
    """A fused call whose host issues it slower than its kernels run (fused/timing.call_ms) is not moved by any
    kernel parameter: after one fruitless probe the engineer writes only rungs whose call issues less, or stops
    (Episode.host_bound, the launch floor's rule). On abca2a0 `open_ideas` overrode the fused profile's patience
    of one: each kernel parameter of such a best got a probe, up to seven in a row inside the noise (fused seed
    8181: the final best host-bound in 58 of 60 episodes, 120 of the 179 post-best steps such tunes)."""
    from kernelstrain.calibration import FIT
    from kernelstrain.engine import Candidate
    search, checked = load_profile("fused").search, 0
    for m in _modules():
        task = _task(m)
        if not usable(m, task):
            continue
        streams = {s: seeded_rng("test-host", m.name, s) for s in ("policy", "noise", "clock", "wording")}
        ep = Episode(m, task, streams, 40, 0.0, 0.0, search=search)
        gap = FIT.extra_launch_us[task.gpu.vendor] * 1e-3
        best, fruitless = ep.base, False
        for s in ep.run():           # (a re-run of the best, rebench, restores it after a rewrite that lost past RESTORE)
            host = m.host_us(best.variant.tag)
            if fruitless and s.kind != "rebench" and host * 1e-3 >= sum(t + gap for t in m.kernels_ms(best.variant.tag, best.params, task)):
                checked += 1
                assert s.tag != best.variant.tag and m.host_us(s.tag) < host, (m.name, s.step, s.tag, s.params)
            if s.kept:
                best, fruitless = Candidate(next(v for v in ep.ladder if v.tag == s.tag), s.params), False
            else:
                fruitless = fruitless or s.status == "ok"
    assert checked > 0
