"""Triton's OutOfResources text quotes Triton's own shared-memory figure (issue 28): the
checked-in corpus (kernelstrain/corpus/triton_smem.json, scripts/triton_smem_corpus.py) holds
metadata.shared for every Triton candidate of the bundled profiles that the model puts over the
device's cap; the simulator labels the candidate by that figure (an `smem` failure quoting it,
or a candidate that runs where it fits), and a sample recompiled with Triton gives the same figure. Tests that need Triton are skipped, with the reason, without it."""
import random

import pytest

from kernelstrain import compilers, corpus, messages
from kernelstrain.compilers import compile_triton
from kernelstrain.corpus import build as corpus_build
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate, smem_cap

REFRESH = "run `nice python3 scripts/triton_smem_corpus.py --keep` (Triton 3.9) after merging op changes"
QUICK = ("fused_qkv_rope_triton", "chunked_prefill_triton", "flash_attn_bwd_triton")   # the smallest cells


def _missing(candidates):
    cells = corpus.load_smem()["cells"]
    return [k for k in candidates if k[2] not in cells.get(f"{k[0]}|{k[1]}", {})]


def test_the_corpus_holds_the_smallest_cells():
    candidates = corpus_build.triton_smem_candidates(modules=QUICK)
    missing = _missing(candidates)
    assert candidates and not missing, f"{len(missing)} of {len(candidates)} not in the corpus, e.g. {missing[:3]}: {REFRESH}"


@pytest.mark.slow       # every grid of every Triton module on every task combo: minutes
def test_the_corpus_holds_every_triton_smem_failure_the_bundled_profiles_can_render():
    candidates = corpus_build.triton_smem_candidates()
    missing = _missing(candidates)
    assert not missing, f"{len(missing)} of {len(candidates)} not in the corpus, e.g. {missing[:3]}: {REFRESH}"


def test_labels_follow_tritons_figure():
    """A candidate the model puts over the cap fails with Triton's own figure quoted, or runs
    where that figure fits (flash_attn_bwd_triton pipelined_tuned on MI300X: 65,536 B, the cap)."""
    candidates = corpus_build.triton_smem_candidates(modules=QUICK)
    fits = 0
    for (name, arch, key), (task, v, params, code) in candidates.items():
        m, shared = REGISTRY[name], corpus.triton_shared(name, arch, code)
        r, cap = simulate(m, v, params, task), smem_cap(v, m, task.gpu)
        assert r.smem_bytes == shared, (name, v.tag, params, task.gpu.name)
        if shared > cap:
            assert r.error_class == "smem" and f"Required: {shared}, Hardware limit: {cap}." in r.error
            assert r.error == messages.smem_error(shared, cap, v, m, task)
        else:
            fits += 1
            assert r.error_class != "smem", (name, v.tag, params, task.gpu.name)
    assert fits >= 1


def test_figures_regenerate_with_triton(tmp_path, monkeypatch):
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    monkeypatch.setattr(compilers, "CACHE_DIR", tmp_path / "compile")       # the compiler runs for real
    candidates = corpus_build.triton_smem_candidates(modules=QUICK)
    for key in random.Random(28).sample(sorted(candidates), 2):
        task, v, params, code = candidates[key]
        m = REGISTRY[key[0]]
        result = compile_triton(code, m.compile_specs(v, params, task), key[1])
        assert result.ok and result.smem_bytes == corpus.triton_shared(key[0], key[1], code), key
