"""Domain errors the CLI turns into one clean line and an exit code, and the fault hook
the resume tests use to kill a run at a named point."""
from __future__ import annotations

import os
import signal

REPORT_HINT = "this is a bug in kernelstrain; please report it with the command line that caused it"


class UsageError(Exception):
    """Bad input or usage: exit 2."""


class DataError(UsageError):
    """A corrupt or unreadable input file: exit 2, naming file and line."""


_FAULT_COUNTS: dict = {}


def fault_point(name: str) -> None:
    """Die with SIGKILL at the Nth pass through `name` when KERNELSTRAIN_FAULT="name:N".

    Tests use it to kill a run exactly after a rename or a checkpoint; unset, it costs one
    dictionary lookup."""
    spec = os.environ.get("KERNELSTRAIN_FAULT")
    if not spec:
        return
    point, _, count = spec.rpartition(":")
    if point != name:
        return
    _FAULT_COUNTS[name] = _FAULT_COUNTS.get(name, 0) + 1
    if _FAULT_COUNTS[name] == int(count):
        os.kill(os.getpid(), signal.SIGKILL)
