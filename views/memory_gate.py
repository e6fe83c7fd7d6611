"""Lets a large computation start only when those already running, and the pages still holding results, leave room
for it in the server's memory.

Thirty students who each paste their own paragraph run thirty models at once, and each long run makes its result
beside the others: six new 512-piece SmolLM2 texts at once took a server to a 5.2 GB peak (bench/bench_load.py
--only 5). On two cores they gain nothing by running together: each forward uses both. So a run larger than
SMALL_BYTES waits until the runs in flight, the results pages still hold (pinned) and its own bytes fit the budget,
or until nothing else runs, so that a run larger than the whole budget still runs, alone.

Who goes next. A page that already holds results of its own (it has been let through, or read a cached result) goes
before a page that holds none: Compare holds A's trace while it waits to run B, and six Compare pages at once, each
letting the next page's A go first, held six A traces and reached 5.8 GB. A page that holds nothing yet also waits
for the pages that do to let go of their results, since they are about to draw and drop them (six Compare pages
reached 2.9 GB without this wait, 2.4 GB with it). Pages let go without a word to the gate, so it looks again every
POLL_S; once a caller has been first in line for PINNED_WAIT_S it stops waiting for them, in case something holds a
result for good. Otherwise first come, first served. A run started inside another on the same thread (a cached
result a run asks for) passes, or it would wait for itself. One rule keeps the gate from a deadlock: a result made
without a size (not weighed, so not "in flight" here) must not ask for one that has a size, since it would wait at
the gate holding its own key, which a run in flight might ask for; none of the app's does (B's norm maps, which ask
for B's trace, have a size).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

SMALL_BYTES = 16 * 2**20  # runs this small never wait: a configured model's trace is kilobytes, thirty are < 0.5 GB
POLL_S = 0.2  # how often a waiting caller looks at the pinned bytes again (they drop without telling the gate)
PINNED_WAIT_S = 15.0  # the longest a caller waits for other pages' results: a Compare page draws in a few seconds
HOLDS, NEW = 0, 1  # the two places in line: a caller whose thread holds results already, and one whose thread does not
# What a caller shows while it waits: entered with the runs ahead of it when it comes, it gives back a callable that
# the gate calls with the runs ahead again after each look (POLL_S), so that what it shows counts down.
Waiting = Callable[[int], AbstractContextManager[Callable[[int], None]]]


class MemoryGate:
    """Admits computations of known expected bytes in turn under a budget (module docstring)."""

    def __init__(self, budget: Callable[[], int], pinned: Callable[[], int]):
        """budget(): the bytes runs and pinned results may hold together; pinned(): the bytes held now that no run's
        start can free (cached results a page still holds)."""
        self._budget = budget
        self._pinned = pinned
        self._changed = threading.Condition()  # guards _running and _queue; notified when either changes
        self._running: dict[int, int] = {}  # thread id -> expected bytes of its run in flight
        self._queue: list[tuple[int, int]] = []  # (HOLDS or NEW, ticket) of each caller waiting; the smallest goes next
        self._tickets = itertools.count()
        self._thread = threading.local()  # .holds: this thread holds results (Streamlit runs each page in a new thread)

    @property
    def queued(self) -> int:
        """How many callers wait now."""
        with self._changed:
            return len(self._queue)

    def holding(self) -> None:
        """Note that this thread now holds a result (a cache hit it read): its next run goes before new pages'."""
        self._thread.holds = True

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
            ticket = (HOLDS if getattr(self._thread, "holds", False) else NEW, next(self._tickets))
            self._queue.append(ticket)
            first_since: list[float] = []  # when this caller came first in line

            def fits() -> bool:
                if min(self._queue) != ticket:
                    return False
                first_since[:] = first_since or [time.monotonic()]
                pinned = self._pinned()
                if pinned + sum(self._running.values()) + nbytes <= self._budget():
                    return True
                if self._running:
                    return False
                patient = ticket[0] == NEW and time.monotonic() - first_since[0] < PINNED_WAIT_S
                return not (patient and pinned)  # a new page lets the others' results go first, for a while

            def ahead() -> int:
                return len(self._running) + sum(other < ticket for other in self._queue)

            try:
                if not fits():
                    with waiting(ahead()) if waiting is not None else contextlib.nullcontext(_unshown) as tell:
                        while True:
                            self._changed.wait(POLL_S)
                            if fits():
                                break
                            tell(ahead())
            except BaseException:  # a rerun stops the script as it tells its wait: its ticket must not block the line
                self._queue.remove(ticket)
                self._changed.notify_all()
                raise
            self._queue.remove(ticket)
            self._running[me] = nbytes
            self._thread.holds = True
            self._changed.notify_all()  # the next in line may fit beside this one


def _unshown(ahead: int) -> None:
    """What a caller with nothing to show does when the runs ahead of it change."""
