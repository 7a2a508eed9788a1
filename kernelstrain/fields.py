"""Row fields whose keys differ from row to row (a task's shape, a step's params), stored
as lists of {name, value} objects so every row of a file has one schema.

An object with per-op keys ({"T": 4096, "D": 4096} beside {"B": 8, "S": 2048, ...})
makes `datasets`/Arrow infer a different struct per chunk and fail to cast them, or
merge them into one struct of every key, mostly null. A list of pairs is one type:

>>> shape_field({"T": 4096, "D": 4096})
[{'dim': 'T', 'value': 4096}, {'dim': 'D', 'value': 4096}]
>>> as_dict([{'dim': 'T', 'value': 4096}, {'dim': 'D', 'value': 4096}])
{'T': 4096, 'D': 4096}
"""
from __future__ import annotations


def shape_field(dims: dict) -> list[dict]:
    """A shape {dim: value} (in the module's dim order) as [{"dim", "value"}, ...]."""
    return [{"dim": d, "value": v} for d, v in dims.items()]


def params_field(params: dict) -> list[dict]:
    """Launch / tile parameters {name: value} as [{"name", "value"}, ...]."""
    return [{"name": k, "value": v} for k, v in params.items()]


def as_dict(field) -> dict:
    """Read a shape or params field back into a dict (a dict passes through unchanged)."""
    if isinstance(field, dict):
        return dict(field)
    return {e["dim"] if "dim" in e else e["name"]: e["value"] for e in field}
