"""Forked worker pools whose workers leave interrupts to the parent.

A pool runs inside `running(make)`, and the parent waits for it only through `result` and
`ordered_map`. There SIGINT and SIGTERM stop the run promptly and never hang it:

- a signal that comes while this (the main) thread is inside the pool's own calls (submitting a
  task, waiting for a result, terminating the pool) is only noted, and raised as
  KeyboardInterrupt when the call returns: raised inside them, it could leave one of the pool's
  locks held, and terminate() would then wait for ever (seen: SIGTERM on a loaded 2-core machine);
  anywhere else it is raised at once, as without a pool;
- a wait polls every POLL_S seconds: a signal sent to the whole process group (`timeout`, a
  terminal's Ctrl-C, a job control's kill) kills the workers mid-task too, and the pool's
  result for that task never comes (the pool replaces the dead workers and waits for ever);
- leaving `running` normally terminates the workers and joins them; leaving it on an exception
  (an interrupt) kills them without the pool's own terminate() (see _kill).
"""
from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import multiprocessing.pool
import signal
import threading
import time
from collections import deque

POLL_S = 0.1            # the longest a noted signal waits to be raised in a wait
KILL_WAIT_S = 5.0       # the longest _kill waits for the pool's worker handler, and for each worker
_INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_inside = 0             # the main thread's depth inside the pools' own calls
_noted: list = []       # signals that came meanwhile, raised when the call returns


def worker_signals() -> None:
    """In a pool worker: ignore Ctrl-C and die plainly on SIGTERM (the parent turns both into
    KeyboardInterrupt, which stops the pool; a forked worker inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _INTERRUPTS)     # blocked while the pool was made (running)


def fork_pool(workers: int):
    """A Pool of `workers` forked processes (they share what the parent has built), or None
    where fork is missing."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork").Pool(workers, worker_signals)


def _on_signal(signum, frame):
    if _inside:
        _noted.append(signum)
    else:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _pool_call():
    """The body is the pool's own code: a signal meanwhile is raised once it returns."""
    global _inside
    _inside += 1
    try:
        yield
    finally:
        _inside -= 1
    if _noted and not _inside:
        _noted.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def running(make):
    """The pool `make()` returns (a multiprocessing Pool, or None: nothing to do), made with SIGINT
    and SIGTERM blocked (its workers unblock them once their own handlers are set: worker_signals)
    and used in the body, its workers stopped and reaped on leaving it, however left; SIGINT and
    SIGTERM handled meanwhile as the module docstring says (in the main thread; elsewhere a signal
    cannot come). A signal that came while the pool was being made stops it at once."""
    before = {}
    if threading.current_thread() is threading.main_thread():
        before = {s: signal.signal(s, _on_signal) for s in _INTERRUPTS}
    pool = None
    try:
        with _pool_call():
            pool = _made(make)
        if pool is None:
            _restore(before)
            before = {}
        yield pool
    except BaseException:
        try:
            if pool is not None:
                with _pool_call():
                    _kill(pool)
        finally:
            _restore(before)
        raise
    if pool is None:
        return
    try:
        with _pool_call():
            pool.terminate()
            pool.join()
    finally:
        _restore(before)


def _made(make):
    """make() with SIGINT and SIGTERM blocked in this thread: the processes it forks start with them
    blocked (a signal before their handlers are set would raise KeyboardInterrupt in a worker, or kill
    it before it is one of the pool's), and so do the pool's threads (a signal is for the main thread)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        return make()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _restore(handlers: dict) -> None:
    for s, handler in handlers.items():
        signal.signal(s, handler)
    if handlers:
        _noted.clear()       # leaving on an exception: that one is on its way out


def _kill(pool) -> None:
    """Stop a pool left on an exception (an interrupt, mostly) without its terminate(): a worker
    killed by the signal that stopped the run (sent to the whole group) may have died holding a
    lock of the pool's queues (reading its next task, sending a result), and terminate() takes
    those locks and would wait for ever (seen: `timeout 40 kernelstrain generate`, the parent in
    terminate() and a replacement worker in its first put, for 10 minutes). So: no replacement
    workers, every worker SIGKILLed and reaped, and the pool's exit hook cancelled; its two
    threads that talk to the queues are left blocked (daemon threads: they end with the process)."""
    handler = pool._worker_handler
    handler._state = multiprocessing.pool.TERMINATE     # forks no worker in place of a dead one
    pool._change_notifier.put(None)                     # (only this process writes it) wakes it
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        for p in list(pool._pool):
            if p.exitcode is None:
                p.kill()
        handler.join(POLL_S)
        if not handler.is_alive() or time.monotonic() > deadline:
            break
    for p in list(pool._pool):
        if p.exitcode is None:
            p.kill()
        p.join(KILL_WAIT_S)
    pool._terminate.cancel()        # the hook that runs terminate() at exit
    pool._state = multiprocessing.pool.TERMINATE


def submitted(method, *args, **kwargs):
    """method(*args, **kwargs), a pool's method that hands work to it (apply_async, map_async ...),
    as one of the pool's own calls."""
    with _pool_call():
        return method(*args, **kwargs)


def result(async_result):
    """async_result.get() (an AsyncResult of a pool in `running`), waited for in polls of POLL_S
    seconds, a signal meanwhile raised between them."""
    while True:
        with _pool_call():
            async_result.wait(POLL_S)
            done = async_result.ready()
        if done:
            with _pool_call():
                return async_result.get()


def ordered_map(pool, fn, items, ahead: int, primed: int = 0):
    """fn(item) of each item, in order, computed by `pool` (in `running`) at most `ahead` items
    in front of the one the caller is at: Pool.imap reads its whole input at once and keeps every
    result the caller has not taken yet, so a long input, or a caller slower than the pool, grows
    memory without bound. `primed`: this many items handed to the pool now, before the caller asks
    for the first result (work for the pool while the caller does something else first); the
    window then narrows back to `ahead` as results are taken."""
    items = iter(items)
    pending = deque(submitted(pool.apply_async, fn, (item,)) for item in itertools.islice(items, primed))
    return _in_order(pool, fn, items, ahead, pending)


def _in_order(pool, fn, items, ahead: int, pending: deque):
    for item in items:
        pending.append(submitted(pool.apply_async, fn, (item,)))
        while len(pending) >= ahead:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())
