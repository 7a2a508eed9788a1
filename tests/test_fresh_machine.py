"""A fresh machine as the README describes it (issue 33): without torch, compiling a Triton
candidate leaves no stand-in `torch` in sys.modules, so later tests that need torch skip."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a process where `import torch` fails, as on a machine without it
NO_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
"""


def test_triton_source_without_torch_leaves_no_stand_in():
    pytest.importorskip("triton", reason="needs triton (pip install 'kernelstrain[verify]')")
    code = NO_TORCH + """
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.compilers import load_triton_source
m = REGISTRY["rmsnorm_triton"]
v = m.variants[0]
task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
ns = load_triton_source(m.render(v, v.defaults(), task))
assert callable(ns[m.compile_specs(v, v.defaults(), task)[0].name])
assert "torch" not in sys.modules, sys.modules["torch"]
try:
    import torch
except ImportError:
    print("torch still missing")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "torch still missing"
