"""validate's (and generate's) speed-ups around the row checks: each kept answer is the plain computation's."""
from kernelstrain import references
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def test_reference_ms_is_the_plain_computation_registry_wide():
    """references.reference_ms (kept once a process) answers as _reference_ms for every module on each GPU that
    runs it, at its first and last shape, both modes, asked in turns (a key without the GPU, the shape or the
    mode would answer one task with another's time)."""
    asked = 0
    references._TIMES.clear()
    for _ in range(2):
        for m in REGISTRY.values():
            if hasattr(m, "torch_ms"):
                continue
            for gpu in GPUS.values():
                dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
                if dtype is None:
                    continue
                for shape in (m.shapes[0], m.shapes[-1]):
                    task = make_task(m, gpu.name, dtype, shape)
                    for mode in ("eager", "compiled"):
                        assert references.reference_ms(m, task, mode) == references._reference_ms(m, task, mode), \
                            (m.name, task.key, mode)
                        asked += 1
    assert asked > 2000 and references._TIMES
