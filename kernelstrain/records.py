"""dataclasses.replace for the simulator's frozen records, without the generated __init__.

A launch model builds a Launch and then adjusts it field by field (registers capped, spills, the knobs'
unroll, a narrowed memory side: ~100 replaces an episode, ~50,000 in the held-out solutions' search).
dataclasses.replace re-runs the frozen class's __init__, which sets each of Launch's 19 fields through
object.__setattr__: ~8 us a call, 3-4% of generate's CPU. `replaced` copies the record's fields and
sets the changed ones in its own __dict__ (~1.3 us): the same record (equal, the same hash, the
same fields in the same order), for a class whose __init__ does nothing else.
"""
from __future__ import annotations

import dataclasses

_PLAIN: dict = {}     # class -> frozenset of its field names, or None where dataclasses.replace must run


def replaced(record, **changes):
    """dataclasses.replace(record, **changes), made without running the class's __init__ where that
    __init__ only sets the fields (plain_fields); else (and for a name that is not a field, which
    replace rejects) dataclasses.replace itself.

    >>> from kernelstrain.ops.base import Launch
    >>> a = Launch(grid=8, threads=256)
    >>> replaced(a, regs=40) == dataclasses.replace(a, regs=40), replaced(a, regs=40).regs, a.regs
    (True, 40, 32)
    """
    cls = type(record)
    names = _PLAIN.get(cls, False)
    if names is False:
        names = _PLAIN[cls] = plain_fields(cls)
    own = getattr(record, "__dict__", None)
    # a record holding more than its fields (a cached_property's value) is copied by replace, without it
    if names is None or own is None or len(own) != len(names) or not changes.keys() <= names:
        return dataclasses.replace(record, **changes)
    new = object.__new__(cls)
    fresh = new.__dict__
    fresh.update(own)
    fresh.update(changes)
    return new


def plain_fields(cls) -> frozenset | None:
    """The field names of a frozen dataclass whose generated __init__ only stores its arguments (the class
    itself decorated, its __init__ the generated one, no __post_init__, every field an init field, no
    __slots__), or None for any other class."""
    params = cls.__dict__.get("__dataclass_params__")       # (the class's own: a subclass may define __init__)
    init = cls.__dict__.get("__init__")
    if params is None or not (params.frozen and params.init) or hasattr(cls, "__post_init__") \
            or "__slots__" in cls.__dict__ or getattr(getattr(init, "__code__", None), "co_filename", "") != "<string>":
        return None                 # (dataclass's generated __init__ is compiled from a string)
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        return None
    return frozenset(f.name for f in fields)
