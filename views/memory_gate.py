"""Lets a large computation start only when those already running leave room for it in the server's memory.

Thirty students who each paste their own paragraph run thirty models at once, and each long run makes its result
beside the others: six new 512-piece SmolLM2 texts at once took a server to a 5.2 GB peak, where one at a time it
peaked at 2.3 GB (bench/bench_load.py --only 5). On two cores they gain nothing by running together: each forward
uses both. So a run larger than SMALL_BYTES waits, first come first served, until no other such run is in
flight or the memory pinned by running pages, the runs in flight and its own fit the budget. The first in line
always starts when nothing else runs, so a run larger than the whole budget still runs, alone. A run started inside
another on the same thread (a cached result a run asks for) passes, or it would wait for itself.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

SMALL_BYTES = 16 * 2**20  # runs this small never wait: a configured model's trace is kilobytes, thirty are < 0.5 GB
Waiting = Callable[[int], AbstractContextManager]  # what a caller shows while it waits, given the runs ahead of it


class MemoryGate:
    """Admits computations of known expected bytes in turn under a budget (module docstring)."""

    def __init__(self, budget: Callable[[], int], pinned: Callable[[], int]):
        """budget(): the bytes runs and pinned results may hold together; pinned(): the bytes held now that no run's
        start can free (cached results a page still holds)."""
        self._budget = budget
        self._pinned = pinned
        self._changed = threading.Condition()  # guards _running and _queue; notified when either changes
        self._running: dict[int, int] = {}  # thread id -> expected bytes of its run in flight
        self._queue: deque[int] = deque()  # the tickets of the callers waiting, first come first
        self._tickets = itertools.count()

    @property
    def queued(self) -> int:
        """How many callers wait now."""
        with self._changed:
            return len(self._queue)

    def reserved_by_others(self) -> int:
        """The expected bytes of the runs in flight on other threads (a cache makes room for them, too, before it
        starts a run)."""
        me = threading.get_ident()
        with self._changed:
            return sum(nbytes for thread, nbytes in self._running.items() if thread != me)

    @contextlib.contextmanager
    def admitted(self, nbytes: int, waiting: Waiting | None = None) -> Iterator[None]:
        """Run the body once a run of `nbytes` fits; `waiting(ahead)` is entered while it waits."""
        me = threading.get_ident()
        with self._changed:
            nested = me in self._running
        if nbytes <= SMALL_BYTES or nested:
            yield
            return
        self._enter(me, nbytes, waiting)
        try:
            yield
        finally:
            with self._changed:
                del self._running[me]
                self._changed.notify_all()

    def _enter(self, me: int, nbytes: int, waiting: Waiting | None) -> None:
        with self._changed:
            ticket = next(self._tickets)
            self._queue.append(ticket)

            def fits() -> bool:
                if self._queue[0] != ticket:
                    return False
                if not self._running:
                    return True
                return self._pinned() + sum(self._running.values()) + nbytes <= self._budget()

            try:
                if not fits():
                    ahead = len(self._running) + self._queue.index(ticket)
                    with waiting(ahead) if waiting is not None else contextlib.nullcontext():
                        self._changed.wait_for(fits)
            except BaseException:  # a rerun stops the script in the spinner: its ticket must not block the line
                self._queue.remove(ticket)
                self._changed.notify_all()
                raise
            self._queue.popleft()
            self._running[me] = nbytes
            self._changed.notify_all()  # the next in line may fit beside this one
