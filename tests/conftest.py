import shutil
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
