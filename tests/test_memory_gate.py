"""views.memory_gate: large runs take turns when together they would not fit the budget; small ones never wait."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.build import build_model
from explorer.config import ModelConfig
from views import memory_gate, shared_cache
from views.caches import cached_gradients, gradient_totals
from views.memory_gate import SMALL_BYTES, MemoryGate
from views.shared_cache import SHARED, ByteBudgetCache, budget_bytes

MB = 1_000_000
BIG = 2 * SMALL_BYTES  # a run the gate weighs
BUDGET = 3 * BIG  # two BIG runs fit at once, four do not
WAIT_S = 10.0  # how long a test waits for a thread that should get there at once: only a hang takes that long


class Run:
    """A run on its own thread that holds the gate until released: started tells it got in, waiting that it
    queued."""

    def __init__(
        self, gate: MemoryGate, nbytes: int, log: list[str] | None = None, name: str = "", holds: bool = False
    ):
        """holds: the thread has read a cached result first, as Compare's page holds A's trace before it runs B."""
        self.started, self.waiting, self.release, self.done = (threading.Event() for _ in range(4))
        self.log, self.name, self.holds = log, name, holds
        self.told: list[int] = []  # the runs ahead of it, each time the gate told it while it waited
        self.thread = threading.Thread(target=self._run, args=(gate, nbytes), daemon=True)
        self.thread.start()

    @contextlib.contextmanager
    def _waiting(self, ahead: int) -> Iterator[Callable[[int], None]]:
        self.told.append(ahead)
        self.waiting.set()
        yield self.told.append

    def _run(self, gate: MemoryGate, nbytes: int) -> None:
        if self.holds:
            gate.holding()
        try:
            with gate.admitted(nbytes, self._waiting):
                if self.log is not None:
                    self.log.append(self.name)
                self.started.set()
                self.release.wait(WAIT_S)
        finally:
            self.done.set()

    def finish(self) -> None:
        self.release.set()
        assert self.done.wait(WAIT_S)


def gate(budget: int = BUDGET, pinned: Callable[[], int] = lambda: 0) -> MemoryGate:
    return MemoryGate(lambda: budget, pinned)


def test_a_run_that_would_not_fit_beside_those_in_flight_waits_for_them():
    """Six students' 512-piece SmolLM2 texts at once took a server to 5.1 GB; one at a time it stays under 2.5."""
    g = gate()
    first, second = Run(g, 2 * BIG), Run(g, 2 * BIG)  # 4 BIG > the budget
    assert first.started.wait(WAIT_S) or second.started.wait(WAIT_S)
    running, queued = (first, second) if first.started.is_set() else (second, first)
    assert queued.waiting.wait(WAIT_S) and not queued.started.is_set()
    running.finish()
    assert queued.started.wait(WAIT_S)
    queued.finish()


def test_runs_that_fit_together_run_at_once_and_small_ones_never_wait():
    g = gate()
    runs = [Run(g, BIG), Run(g, BIG), Run(g, SMALL_BYTES)]  # 2 BIG fit; the small one is not weighed at all
    assert all(run.started.wait(WAIT_S) for run in runs)  # all three in flight together
    assert not any(run.waiting.is_set() for run in runs)
    for run in runs:
        run.finish()


def test_a_run_larger_than_the_whole_budget_still_runs_alone():
    g = gate()
    huge = Run(g, 10 * BUDGET)
    assert huge.started.wait(WAIT_S)
    later = Run(g, BIG)
    assert later.waiting.wait(WAIT_S) and not later.started.is_set()
    huge.finish()
    assert later.started.wait(WAIT_S)
    later.finish()


def test_waiting_runs_go_first_come_first_served():
    g, order = gate(), []
    first = Run(g, 2 * BIG, order, "first")
    assert first.started.wait(WAIT_S)
    second = Run(g, 2 * BIG, order, "second")
    assert second.waiting.wait(WAIT_S)
    third = Run(g, BIG, order, "third")  # would fit beside first, but second is ahead of it in line
    assert third.waiting.wait(WAIT_S) and not third.started.is_set()
    first.finish()
    assert second.started.wait(WAIT_S) and third.started.wait(WAIT_S)  # 2 BIG + BIG fit the budget together
    second.finish()
    third.finish()
    assert order == ["first", "second", "third"]


