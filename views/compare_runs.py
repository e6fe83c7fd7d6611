"""Compare's two runs as the way to make them again: what the attention fragment and the downloads keep instead of
the traces and their maps, so that once the page is drawn the shared cache is the only holder of both traces
(views/state.py). Each call reads them from the cache, or makes them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from explorer.compare import MapPair, align_pair, paired_attention
from explorer.model import Transformer
from explorer.trace import AttentionMaps, Trace
from views.caches import compare_norms
from views.trace_caches import norm_attention_with


@dataclass(frozen=True)
class ComparedRuns:
    """A's run and B's (None when B is not drawn), B's maps lined up to A's tokens by `order` when given. It works
    outside the script run too (a download's callable): it reads nothing from the session."""

    make_a: Callable[[], Trace]  # the sidebar's run (views.state.trace_maker)
    make_b: Callable[[], Trace] | None  # a cached run and its keys (views.caches.trace_of)
    order: tuple[int, ...] | None  # token_order of B's tokens to A's, or None: B's maps in their own order
    who: str | None  # views.state.model_key() of the session: keys the norms of a trained model
    model_a: Transformer  # the session's model (A's), whose heads' norms A's side shows
    b_norms: tuple | None = None  # compare_norms' leading arguments (A, B, B's text, B's target) when B is another
    # model; None when B is A's own model (its norms are the session model's on B's trace, as A's)

    def traces(self) -> tuple[Trace, Trace | None]:
        return self.make_a(), None if self.make_b is None else self.make_b()

    def pairs(self) -> list[MapPair]:
        """paired_attention of the two runs, B's maps lined up to A's tokens when `order` is given."""
        return self._lined_up(paired_attention(*self.traces()))

    def measured(self) -> list[MapPair]:
        """The same pairs carrying ‖α·f(x)‖ as their weights, B's from B's own model (lined up as `pairs`)."""
        trace_a, trace_b = self.traces()

        def norms_of(maps: AttentionMaps | None, trace: Trace | None, norms) -> AttentionMaps | None:
            return None if maps is None or trace is None else replace(maps, weights=norms(trace, maps.kind))

        measured = [
            MapPair(
                pair.label, pair.stack, norms_of(pair.a, trace_a, self._norms), norms_of(pair.b, trace_b, self._b_norms)
            )
            for pair in paired_attention(trace_a, trace_b)
        ]
        return self._lined_up(measured)

    def _lined_up(self, pairs: list[MapPair]) -> list[MapPair]:
        return pairs if self.order is None else [align_pair(pair, list(self.order)) for pair in pairs]

    def _norms(self, trace: Trace, kind: str):
        return norm_attention_with(trace, kind, self.who, self.model_a)

    def _b_norms(self, trace_b: Trace, kind: str):
        if self.b_norms is None:
            return self._norms(trace_b, kind)
        return compare_norms(*self.b_norms, self.who, kind)
