"""The app's byte-bounded shared cache (views.shared_cache): what it keeps, what it drops first, and for whom."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import explorer
from views.shared_cache import BUDGET_ENV, DEFAULT_BUDGET_MB, ByteBudgetCache, budget_bytes, buffers_of, shared

MB = 1_000_000


def held_bytes(value) -> int:
    """The bytes the cache counts for a result: each buffer its arrays hold, once."""
    return sum(buffers_of(value).values())


def block(megabytes: float) -> np.ndarray:
    return np.zeros(int(megabytes * MB), dtype=np.uint8)


def test_the_least_recently_used_results_go_first_once_the_bytes_pass_the_budget():
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    for name in "abc":
        cache.get(name, lambda: block(3))
    cache.get("a", lambda: pytest.fail("a is cached"))  # a is now the most recently used
    cache.get("d", lambda: block(3))  # 12 MB > 10: b, the least recently used, goes
    assert cache.keys() == ["c", "a", "d"]
    assert cache.bytes == 9 * MB


def test_an_array_two_results_hold_counts_once_while_either_holds_it():
    """Positional's reordering demo holds the page trace's attention weights (283 MB for SmolLM2 on 512 pieces):
    counted in both entries, the cache had let other results go for memory it did not hold."""
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    trace = cache.get(("trace",), lambda: (block(6), block(1)))
    demo = (trace[0], block(2))
    cache.get(("demo",), lambda: demo)  # 9 MB held, not 15: nothing goes
    assert cache.keys() == [("trace",), ("demo",)] and cache.bytes == 9 * MB
    cache.clear("trace")
    assert cache.bytes == 8 * MB  # the demo still holds the shared 6 MB


def test_a_result_larger_than_the_whole_budget_is_still_kept_alone():
    """The page that asked for it reads it again on every rerun; dropping it at once would rerun the model each time."""
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    cache.get("small", lambda: block(1))
    big = cache.get("big", lambda: block(25))
    assert cache.keys() == ["big"]
    assert cache.get("big", lambda: pytest.fail("big is cached")) is big


def test_a_result_a_caller_still_holds_is_not_dropped_since_that_would_free_nothing():
    """Compare holds A's and B's traces while it runs: dropping A to make B, when the page still holds A, freed no
    memory, and the page made A again at once (and then B, and so on: 10 s for SmolLM2 on 512 pieces)."""
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    held = cache.get("a", lambda: block(6))
    cache.get("b", lambda: block(6), room=lambda: 6 * MB)  # a is held: it stays, over the budget
    assert cache.keys() == ["a", "b"] and cache.bytes == 12 * MB
    view = held[:10]  # a view of an array holds it too
    del held
    cache.get("c", lambda: block(1))  # 13 MB: b, held by nobody, goes; a, seen through the view, stays
    assert cache.keys() == ["a", "c"]
    del view
    cache.get("d", lambda: block(4))  # 11 MB: now a goes, the least recently used
    assert cache.keys() == ["c", "d"]


def test_room_for_a_result_is_made_before_it_is_made_so_old_entries_are_not_held_beside_it():
    """A new 512-piece SmolLM2 trace (628 MB) made beside the old ones it then pushes out had taken a server's peak
    past 2.6 GB; made after them, the peak holds one less trace."""
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    for name in "abc":
        cache.get(name, lambda: block(3))
    held_while_made = []

    def make() -> np.ndarray:
        held_while_made.append(cache.keys())
        return block(5)

    cache.get("d", make, room=lambda: 5 * MB)  # 9 + 5 > 10: a and b go first, c (3 MB) fits beside 5
    assert held_while_made == [["c"]]
    assert cache.keys() == ["c", "d"]
    cache.get("e", lambda: held_while_made.append(cache.keys()) or block(1), room=lambda: 50 * MB)
    assert held_while_made[-1] == [] and cache.keys() == ["e"]  # larger than the budget: everything goes first
    cache.get("e", lambda: pytest.fail("e is cached"), room=lambda: pytest.fail("a hit makes no room"))


def test_the_decorator_asks_its_room_with_the_calls_arguments_only_on_a_miss():
    cache = ByteBudgetCache(budget=lambda: 10 * MB)
    cache.get("old", lambda: block(8))
    asked = []

    @shared(cache=cache, room=lambda megabytes, _tag=None: asked.append((megabytes, _tag)) or int(megabytes * MB))
    def made(megabytes: float, _tag: str | None = None) -> np.ndarray:
        return block(megabytes)

    made(4, _tag="x")
    made(4, _tag="y")  # a hit
    held = cache.keys()
    assert asked == [(4, "x")] and [args for _, args, _ in held] == [(4,)]  # 8 + 4 > 10: the old one went first


def test_what_is_cached_is_shared_not_copied_and_read_only():
    cache = ByteBudgetCache(budget=lambda: 100 * MB)
    trace = cache.get("t", lambda: explorer.run(explorer.ModelConfig(n_layers=1, d_model=16, d_ff=32), "a b c"))
    assert cache.get("t", lambda: None) is trace
    assert held_bytes(trace) > 0
    with pytest.raises(ValueError, match="read-only"):
        trace.attention[0, 0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        trace.first.activations["blocks.0.ffn.hidden"][0, 0] = 1.0


def test_size_counts_every_array_of_a_trace_once():
    trace = explorer.run(explorer.ModelConfig(n_layers=2, d_model=16, d_ff=32), "a b c d")
    stack = trace.first
    arrays = [
        stack.self_attention.weights,
        stack.self_attention.scores,
        stack.self_attention.allowed,
        stack.residual,
        stack.output,
        *stack.activations.values(),
    ]
    assert held_bytes(trace) == sum(a.nbytes for a in arrays)


def test_size_counts_a_view_of_another_array_of_the_result_once():
    trace = explorer.run(explorer.ModelConfig(n_layers=2, d_model=16, d_ff=32, norm="pre"), "a b c d")
    stack = trace.first
    views = [a for a in stack.activations.values() if a.base is stack.residual]  # each block's attn.ln_in
    assert len(views) == 2
    arrays = [stack.self_attention.weights, stack.self_attention.scores, stack.self_attention.allowed]
    arrays += [stack.residual, stack.output, *(a for a in stack.activations.values() if a.base is not stack.residual)]
    assert held_bytes(trace) == sum(a.nbytes for a in arrays)
    assert held_bytes([stack.residual[1:], stack.residual[0]]) == stack.residual.nbytes  # what is held: the whole base


def test_an_error_is_not_cached_and_the_next_caller_tries_again():
    cache = ByteBudgetCache(budget=lambda: MB)
    with pytest.raises(ValueError):
        cache.get("k", lambda: (_ for _ in ()).throw(ValueError("no")))
    assert cache.get("k", lambda: block(0.1)).nbytes == 100_000


def test_callers_of_one_key_at_once_make_it_once():
    """Thirty students opening one link: one runs the model, the others wait for its result."""
    cache = ByteBudgetCache(budget=lambda: 100 * MB)
    made = []

    def make() -> np.ndarray:
        made.append(1)
        time.sleep(0.2)  # long enough that every thread asks while the first is still making it
        return block(1)

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", make))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1
    assert all(result is results[0] for result in results)


def test_the_decorator_keys_on_the_function_and_its_arguments_but_not_underscored_ones():
    cache = ByteBudgetCache(budget=lambda: 100 * MB)
    calls = []

    @shared(cache=cache)
    def doubled(x: int, _big: object = None) -> np.ndarray:
        calls.append(x)
        return np.full(4, 2 * x)

    assert doubled(1, _big="one").tolist() == [2] * 4
    assert doubled(1, _big="another").tolist() == [2] * 4  # _big is not part of the key
    doubled(2)
    assert calls == [1, 2]
    assert doubled.__wrapped__(3).tolist() == [6] * 4
    doubled.clear()
    doubled(1)
    assert calls == [1, 2, 3, 1]  # __wrapped__ ran the function itself; after clear() 1 is made again


def test_the_budget_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert budget_bytes() == DEFAULT_BUDGET_MB * MB
    monkeypatch.setenv(BUDGET_ENV, "1500")
    assert budget_bytes() == 1500 * MB
    monkeypatch.setenv(BUDGET_ENV, "a lot")
    assert budget_bytes() == DEFAULT_BUDGET_MB * MB  # junk: the default, with a warning in the log