def test_a_waiting_caller_is_told_the_runs_ahead_of_it_as_they_finish():
    """The page's notice counts down: two ahead (one in flight, one in line), then one, as the run in flight ends."""
    g = gate()
    first = Run(g, 2 * BIG)
    assert first.started.wait(WAIT_S)
    second = Run(g, 2 * BIG)
    assert second.waiting.wait(WAIT_S)
    third = Run(g, 2 * BIG)
    assert third.waiting.wait(WAIT_S)
    assert third.told == [2]
    first.finish()
    assert second.started.wait(WAIT_S)
    assert until(lambda: third.told[-1] == 1)  # told at the gate's next look, within POLL_S
    assert not third.started.is_set()
    second.finish()
    assert third.started.wait(WAIT_S)
    assert set(third.told) == {2, 1}  # never more runs ahead than when it came, nor "0 ahead" as it goes
    third.finish()


def test_memory_pinned_by_pages_counts_against_the_budget():
    """Compare holds A's trace while B's runs: a third run beside them must see A's bytes too."""
    pinned = [0]
    g = gate(pinned=lambda: pinned[0])
    first = Run(g, BIG)
    assert first.started.wait(WAIT_S)
    pinned[0] = 2 * BIG  # first's BIG + 2 BIG pinned + BIG > the budget
    second = Run(g, BIG)
    assert second.waiting.wait(WAIT_S) and not second.started.is_set()
    first.finish()
    assert second.started.wait(WAIT_S)  # 2 BIG pinned + its BIG fit the budget once first is done
    second.finish()


def test_a_page_that_holds_results_goes_before_a_page_that_holds_none():
    """Six Compare pages at once, each letting the next page's A run before its own B, held six A traces: 5.8 GB."""
    g, order = gate(), []
    first = Run(g, 2 * BIG, order, "first")
    assert first.started.wait(WAIT_S)
    new = Run(g, 2 * BIG, order, "a new page")
    assert new.waiting.wait(WAIT_S)
    holder = Run(g, 2 * BIG, order, "a page holding its A", holds=True)
    assert holder.waiting.wait(WAIT_S)
    first.finish()
    assert holder.started.wait(WAIT_S)
    holder.finish()
    assert new.started.wait(WAIT_S)
    new.finish()
    assert order == ["first", "a page holding its A", "a new page"]


def test_a_new_page_waits_for_the_results_other_pages_hold_until_they_let_go():
    """They let go once drawn, without a word to the gate: it looks again (POLL_S)."""
    pinned = [2 * BIG]  # another page draws from its results: 2 BIG + 2 BIG > the budget
    g = gate(pinned=lambda: pinned[0])
    new = Run(g, 2 * BIG)
    assert new.waiting.wait(WAIT_S) and not new.started.is_set()
    pinned[0] = 0
    assert new.started.wait(WAIT_S)
    new.finish()
    pinned[0] = 2 * BIG
    holder = Run(g, 2 * BIG, holds=True)  # a page holding results of its own does not wait for them
    assert holder.started.wait(WAIT_S) and not holder.waiting.is_set()
    holder.finish()


def test_a_new_page_stops_waiting_for_results_held_for_good(monkeypatch):
    monkeypatch.setattr(memory_gate, "PINNED_WAIT_S", 0.3)
    g = gate(pinned=lambda: 2 * BIG)  # never let go
    new = Run(g, 2 * BIG)
    assert new.waiting.wait(WAIT_S)
    assert new.started.wait(WAIT_S)  # after 0.3 s first in line
    new.finish()


def test_a_run_started_inside_another_on_the_same_thread_does_not_wait_for_itself():
    g, inner = gate(), threading.Event()

    def nested() -> None:
        with g.admitted(2 * BIG), g.admitted(2 * BIG):
            inner.set()

    threading.Thread(target=nested, daemon=True).start()  # on its own thread, so that a broken gate fails, not hangs
    assert inner.wait(WAIT_S)
    other = Run(g, 2 * BIG)  # and the gate is free again afterwards
    assert other.started.wait(WAIT_S)
    other.finish()


