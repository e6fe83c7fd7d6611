"""Compare's "All four placements" against the two-model Compare it sits in: what a first visitor of a link waits for.

For each model (a configured BERT-base-sized encoder, 12 x 12 heads, d_model 768, on 64 tokens, the Compare bench's
case; MiniLM; with --smollm SmolLM2), two measurements, each the median of --rounds, both sides interleaved:

1. Engine: the work each part of the page does on a cold cache. Two-model Compare: A's trace, B built on A's weights
   (model_for_b, the norm flipped as the page's default B), B's trace, both gradient totals, the per-layer tables and
   the head ranking. Four placements: placement_run on A's model with B's model and A's and B's traces and gradient
   totals lent, as the page lends them (the two other placements built, run and differentiated), and with nothing
   lent (what a notebook's explorer.placement_run pays: four placements against Compare's two).
2. Page (streamlit.testing.v1.AppTest, in this process, every st.cache_* cleared before each run, a checkpoint kept
   loaded as a server keeps it): the Compare page with the expander closed, then opened (?placements=true). The
   view's share is the difference. Drawing one more Plotly figure in the browser is not in it (about 0.3 s per
   chart here: docs/performance.md, Page load).

Printed: the seconds of each and the ratio view / two-model Compare (target <= 2x).

Usage: python bench/bench_placements_view.py [--rounds N] [--smollm] [--strict]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sentences import words

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

import explorer  # noqa: E402
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals  # noqa: E402
from explorer.analysis.placements import placement_run  # noqa: E402
from explorer.compare import default_b, head_ranking, layer_values, model_for_b, per_layer_comparison  # noqa: E402
from explorer.config import ModelConfig  # noqa: E402
from views import caches  # noqa: E402

TARGET = 2.0  # four-placement view / two-model Compare
APP = str(ROOT / "dashboard.py")
CONFIGURED = {"n_layers": 12, "n_heads": 12, "d_model": 768, "d_ff": 3072}
SENTENCE = "The cat sat on the mat because it was tired."


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def two_model_compare(model: explorer.Transformer, text: str) -> dict:
    """What the Compare page computes for A and its default B (the engine's part); what it leaves for the view."""
    a = model.config
    trace_a = explorer.run(model, text)
    model_b = model_for_b(model, default_b(a))
    trace_b = explorer.run(model_b, text)
    grads_a = layer_gradient_totals(gradient_norms(model, text))
    grads_b = layer_gradient_totals(gradient_norms(model_b, text))
    per_layer_comparison(layer_values(trace_a.first, grads_a), layer_values(trace_b.first, grads_b))
    head_ranking(trace_a.first.self_attention, trace_b.first.self_attention)
    b = default_b(a).norm
    return {"built": {b: model_b}, "known": {a.norm: (trace_a, grads_a), b: (trace_b, grads_b)}}


def page_run(query: dict[str, str]) -> float:
    """One cold run of the Compare page (every cache cleared first), in seconds."""
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=900)
    at.query_params.update(query)
    at.switch_page("views/compare.py")
    seconds = timed(at.run)
    if at.exception:
        raise RuntimeError(at.exception[0].value)
    return seconds


def median(values: list[float]) -> float:
    return statistics.median(values)


def bench(name: str, model: explorer.Transformer, text: str, query: dict[str, str], rounds: int) -> list[float]:
    """Prints one model's lines; returns its two ratios (engine, page)."""
    lent = two_model_compare(model, text)
    times: dict[str, list[float]] = {k: [] for k in ("compare", "view", "view alone", "page", "page+view")}
    for _ in range(rounds + 1):  # round 0 warms torch's kernels and allocator, and the imports: left out
        times["compare"].append(timed(lambda: two_model_compare(model, text)))
        times["view"].append(timed(lambda: placement_run(model, text, **lent)))
        times["view alone"].append(timed(lambda: placement_run(model, text)))
        times["page"].append(page_run(query))
        times["page+view"].append(page_run(query | {"placements": "true"}))
    m = {k: median(v[1:]) for k, v in times.items()}
    engine, alone = m["view"] / m["compare"], m["view alone"] / m["compare"]
    view_on_page = m["page+view"] - m["page"]
    page = view_on_page / m["page"]
    verdict = {True: "ok", False: "OVER"}
    print(f"{name}")
    print(f"  engine: two-model Compare {m['compare']:.2f}s · four placements with A and B lent {m['view']:.2f}s, "
          f"ratio {engine:.2f}x (target <= {TARGET}x) {verdict[engine <= TARGET]} · with nothing lent "
          f"{m['view alone']:.2f}s, {alone:.2f}x")  # fmt: skip
    print(f"  page, cold: Compare {m['page']:.2f}s · with the view open {m['page+view']:.2f}s · the view "
          f"{view_on_page:.2f}s · ratio {page:.2f}x (target <= {TARGET}x) {verdict[page <= TARGET]}")  # fmt: skip
    return [engine, page]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every measurement (default 3; median)")
    parser.add_argument("--smollm", action="store_true", help="also SmolLM2 (30 layers, 135 M parameters)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a ratio misses the target")
    args = parser.parse_args()
    tokens = words(64)
    cases = [("configured, 12 x 12 heads, d_model 768, 64 tokens", explorer.build_model(ModelConfig(**CONFIGURED)),
              tokens, {k: str(v) for k, v in CONFIGURED.items()} | {"tokens": tokens})]  # fmt: skip
    names = ["minilm-l6"] + (["smollm2-135m"] if args.smollm else [])
    for checkpoint in names:
        model = explorer.load_pretrained(checkpoint)
        caches._CHECKPOINTS[checkpoint] = model  # as a server keeps it after its first visitor
        text = SENTENCE if checkpoint == "minilm-l6" else "The capital of France is"
        cases.append((f"{checkpoint}, {text!r}", model, text, {"model": checkpoint, "tokens": text}))
    rounds = f"median of {args.rounds} rounds after a warming one (cold caches each time)"
    print(f"Four placements vs the two-model Compare, {rounds}")
    ratios = [r for case in cases for r in bench(*case, args.rounds)]
    if args.strict and max(ratios) > TARGET:
        sys.exit(1)


if __name__ == "__main__":
    main()
