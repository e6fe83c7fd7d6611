"""The app's large results (traces, norm maps, rollouts), shared by every session and bounded by their bytes.

Why not st.cache_data: it pickles what it returns and unpickles it on every hit, so each session that opened
SmolLM2 on 512 pieces got its own copy of a 626 MB trace (and waited half a second for it). Why not
st.cache_resource alone: it bounds the number of entries, and one entry can be a few kilobytes or a gigabyte.

Here one budget holds them all, least recently used first out: ATTENTION_EXPLORER_MEMORY_MB megabytes (default
DEFAULT_BUDGET_MB), counted as the bytes of the numpy arrays the entries hold, an array two entries hold once. The
entry just made is kept even when it alone is over the budget, since the page that asked for it reads it again on
every rerun, and so are entries a running page still holds (Compare's two 628 MB SmolLM2 traces on 512 pieces):
dropping them would free no memory, and the page would make them again at once. Room for a trace is made before it
is run (its expected bytes, `room`), so the server does not hold the old traces beside the new one they make way for.
Every array cached is made read-only first: sessions share it. Thirty students opening one link compute it once: the
others wait for it. Thirty students each on a long text of their own take turns at the gate (views/memory_gate.py)
when their runs would not fit in the budget at once, and room is made for every run in flight.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

import numpy as np
import streamlit as st
from streamlit.logger import get_logger
from streamlit.runtime.scriptrunner import get_script_run_ctx

from views.memory_gate import MemoryGate, Waiting

BUDGET_ENV = "ATTENTION_EXPLORER_MEMORY_MB"
DEFAULT_BUDGET_MB = 800  # SmolLM2's and MiniLM's traces on 512 pieces (626 + 150 MB) fit; a server stays under 2.5 GB
Result = TypeVar("Result")
LOG = get_logger(__name__)
# Cached arrays are read-only on purpose (sessions share them); the engine hands some to torch.from_numpy to read
# them, and torch warns of any read-only array it is given.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)


def budget_bytes() -> int:
    """The budget in bytes: the environment's ATTENTION_EXPLORER_MEMORY_MB, else DEFAULT_BUDGET_MB."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    try:
        megabytes = float(text) if text else DEFAULT_BUDGET_MB
    except ValueError:
        LOG.warning("%s=%r is not a number of megabytes: using %s", BUDGET_ENV, text, DEFAULT_BUDGET_MB)
        megabytes = DEFAULT_BUDGET_MB
    return int(max(megabytes, 0.0) * 1e6)


