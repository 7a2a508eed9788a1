"""Rung.dtypes: a structure offered only for some storage dtypes is never an episode's baseline
or step for the others (embedding_bwd_cuda's 16-bit atomics fail bf16's precision)."""
from kernelstrain.engine import STREAMS, Episode
from kernelstrain.ops import REGISTRY
from kernelstrain.plan import seeded_rng
from kernelstrain.tasks import make_task, starting_rung

M = REGISTRY["embedding_bwd_cuda"]
ATOMIC = {v.tag for v in M.variants if v.dtypes and "bf16" not in v.dtypes}


def tags_of(dtype: str, seed: int, cap: float = 0.0) -> set:
    task = make_task(M, "H100", dtype, {"T": 4096, "D": 4096, "V": 32000})
    streams = {s: seeded_rng("offered", seed, s) for s in STREAMS}
    ep = Episode(M, task, streams, 30, 0.1, 0.3, 8)
    steps = [x.row() for x in ep.run()]
    return {ep.base.variant.tag} | {s["tag"] for s in steps if s.get("tag")}


def test_atomic_rungs_are_fp16_only():
    assert ATOMIC == {"atomic_per_element", "vectorized_atomic2"}
    bf16 = make_task(M, "H100", "bf16", M.shapes[0])
    fp16 = make_task(M, "H100", "fp16", M.shapes[0])
    assert starting_rung(M, bf16).tag == "sort_segmented_reduce"
    assert starting_rung(M, fp16).tag == "atomic_per_element"
    assert not ATOMIC & set().union(*(tags_of("bf16", s) for s in range(4)))
    assert ATOMIC & set().union(*(tags_of("fp16", s) for s in range(4)))
