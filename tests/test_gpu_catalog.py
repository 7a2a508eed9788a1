"""Adding a GPU is one catalog row: a new row in gpus.GPUS (monkeypatched here) gives tasks,
simulations, renders, compiler texts, a profile and episodes on it, with no other edit."""
import json
from dataclasses import replace

import pytest

from kernelstrain import gpus, messages
from kernelstrain.cli import main
from kernelstrain.episodes import build_episode
from kernelstrain.mutations import break_identifier
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import make_plan, select_combos
from kernelstrain.profiles import load_profile
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

# an L40S-like Ada card (sm_89: fp8, no wgmma/TMA) and a CDNA-like AMD part of a new arch
L40S = replace(gpus.GPUS["RTX4090"], name="L40S", sms=142, bw_tbs=0.864, l2_mb=96,
               peak_tflops={"fp32": 91.6, "fp16": 181, "fp8": 362, "int8": 362, "fp4": 0.0})
MI355 = replace(gpus.GPUS["MI300X"], name="MI355", arch="gfx950", sms=256, bw_tbs=8.0, smem_per_block=163840,
                smem_per_sm=163840)


@pytest.fixture
def catalog(monkeypatch):
    for g in (L40S, MI355):
        monkeypatch.setitem(gpus.GPUS, g.name, g)


def test_a_new_row_gives_tasks_simulations_and_renders(catalog):
    for name in ("rmsnorm_cuda", "rmsnorm_triton", "gemm_fp8_cuda"):
        m = REGISTRY[name]
        task = make_task(m, "L40S", m.dtypes[0], m.shapes[0])
        assert task.gpu is L40S and m.supports(L40S, m.dtypes[0])
        runnable = [v for v in m.variants if not v.needs - L40S.features]
        assert runnable
        if name == "gemm_fp8_cuda":    # its wgmma/TMA rungs are gated off sm_89
            assert len(runnable) < len(m.variants)
        for v in runnable:
            assert m.render(v, v.defaults(), task)
            assert simulate(m, v, v.defaults(), task).time_ms > 0
    # the new arch's numbers reach the model: more bandwidth, a shorter memory-bound time
    m = REGISTRY["rmsnorm_cuda"]
    v = m.variants[-1]
    slow, fast = (simulate(m, v, v.defaults(), make_task(m, g, "fp16", {"T": 8192, "D": 8192})).time_ms
                  for g in ("L40S", "H100"))
    assert slow > 2 * fast


def test_compiler_texts_name_the_new_rows_arch(catalog):
    m = REGISTRY["rmsnorm_cuda"]
    amd = make_task(m, "MI355", "fp16", m.shapes[0])
    assert amd.is_hip and "#include <hip/hip_runtime.h>" in m.render(m.variants[0], m.variants[0].defaults(), amd)
    assert messages.arch_error("inline_ptx", amd, m).endswith("compiling for gfx950.")
    _, err = break_identifier("__global__ void k(float* y) {\n    const int row = 0;\n    y[row] = 0.f;\n}\n",
                              "cuda", hip_arch=amd.gpu.arch)
    assert err.endswith("compiling for gfx950.")
    nv = make_task(REGISTRY["gemm_fp8_cuda"], "L40S", "fp8", REGISTRY["gemm_fp8_cuda"].shapes[0])
    assert "sm_89" in messages.arch_error("wgmma", nv, REGISTRY["gemm_fp8_cuda"])


def test_a_profile_lists_the_new_rows_and_its_episodes_run_on_them(catalog, tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text('[profile]\nname = "newgpu"\ndescription = "new catalog rows"\nepisodes = 40\n'
                    'modules = ["rmsnorm_cuda", "rmsnorm_triton", "softmax_triton"]\ngpus = ["L40S", "MI355"]\n'
                    'combos = 30\n\n[steps]\nmin = 8\nmax = 20\nmean = 10\n\n'
                    '[status]\ncompile_error = 0.03\nwrong_result = 0.03\n\n'
                    '[holdout]\nfrac = 0.1\nseed = 0\nsplits = ["combo"]\n\n'
                    '[output]\ntimestamps = false\nmax_context_tokens = 16000\n')
    profile = load_profile(path)
    assert {t.gpu.name for t in select_combos(profile)} == {"L40S", "MI355"}
    plan = make_plan(profile, 0)
    seen = set()
    for i in range(6):
        ep = build_episode(plan, i)
        seen.add(ep.gpu)
        assert ep.arch == gpus.GPUS[ep.gpu].arch and ep.steps and ep.best["time_ms"] > 0
    assert seen <= {"L40S", "MI355"} and seen
    assert main(["sim", "--gpu", "L40S", "--op", "rmsnorm", "--impl", "cuda", "--dtype", "fp16",
                 "--shape", "T=4096,D=4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["floor_ms"] == pytest.approx(out["bytes"] / (L40S.bw_tbs * 1e9), rel=1e-3)   # the row's bandwidth
