"""Architecture-failure texts are the real tools' texts (issue 28): the checked-in corpus
(kernelstrain/corpus, built by scripts/arch_corpus.py) holds one for every arch-failing
candidate the bundled profiles can render, and a sample regenerated with the real tools
(nvcc 13.0 / ptxas, clang with the HIP headers, Triton's compiler) is equal byte for byte
after path normalisation. The tool tests are skipped, with the reason, where a tool is missing."""
import random
import shutil

import pytest

from kernelstrain import compilers, corpus, messages
from kernelstrain.corpus import build as corpus_build
from kernelstrain.compilers import compile_cuda, compile_hip, compile_triton, find_hip_compiler, tool_text
from kernelstrain.ops import REGISTRY


@pytest.fixture(scope="module")
def candidates():
    return corpus_build.candidates()


@pytest.fixture
def fresh_compiles(tmp_path, monkeypatch):
    """The tools run for real: no earlier result from the on-disk compile cache."""
    monkeypatch.setattr(compilers, "CACHE_DIR", tmp_path / "compile")


def test_pack_round_trips_every_form():
    code = "a\n#include <cuda.h>\nb"
    text = ("candidate.hip:2:10: fatal error: 'cuda.h' file not found\n    2 | #include <cuda.h>\n      |          ^~~~~~~~\n"
            "1 error generated when compiling for gfx942.")
    template, numbers = corpus.pack(text, code)
    assert numbers == [2, 10, 2] and corpus.unpack(template, numbers, code) == text
    ptxas = "ptxas tmpxft_candidate.ptx, line 686; error   : Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89"
    assert corpus.unpack(*corpus.pack(ptxas, ""), "") == ptxas


def test_the_corpus_holds_every_arch_failure_the_bundled_profiles_can_render(candidates):
    """Every (module, rung, params, target) that fails for a missing feature has the tool's text;
    an op change that alters such a render fails here until scripts/arch_corpus.py is rerun."""
    cells = corpus.load()["cells"]
    missing = [k for k in candidates if k[2] not in cells.get(f"{k[0]}|{k[1]}", {}).get("codes", {})]
    assert not missing, f"{len(missing)} of {len(candidates)} not in the corpus, e.g. {missing[:3]}: " \
                        f"run `nice python scripts/arch_corpus.py`"


def test_no_arch_gated_candidate_builds(candidates):
    """A rung gated on a feature the GPU lacks is refused by the tool: the corpus records no
    candidate the tool built (a false arch label)."""
    cells = corpus.load()["cells"]
    built = [k for k in candidates if cells[f"{k[0]}|{k[1]}"]["codes"].get(k[2]) == []]
    assert not built, built[:5]


def test_recorded_texts_come_from_the_corpus(candidates):
    """messages.arch_error gives the corpus's text, the ptxas temporary file named per task."""
    key = next(k for k in sorted(candidates) if k[1] == "sm_80" and REGISTRY[k[0]].impl == "cuda")
    task, v, params, code = candidates[key]
    text = messages.arch_error(v.needs - task.gpu.features, task, REGISTRY[key[0]], code)
    assert text.startswith("ptxas /tmp/tmpxft_") and tool_text(text) == corpus.lookup(key[0], key[1], code)


def _sample(candidates, tool, n):
    keys = sorted(k for k in candidates if _tool(k) == tool)
    return random.Random(28).sample(keys, min(n, len(keys)))


def _tool(key):
    return "triton" if REGISTRY[key[0]].impl == "triton" else "clang" if key[1].startswith("gfx") else "nvcc"


def _compare(candidates, key, result):
    task, v, params, code = candidates[key]
    m = REGISTRY[key[0]]
    assert not result.ok, f"{key}: the tool builds an arch-gated candidate"
    assert tool_text(result.log) == tool_text(messages.arch_error(v.needs - task.gpu.features, task, m, code)), key


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit 12.4+) not installed")
def test_ptxas_texts_regenerate(candidates, fresh_compiles):
    for key in _sample(candidates, "nvcc", 4):
        task, v, params, code = candidates[key]
        _compare(candidates, key, compile_cuda(code, key[1]))


@pytest.mark.skipif(find_hip_compiler() is None, reason="no HIP compiler (hipcc, or clang-17+ with the HIP headers)")
def test_clang_hip_texts_regenerate(candidates, fresh_compiles):
    for key in _sample(candidates, "clang", 3):
        task, v, params, code = candidates[key]
        _compare(candidates, key, compile_hip(code, key[1]))


def test_triton_texts_regenerate(candidates, fresh_compiles):
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    for key in _sample(candidates, "triton", 2):
        task, v, params, code = candidates[key]
        _compare(candidates, key, compile_triton(code, REGISTRY[key[0]].compile_specs(v, params, task), key[1]))
