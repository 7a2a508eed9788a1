"""Forked worker pools whose workers leave interrupts to the parent."""
from __future__ import annotations

import multiprocessing
import signal


def worker_signals() -> None:
    """In a pool worker: ignore Ctrl-C and die plainly on SIGTERM (the CLI turns both into
    KeyboardInterrupt in the parent, which stops the pool; a forked worker inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def fork_pool(workers: int):
    """A Pool of `workers` forked processes (they share what the parent has built), or None
    where fork is missing."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork").Pool(workers, worker_signals)
