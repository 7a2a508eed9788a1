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


class Background:
    """Runs functions in forked processes while this one goes on (or, when disabled or where
    fork is missing, in this process when a result is asked for). The processes are not a
    pool's, so they may start pools of their own."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and "fork" in multiprocessing.get_all_start_methods()
        self.processes: list = []

    def run(self, fn, *args):
        """A callable returning fn(*args) (raising what it raised)."""
        if not self.enabled:
            return lambda: fn(*args)
        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_send_result, args=(send, fn, args))
        process.start()
        send.close()
        self.processes.append(process)

        def result():
            ok, value = receive.recv()
            process.join()
            if not ok:
                raise value
            return value
        return result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            if process.is_alive():
                process.terminate()
            process.join()


def _send_result(send, fn, args) -> None:
    worker_signals()
    try:
        send.send((True, fn(*args)))
    except Exception as e:        # handed to the parent, which raises it
        send.send((False, e))
