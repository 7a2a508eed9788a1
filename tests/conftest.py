import shutil
import sys
from pathlib import Path

import pytest

from kernelstrain.cli import main


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
    """A 40-episode dataset of the default profile, seed 0 (read-only for tests)."""
    out = tmp_path_factory.mktemp("data") / "d"
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "40", "--quiet", "--workers", "1"]) == 0
    return out


@pytest.fixture
def dataset_copy(small_dataset, tmp_path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(small_dataset, dst)
    return dst


@pytest.fixture(autouse=True)
def no_stand_in_modules():
    """No test, nor the code it runs, leaves a stand-in module (made without an import, so
    with no spec) in sys.modules: a later `pytest.importorskip` would find it and fail
    instead of skipping (issue 33: a stand-in torch after an uncached Triton compile)."""
    before = set(sys.modules)
    yield
    left = sorted(name for name in set(sys.modules) - before
                  if "." not in name and sys.modules[name] is not None
                  and not name.startswith(("_cython_", "cython_runtime"))   # Cython's own runtime modules
                  and getattr(sys.modules[name], "__spec__", None) is None)
    assert not left, f"stand-in modules left in sys.modules: {left}"