@pytest.mark.parametrize("when", ["as it starts waiting", "when told again"])
def test_a_caller_stopped_while_it_waits_leaves_the_line(when):
    """A rerun stops a waiting script at the Streamlit call that tells it of its wait, the first or a later one: its
    place in line must not block everyone after it."""
    g = gate()
    first = Run(g, 2 * BIG)
    assert first.started.wait(WAIT_S)

    def stop(ahead: int) -> None:
        raise RuntimeError("stopped")

    @contextlib.contextmanager
    def stopped(ahead: int) -> Iterator[Callable[[int], None]]:
        if when == "as it starts waiting":
            stop(ahead)
        yield stop

    with pytest.raises(RuntimeError), g.admitted(2 * BIG, stopped):
        pytest.fail("a stopped caller never runs")
    later = Run(g, 2 * BIG)
    assert later.waiting.wait(WAIT_S)
    first.finish()
    assert later.started.wait(WAIT_S)
    later.finish()


def slow_make(nbytes: int) -> tuple[Callable[[], np.ndarray], threading.Event, threading.Event]:
    """A make() that waits to be released: (make, in_make, release)."""
    in_make, release = threading.Event(), threading.Event()

    def make() -> np.ndarray:
        in_make.set()
        assert release.wait(WAIT_S)
        return np.zeros(nbytes, dtype=np.uint8)

    return make, in_make, release


def test_the_shared_cache_makes_large_misses_take_turns():
    cache = ByteBudgetCache(budget=lambda: BUDGET)
    make, in_make, release = slow_make(2 * BIG)
    waited, made = threading.Event(), []

    def note_wait(ahead: int) -> contextlib.AbstractContextManager:
        waited.set()
        return contextlib.nullcontext(lambda ahead: None)

    first = threading.Thread(target=lambda: cache.get("a", make, room=lambda: 2 * BIG))
    first.start()
    assert in_make.wait(WAIT_S)
    second = threading.Thread(
        target=lambda: cache.get("b", lambda: made.append(1) or np.zeros(1), room=lambda: 2 * BIG, waiting=note_wait)
    )
    second.start()
    assert waited.wait(WAIT_S) and not made  # 2 BIG in flight + 2 BIG > the budget: b waits for a
    release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert made == [1] and set(cache.keys()) <= {"a", "b"}


def test_the_shared_cache_makes_room_for_the_runs_in_flight_too():
    """Room made for a new result alone left the old entries beside a run in flight, whose result then came on top."""
    cache = ByteBudgetCache(budget=lambda: BUDGET)
    cache.get("old", lambda: np.zeros(BIG, dtype=np.uint8))
    make, in_make, release = slow_make(2 * BIG)
    first = threading.Thread(target=lambda: cache.get("a", make, room=lambda: 2 * BIG))
    first.start()
    assert in_make.wait(WAIT_S) and cache.keys() == ["old"]  # BIG + 2 BIG in flight fit the budget
    cache.get("small", lambda: np.zeros(1), room=lambda: SMALL_BYTES)  # never waits, but 2 BIG are in flight
    assert cache.keys() == ["small"]  # old went: BIG + SMALL + 2 BIG in flight are over the budget
    release.set()
    first.join(WAIT_S)
    assert cache.keys() == ["small", "a"]


