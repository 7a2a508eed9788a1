"""pools.Pool: multiprocessing's Pool whose worker handler is not woken by each result (see its
docstring); it must still hand back every result in order, replace a dead worker, and close."""
import os
import time

from kernelstrain import pools


def _big(i: int) -> tuple:
    """A result the size of generate's encoded rows of a few episodes (~1 MB)."""
    return i, bytes([i % 256]) * (1 << 20)


def _pid(_) -> int:
    time.sleep(0.05)
    return os.getpid()


def test_results_in_order_and_the_pool_closes():
    with pools.running(lambda: pools.fork_pool(2)) as pool:
        assert pool._get_sentinels() == [pool._change_notifier._reader]     # not the result pipe
        got = list(pools.ordered_map(pool, _big, range(24), 4))
        assert [i for i, _ in got] == list(range(24))
        assert all(b == bytes([i % 256]) * (1 << 20) for i, b in got)
        pool.close()            # the drained cache and close() wake the worker handler: join returns
        pool.join()


def test_exited_workers_are_replaced():
    """A worker's exit wakes the handler by its sentinel alone: with one task a worker, every task
    after the first two needs a worker started in place of one that exited."""
    import multiprocessing
    pool = pools.Pool(2, pools.worker_signals, (), 1, context=multiprocessing.get_context("fork"))
    with pools.running(lambda: pool):
        pids = pools.submitted(pool.map_async, _pid, range(6), 1).get(timeout=120)    # fails, not hangs
        assert len(set(pids)) == 6
