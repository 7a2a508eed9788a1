"""Triton's OutOfResources text quotes Triton's own shared-memory figure (issue 28): the
checked-in corpus (kernelstrain/corpus/triton_smem.json, scripts/triton_smem_corpus.py) holds
metadata.shared for every Triton candidate of the bundled profiles that the model puts over the
device's cap, at the launch specialization each task compiles it at (compilers.specialization_key);
the simulator labels the candidate by that figure (an `smem` failure quoting it, or a candidate
that runs where it fits), and a sample recompiled with Triton gives the same figure. Tests that
need Triton are skipped, with the reason, without it."""
import random
from collections import defaultdict

import pytest

from kernelstrain import compilers, corpus, messages
from kernelstrain.compilers import compile_triton, specialization_key
from kernelstrain.corpus import build as corpus_build
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate, smem_cap
from kernelstrain.tasks import make_task

REFRESH = "run `nice python3 scripts/triton_smem_corpus.py --keep` (Triton 3.9) after merging op changes"
QUICK = ("fused_qkv_rope_triton", "flash_attn_bwd_triton")   # the smallest cells (18 and 28 figures)


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
        m = REGISTRY[name]
        shared = corpus.triton_shared(name, arch, code, specialization_key(m.compile_specs(v, params, task)))
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
        specs = m.compile_specs(v, params, task)
        result = compile_triton(code, specs, key[1])
        assert result.ok and result.smem_bytes == corpus.triton_shared(key[0], key[1], code, specialization_key(specs)), key


def test_one_source_has_a_figure_per_specialization():
    """flash_prefill_triton on MI300X: the wrapper passes HEAD_DIM from the tensors, so one
    source compiles at head dim 64 and 128 to other buffers (98,304 B and 163,840 B where the
    tasks of both profiles meet); each task's label quotes the figure of its own launch."""
    m = REGISTRY["flash_prefill_triton"]
    candidates = corpus_build.triton_smem_candidates(modules=(m.name,), archs={"gfx942"})
    cell = corpus.load_smem()["cells"][f"{m.name}|gfx942"]
    by_source = defaultdict(list)
    for (_, _, key), candidate in candidates.items():
        if key in cell:             # the coverage tests name the missing ones
            by_source[key.split("/")[0]].append((cell[key], candidate))
    split = [pairs for pairs in by_source.values() if len({shared for shared, _ in pairs}) > 1]
    assert split, "no source of flash_prefill_triton on gfx942 has two figures: the keying lost the specialization"
    for pairs in split:
        for shared, (task, v, params, code) in pairs:
            assert simulate(m, v, params, task).smem_bytes == shared, (v.tag, params, dict(task.shape))


# Modules whose inputs carry no 16-bit type (gemm_fp4_triton: packed e2m1 bytes and uint8 scales), so the wrapper
# writes the output's torch dtype and the fp16 and bf16 renders differ: each has its own corpus entry (the coverage
# tests above hold every candidate), none shares a figure.
OUTPUT_TYPE_IN_WRAPPER = {"gemm_fp4_triton"}


@pytest.mark.slow       # a dozen Triton compiles
def test_fp16_and_bf16_launches_share_a_figure(tmp_path, monkeypatch):
    """specialization_key counts fp16 and bf16 pointers as one: the same source compiled at the
    other 16-bit type (on every target the profiles hold) allocates the same shared memory."""
    pytest.importorskip("triton", reason="triton not installed: pip install 'kernelstrain[verify]'")
    monkeypatch.setattr(compilers, "CACHE_DIR", tmp_path / "compile")
    candidates = corpus_build.triton_smem_candidates()
    by_arch = defaultdict(list)
    for key, candidate in sorted(candidates.items()):
        if candidate[0].dtype in ("fp16", "bf16") and key[0] not in OUTPUT_TYPE_IN_WRAPPER:
            by_arch[key[1]].append((key, candidate))
    for key, (task, v, params, code) in sorted(candidates.items()):
        if key[0] in OUTPUT_TYPE_IN_WRAPPER and task.dtype in ("fp16", "bf16"):     # the exception still holds
            other = make_task(REGISTRY[key[0]], task.gpu.name, "bf16" if task.dtype == "fp16" else "fp16", dict(task.shape))
            assert REGISTRY[key[0]].render(v, params, other) != code, key
    rng = random.Random(16)
    for arch, items in sorted(by_arch.items()):
        for key, (task, v, params, code) in rng.sample(items, 2):
            m = REGISTRY[key[0]]
            other = make_task(m, task.gpu.name, "bf16" if task.dtype == "fp16" else "fp16", dict(task.shape))
            assert m.render(v, params, other) == code
            result = compile_triton(code, m.compile_specs(v, params, other), arch)
            assert result.ok and result.smem_bytes == corpus.load_smem()["cells"][f"{key[0]}|{arch}"][key[2]], key