def arrays_in(value: Any, seen: set[int] | None = None) -> list[np.ndarray]:
    """Every numpy array inside a result: in dataclass fields, tuples, lists and dict values (each once)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return [value]
    if is_dataclass(value) and not isinstance(value, type):
        parts = [getattr(value, f.name) for f in fields(value)]
    elif isinstance(value, dict):
        parts = list(value.values())
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        return []
    return [array for part in parts for array in arrays_in(part, seen)]


def buffers_of(value: Any) -> dict[int, int]:
    """The arrays that own the memory a result holds, by id, with their bytes: a view of another array (a pre-norm
    trace's attn.ln_in is a view of its residual stream) is its base's, and a view of anything else (a buffer from
    torch) counts as its own size, since nothing else here holds that buffer."""
    owners: dict[int, int] = {}
    for array in arrays_in(value):
        while isinstance(array.base, np.ndarray):
            array = array.base
        owners[id(array)] = array.nbytes
    return owners


class ByteBudgetCache:
    """Results by key, least recently used out first once their bytes pass the budget."""

    def __init__(self, budget: Callable[[], int] = budget_bytes):
        self._budget = budget
        # oldest use first; each result with buffers_of(result): an array two results share (the positional demo
        # holds the page trace's attention weights) is counted once while both are held
        self._entries: OrderedDict[Hashable, tuple[Any, dict[int, int]]] = OrderedDict()
        self._lock = threading.Lock()  # guards _entries and _making
        self._making: dict[Hashable, threading.Lock] = {}  # one lock per key being computed
        self.gate = MemoryGate(budget, self._pinned)  # misses too large to run at once take turns

    def get(
        self,
        key: Hashable,
        make: Callable[[], Result],
        room: Callable[[], int] | None = None,
        waiting: Waiting | None = None,
    ) -> Result:
        """The cached result for key, or make() once (callers of the same key meanwhile wait for it). `room()`: the
        bytes the result is expected to take. A miss nobody is making waits its turn at the gate (views/memory_gate.py:
        runs too large to make at once go one after another; `waiting(ahead)` is shown meanwhile), then room is made
        for it and every run in flight before make() runs, so that the old entries it would push out are not held
        beside it while it is made (a 512-piece SmolLM2 trace: 626 MB)."""
        value = self._get(key, make, room, waiting)
        self.gate.holding()  # this page now holds a result: its next run goes before new pages' (memory_gate.py)
        return value

    def _get(
        self, key: Hashable, make: Callable[[], Result], room: Callable[[], int] | None, waiting: Waiting | None
    ) -> Result:
        hit, maker = self._look_up(key)
        if hit:
            return maker
        if maker is not None:  # being made: wait for its maker, then read it (or make it, had the maker failed)
            with maker:
                pass
            return self.get(key, make, room, waiting)
        expected = 0 if room is None else room()
        # Through the gate first, then claim the key: a caller waiting at the gate holds no key, so a run in flight
        # that asks for a key (B's norm maps ask for B's trace) never waits for a caller that waits for it.
        with self.gate.admitted(expected, waiting):
            hit, maker = self._look_up(key, claim=True)
            if hit:
                return maker
            if maker is not None:  # claimed by a caller admitted meanwhile
                with maker:
                    pass
                return self.get(key, make, room, waiting)
            making = self._making[key]
            try:
                if room is not None:
                    limit = self._budget() - expected - self.gate.reserved_by_others()  # runs in flight too
                    with self._lock:
                        self._evict(limit)
                value = make()  # an error (a ConfigError the page shows) is not cached: the next caller tries again
                for array in arrays_in(value):
                    array.setflags(write=False)
                with self._lock:
                    self._entries[key] = (value, buffers_of(value))
                    self._evict(self._budget(), keep=key)
            finally:
                with self._lock:
                    self._making.pop(key, None)
                making.release()
        return value

    def _look_up(self, key: Hashable, claim: bool = False) -> tuple[bool, Any]:
        """(True, the result) on a hit; else (False, the lock of the caller making it), or (False, None) when nobody
        is, after which, with `claim`, this caller makes it: its lock is in _making, taken."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return True, self._entries[key][0]
            maker = self._making.get(key)
            if maker is None and claim:
                self._making[key] = threading.Lock()
                self._making[key].acquire()
            return False, maker

    def _evict(self, limit: int, keep: Hashable | None = None) -> None:
        """Drop the least recently used entries until they hold at most `limit` bytes, except `keep` and those a
        caller still holds (in_use): dropping those would free no memory, only the chance to read them again."""
        for key in list(self._entries):
            if self._held() <= limit:
                return
            if key != keep and not self._in_use(key):
                del self._entries[key]

    def _in_use(self, key: Hashable) -> bool:
        """Whether anything besides this cache holds the entry's result (a page running on it; a view of it, when the
        result is an array): CPython counts the references, and the cache's own entry and the count's argument make
        two. A caller holding one array out of a larger result (a trace's weights, not the trace) is not seen: the
        entry can go, freeing less than it counted, which lets the server hold more than the budget until that caller
        lets go. Counting such arrays' references instead would mistake one a torch tensor shares (torch.from_numpy)
        for a caller, and then keep the entry for good."""
        return sys.getrefcount(self._entries[key][0]) > 2

    def _pinned(self) -> int:
        """The bytes of the buffers of entries a caller still holds, each once: what no eviction can free."""
        with self._lock:
            return self._held([key for key in self._entries if self._in_use(key)])

    def _held(self, keys: Iterable[Hashable] | None = None) -> int:
        """The bytes of every buffer the entries (of `keys`, or all) hold, each once however many entries hold it."""
        held: dict[int, int] = {}
        # by key, not .items(): a name bound to a result would count as holding it (_in_use)
        for key in self._entries if keys is None else keys:
            held.update(self._entries[key][1])
        return sum(held.values())

    @property
    def bytes(self) -> int:
        """What the entries hold now."""
        with self._lock:
            return self._held()

    def keys(self) -> list[Hashable]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def values(self) -> list[Any]:
        """The results held, least recently used first."""
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def clear(self, prefix: str | None = None) -> None:
        """Drop every entry, or those of one cached function (keys start with its name)."""
        with self._lock:
            for key in [k for k in self._entries if prefix is None or k[0] == prefix]:
                del self._entries[key]


@contextlib.contextmanager
def waiting_notice(ahead: int) -> Iterator[Callable[[int], None]]:
    """What a page shows while its run waits at the gate: how many runs are ahead of it, counting down as they finish,
    and how long it has waited, told again at each look of the gate (a spinner's text, once shown, cannot change).
    Telling it is a Streamlit call: a script that a rerun left behind (a changed widget, Stop) stops there and leaves
    the line, instead of keeping its place until its turn."""
    notice = st.empty()
    start = time.monotonic()
    shown: list[tuple[int, int]] = []

    def tell(ahead: int) -> None:
        now = (ahead, int(time.monotonic() - start))
        if shown != [now]:
            shown[:] = [now]
            if ahead == 0:  # first in line, waiting for other pages to draw and let go of their results
                why = "the results other pages are drawing would not fit in its memory beside it"
            else:
                runs = "another run is" if ahead == 1 else f"{ahead} other runs are"
                why = f"{runs} ahead of it, and all of them at once would not fit in its memory"
            notice.info(f"Waiting its turn on this server: {why}. Waited {now[1]} s.", icon=":material/hourglass_top:")

    tell(ahead)
    try:
        yield tell
    finally:
        notice.empty()


SHARED = ByteBudgetCache()  # one budget for every large result of the app


def taking_turns(nbytes: int) -> AbstractContextManager:
    """Run a large pass that SHARED does not keep (a backward pass, each head removed in turn) at the same gate as its
    runs, expecting about `nbytes`. In a script run the page shows the waiting notice while it waits, beside the pass's
    own spinner or progress bar; inside st.cache_data, which replays the elements a function made, a cache hit
    replays the notice as the empty element it ends as."""
    return SHARED.gate.admitted(nbytes, waiting_notice if get_script_run_ctx() is not None else None)


def shared(
    spinner: str | None = None, cache: ByteBudgetCache = SHARED, room: Callable[..., int] | None = None
) -> Callable[[Callable[..., Result]], Any]:
    """Cache a function's results in `cache`, keyed on its name and arguments; keyword arguments named with a
    leading underscore are not part of the key (as with st.cache_*: something else in the key decides them).
    `spinner` is shown while a result is made (in a script run: a download's callable has no page). `room(*args,
    **kwargs)`: the bytes a result is expected to take (ByteBudgetCache.get). The plain function stays reachable
    as `__wrapped__`."""

    def wrap(function: Callable[..., Result]) -> Any:
        name = function.__qualname__

        @functools.wraps(function)
        def cached(*args: Hashable, **kwargs: Any) -> Result:
            keyed = tuple(sorted((k, v) for k, v in kwargs.items() if not k.startswith("_")))

            def make() -> Result:
                if spinner is None or get_script_run_ctx() is None:  # no page to spin on: a download's callable
                    return function(*args, **kwargs)
                with st.spinner(spinner):
                    return function(*args, **kwargs)

            expected = None if room is None else functools.partial(room, *args, **kwargs)
            waiting = waiting_notice if get_script_run_ctx() is not None else None
            return cache.get((name, args, keyed), make, expected, waiting)

        cached.clear = lambda: cache.clear(name)  # type: ignore[attr-defined]
        return cached

    return wrap