def test_a_run_in_flight_that_asks_for_a_result_does_not_wait_for_a_caller_waiting_at_the_gate_for_it():
    """B's norm maps, in flight, ask for B's trace, which another session's page, waiting its turn, is about to make:
    had that session held the trace's key while it waited, each would wait for the other for good."""
    cache = ByteBudgetCache(budget=lambda: BUDGET)
    go, inner_made = threading.Event(), []

    def outer() -> np.ndarray:
        assert go.wait(WAIT_S)
        cache.get("inner", lambda: inner_made.append("by the run in flight") or np.zeros(1), room=lambda: 2 * BIG)
        return np.zeros(1)

    def waiter() -> None:
        cache.get("inner", lambda: inner_made.append("by the waiter") or np.zeros(1), room=lambda: 2 * BIG)

    in_flight = threading.Thread(target=lambda: cache.get("outer", outer, room=lambda: 2 * BIG), daemon=True)
    in_flight.start()
    assert until(lambda: cache.gate.reserved_by_others() == 2 * BIG)  # outer is through the gate
    waiting = threading.Thread(target=waiter, daemon=True)
    waiting.start()
    assert until(lambda: cache.gate.queued == 1)  # 2 BIG in flight + 2 BIG > the budget: the waiter waits
    go.set()
    in_flight.join(WAIT_S)
    waiting.join(WAIT_S)
    assert not in_flight.is_alive() and not waiting.is_alive()
    assert inner_made == ["by the run in flight"]  # made once; the waiter then read it


def over_the_shared_budget() -> int:
    """A run larger than the app's whole budget, whatever ATTENTION_EXPLORER_MEMORY_MB this machine sets: it runs
    alone, and any other large run waits for it."""
    return 2 * budget_bytes()


def until(condition: Callable[[], bool]) -> bool:
    """Whether condition() comes true within WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


LONG_CFG = ModelConfig(n_layers=4, n_heads=8, d_model=64, d_ff=256)  # 512 tokens: a 43 MB trace, > SMALL_BYTES
LONG_TEXT = " ".join(f"w{i % 50}" for i in range(512))


@pytest.mark.parametrize(
    "backward_pass",
    [
        lambda: cached_gradients.__wrapped__(LONG_CFG, tuple(LONG_TEXT.split()), None, _model=build_model(LONG_CFG)),
        lambda: gradient_totals.__wrapped__(LONG_CFG, LONG_CFG, LONG_TEXT, None, None),
    ],
    ids=["activations", "compare"],
)
def test_a_backward_pass_on_a_long_text_waits_at_the_same_gate_as_the_runs(backward_pass):
    """A gradient pass holds about a trace's bytes at its peak: students asking for it at once take turns too."""
    huge = Run(SHARED.gate, over_the_shared_budget())
    assert huge.started.wait(WAIT_S)
    result = []
    worker = threading.Thread(target=lambda: result.append(backward_pass()), daemon=True)
    worker.start()
    try:
        assert until(lambda: SHARED.gate.queued == 1) and not result
    finally:
        huge.finish()
    worker.join(60)
    assert len(result) == 1 and len(result[0]) > 0


def page_with_a_pass_taking_turns(nbytes: int) -> None:
    """A page that runs a large pass the shared cache does not keep (AppTest runs this function's source)."""
    import streamlit as st

    from views.shared_cache import taking_turns

    with taking_turns(nbytes):
        st.write("the pass ran")


def test_a_pass_taking_turns_in_a_page_shows_the_page_the_waiting_notice(monkeypatch):
    """A backward pass or the ablation board waiting at the gate tells its page so, as the shared cache's runs do;
    here a real script run waits behind one run in flight."""
    told = []
    notice = shared_cache.waiting_notice

    @contextlib.contextmanager
    def recorded(ahead: int) -> Iterator[Callable[[int], None]]:
        told.append(ahead)
        with notice(ahead) as tell:
            yield lambda now: (told.append(now), tell(now))

    monkeypatch.setattr(shared_cache, "waiting_notice", recorded)
    in_flight = Run(SHARED.gate, over_the_shared_budget())  # the page's pass waits until it ends
    assert in_flight.started.wait(WAIT_S)
    ender = threading.Thread(target=lambda: until(lambda: SHARED.gate.queued == 1) and in_flight.finish())
    ender.start()
    at = AppTest.from_function(page_with_a_pass_taking_turns, args=(BIG,), default_timeout=WAIT_S).run()
    ender.join(WAIT_S)
    assert not at.exception and [m.value for m in at.markdown] == ["the pass ran"]
    assert told and told[0] == 1  # one run ahead of it: the one in flight
    assert not [a for a in at.info if "Waiting its turn" in a.value]  # gone once the pass ran
