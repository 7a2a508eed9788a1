"""selective_scan_cuda's state_group_scan (kernelstrain/ops/ssm/_scan_groups.py): SG states a pass -- the code
issues the group's B/C loads together and meets behind one barrier pair a group, its bugs edit what they name, and
its registers are what ptxas counts."""
import shutil

import pytest

from kernelstrain.compilers import compile_cuda
from kernelstrain.ops import REGISTRY
from kernelstrain.ops.ssm import _scan_groups as groups
from kernelstrain.ops.ssm.selective_scan_cuda import STATE_GROUP_SCAN
from kernelstrain.tasks import make_task

CHECK = {"B": 1, "L": 2048, "D": 1536, "N": 16}


def render(params, bug=None, dtype="bf16"):
    m = REGISTRY["selective_scan_cuda"]
    task = make_task(m, "H100", dtype, CHECK)
    return m, task, (m.render(STATE_GROUP_SCAN, params, task, bug) if bug else m.render(STATE_GROUP_SCAN, params, task))


def test_a_group_of_states_shares_one_barrier_pair_and_issues_its_loads_together():
    _, _, src = render({"threads": 128, "SG": 4})
    group = src[src.index("for (int n0 = 0; n0 < NSTATE; n0 += SG)"):]
    assert "#define SG 4" in src and group.count("__syncthreads()") == 2
    loads = group[:group.index("float2 e[SG][ITEMS]")]
    assert "pb[g][q].u" in loads and "pc[g][q].u" in loads          # all 2 x SG uint4 loads before the first use
    assert "warp_scan(acc[g], &wex[g])" in group and "carry[n0 + g]" in group


def test_the_bugs_edit_what_they_name():
    _, _, clean = render({"threads": 128, "SG": 2})
    for bug, old, new in (("bad_combine_index", groups.FIRST, groups.BAD_FIRST), ("missing_scale", groups.BTERM, groups.NO_DT),
                          ("wrong_init", "carry[n] = 0.f", "carry[n] = 1.f")):
        _, _, src = render({"threads": 128, "SG": 2}, bug)
        assert old in clean and new in src and old not in src.replace(new, "")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("sg", (2, 4))
def test_ptxas_builds_it_without_spill_at_the_modelled_registers(sg):
    m, task, src = render({"threads": 128, "SG": sg})
    r = compile_cuda(src, task.gpu.arch, "selective_scan_kernel")
    assert r.ok, r.log[-2000:]
    assert "0 bytes spill stores" in r.log and r.regs == STATE_GROUP_SCAN.launch({"threads": 128, "SG": sg}, task).regs
