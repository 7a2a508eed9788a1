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


def test_plan_row_compares_the_row_as_json_gives_it_back():
    """plan_row compares a dataset row with the plan's row as built, and as JSON gives it back only where
    they differ: a built tuple still equals the file's list, and a changed value is still a finding."""
    from types import SimpleNamespace

    from kernelstrain.validate import Findings
    from kernelstrain.validate_derived import plan_row

    class Rebuilt:             # validate_derived.Rebuilds' get, with one episode's rebuild as built
        def get(self, index):
            return None, {"id": "e", "shape": ({"dim": "T", "value": 8},), "time_ms": 1.5}, "its chats"

    ctx, out = SimpleNamespace(rebuilds=Rebuilt()), Findings(5)
    row = {"id": "e", "shape": [{"dim": "T", "value": 8}], "time_ms": 1.5}
    assert plan_row(ctx, 0, row, "episodes.jsonl:1", out) == "its chats" and out.total == 0
    row["shape"][0]["value"] = 16
    assert plan_row(ctx, 0, row, "episodes.jsonl:1", out) == "its chats"
    assert out.total == 1 and "shape" in out[0] and "not the plan's row" in out[0]
