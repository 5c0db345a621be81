"""bounded_map: every item once, never more than the bound in flight, inputs drawn lazily."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from touchstone.concurrency import bounded_map


@pytest.mark.parametrize("workers,in_flight,n", [(1, 1, 7), (2, 4, 50), (4, 3, 0), (3, 6, 5)])
def test_every_item_once_and_at_most_the_bound_in_flight(workers, in_flight, n):
    lock, state = threading.Lock(), {"running": 0, "peak": 0, "drawn": 0}

    def items():
        for i in range(n):
            with lock:
                state["drawn"] += 1
                # Drawn lazily: never more than the bound ahead of what has been yielded.
                assert state["drawn"] - len(seen) <= in_flight
            yield i

    def job(i):
        with lock:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
        time.sleep(0.002 * (i % 3))
        with lock:
            state["running"] -= 1
        if i == 3:
            raise ValueError("job 3 fails")
        return i * i

    seen = []
    with ThreadPoolExecutor(workers) as pool:
        for item, fut in bounded_map(pool, job, items(), in_flight):
            assert fut.done()
            if item == 3:
                assert isinstance(fut.exception(), ValueError)  # a failure is the caller's to handle
            else:
                assert fut.result() == item * item
            seen.append(item)
    assert sorted(seen) == list(range(n)) and state["peak"] <= min(workers, in_flight)
