"""Many independent jobs on a thread pool, a bounded number at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import TypeVar

T = TypeVar("T")
_END = object()


def bounded_map(
    pool: Executor, fn: Callable[[T], object], items: Iterable[T], in_flight: int
) -> Iterator[tuple[T, Future]]:
    """(item, its finished future) as each job finishes, with at most `in_flight`
    jobs submitted and unfinished. Items are drawn lazily and a future is let go
    once yielded, so a batch of any size holds neither all its inputs nor all
    its results in memory."""
    items = iter(items)
    running: dict[Future, T] = {}
    while True:
        while len(running) < in_flight and (item := next(items, _END)) is not _END:
            running[pool.submit(fn, item)] = item
        if not running:
            return
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in done:
            yield running.pop(fut), fut
