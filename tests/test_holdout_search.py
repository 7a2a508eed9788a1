"""holdout_search.best_config (the held-out solutions' search) gives tasks.best_config's answer:
the same time, rung and params, over tasks of every registry module (its first menu shape on the
first catalog GPU that runs it, its last on the last), and the same error where nothing runs."""
import pytest

from kernelstrain import contamination, holdout_search, tasks
from kernelstrain.gpus import GPUS
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task


def sample_tasks():
    for m in REGISTRY.values():
        runs = [(g, d) for g in GPUS.values() for d in m.dtypes[:1] if m.supports(g, d)]
        if runs:
            yield m, make_task(m, runs[0][0].name, runs[0][1], m.shapes[0])
            yield m, make_task(m, runs[-1][0].name, runs[-1][1], m.shapes[-1])


def answer(search, module, task):
    try:
        ms, variant, params = search(module, task)
    except ValueError as e:
        return str(e)
    return ms, variant.tag, params


def test_the_same_answer_as_tasks_best_config_registry_wide():
    checked = 0
    for module, task in sample_tasks():
        assert answer(holdout_search.best_config, module, task) == answer(tasks.best_config, module, task), \
            (module.name, task.gpu.name, task.dtype, task.shape)
        checked += 1
    assert checked >= len(REGISTRY)


def test_contamination_searches_through_it():
    assert contamination.best_config is holdout_search.best_config
