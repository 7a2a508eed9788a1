"""blocks_per_sm and in_flight_ratio keep their last answer (occupancy.last_kept, issue 32): every answer is the
plain computation's, whatever was asked before it, and a changed launch or card is computed again."""
import math

from kernelstrain import knobs
from kernelstrain.gpus import GPUS
from kernelstrain.ops.base import Launch
from kernelstrain.ops.occupancy import blocks_per_sm, in_flight_ratio
from kernelstrain.records import replaced

from test_caches import registry_sample


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_kept_answers_are_the_plain_ones_over_the_registry():
    launches = [(knobs.launch(m, v, params, task), task.gpu) for m, v, params, task in registry_sample()]
    assert len(launches) > 1000
    # each launch asked twice in a row (the second answer kept), then the list again in another order, and each
    # ask of one function between two of the other (each keeps its own last answer)
    for order in (launches, launches[::-1]):
        for launch, gpu in order:
            for fn in (blocks_per_sm, in_flight_ratio, blocks_per_sm, in_flight_ratio):
                assert _same(fn(launch, gpu), fn.plain(launch, gpu)), (fn.__name__, launch, gpu.name)


def test_a_changed_launch_or_card_is_computed_again():
    gpu, other = GPUS["H100"], GPUS["RTX4090"]
    a = Launch(grid=1024, threads=256, regs=32)
    b = replaced(a, regs=255)              # a new record: 255 registers a thread fit one block of 256 an SM
    c = replaced(a, smem_bytes=200_000)    # over most cards' shared memory a block
    for launch, card in ((a, gpu), (b, gpu), (a, gpu), (c, gpu), (c, other), (a, other), (a, gpu)):
        assert blocks_per_sm(launch, card) == blocks_per_sm.plain(launch, card)
        assert in_flight_ratio(launch, card) == in_flight_ratio.plain(launch, card)
    assert blocks_per_sm(a, gpu) != blocks_per_sm(b, gpu)
