"""Compare's two runs as the way to make them again: what the attention fragment and the downloads keep instead of
the traces and their maps, so that once the page is drawn the shared cache is the only holder of both traces
(views/state.py). Each call reads them from the cache, or makes them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from explorer.analysis.norm_attention import removal
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

    def removals(self, index: int, layer: int, head: int) -> tuple[str | None, str | None]:
        """norm_attention.removal of head `head` of `layer` on A's side and on B's of the `index`-th pair: the first
        pair is always the first stack's self-attention, the one removal reads (the pair's own maps may be a copy
        lined up to A's tokens)."""
        if index != 0:
            return None, None
        trace_a, trace_b = self.traces()
        in_b = None if trace_b is None else removal(trace_b, trace_b.first.self_attention, layer, head)
        return removal(trace_a, trace_a.first.self_attention, layer, head), in_b

    def measured_head(self, index: int, layer: int, head: int) -> MapPair:
        """The `index`-th pair of measured(), to draw head `head` of `layer`: a side that replaced that head by its
        mean sends it to every query from every key (norm_attention.mean_mixing), so its cells are all allowed, masked
        ones included, where its other heads add nothing; draw no other head from it."""
        pair = self.measured()[index]
        reach_a, reach_b = (
            None if maps is None or removed != "mean" else replace(maps, allowed=np.ones_like(maps.allowed))
            for maps, removed in zip((pair.a, pair.b), self.removals(index, layer, head), strict=True)
        )
        return replace(pair, a=reach_a or pair.a, b=reach_b or pair.b)

    def _lined_up(self, pairs: list[MapPair]) -> list[MapPair]:
        return pairs if self.order is None else [align_pair(pair, list(self.order)) for pair in pairs]

    def _norms(self, trace: Trace, kind: str):
        return norm_attention_with(trace, kind, self.who, self.model_a)

    def _b_norms(self, trace_b: Trace, kind: str):
        if self.b_norms is None:
            return self._norms(trace_b, kind)
        return compare_norms(*self.b_norms, self.who, kind)
