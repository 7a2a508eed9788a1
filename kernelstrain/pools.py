"""Forked worker pools whose workers leave interrupts to the parent."""
from __future__ import annotations

import multiprocessing
import signal
from collections import deque


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


def ordered_map(pool, fn, items, ahead: int):
    """fn(item) of each item, in order, computed by `pool` at most `ahead` items in front of
    the one the caller is at: Pool.imap reads its whole input at once and keeps every result
    the caller has not taken yet, so a long input, or a caller slower than the pool, grows
    memory without bound."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.apply_async(fn, (item,)))
        if len(pending) >= ahead:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()
