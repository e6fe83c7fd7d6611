"""Attention flow, rollout and norm-based attention on the real checkpoints: how long they take and what they cost.

1. attention_flow (explorer.analysis.mixing, scipy's maximum_flow): one query row (the last position, what the Mixing
   page draws as "which input tokens reach the prediction") and every row, for MiniLM at 16, 32, 64 pieces and
   SmolLM2 at 16, 32. One row solves T max-flow problems, every row T x T, each on a graph of L x T x T edges.
2. How flow scales: the exponent of a power-law fit of the time against tokens (MiniLM, 6 layers) and against layers
   (SmolLM2's first 5, 10, 20, 30 layers at 16 pieces). Then the page's limit: every case's work (max-flow problems
   x edges each, explorer.mixing_text.flow_work) against its time, whether the page offers it, and the worst
   seconds per unit, which sets FLOW_PAGE_MAX_WORK so that the page's flow stays within 3 s.
3. norm_attention for SmolLM2 at 512 pieces: time, and the extra memory (tracemalloc peak of numpy's allocations, and
   the peak resident memory sampled every millisecond during the call) against trace.attention's bytes, as a ratio.
4. attention_rollout: its time at the same sizes.

Usage: python bench/bench_mixing.py [--quick]   (--quick: skip SmolLM2 at 512 pieces and every row at 64 pieces)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sentences import SENTENCE, words
from serve import status_kb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import explorer  # noqa: E402
from explorer.analysis.mixing import (  # noqa: E402
    attention_flow_rows,
    attention_rollout,
    flow_edges,
)
from explorer.analysis.norm_attention import norm_attention  # noqa: E402
from explorer.config import ModelConfig  # noqa: E402
from explorer.mixing_text import FLOW_PAGE_MAX_WORK, flow_max_tokens, flow_offered, flow_work  # noqa: E402

PAGE_SECONDS = 3.0  # the bound on flow where the page draws it
MINILM_PIECES = (16, 32, 64)
SMOLLM_PIECES = (16, 32)
SMOLLM_LAYERS = (5, 10, 20, 30)
LONG = 512
CONFIGURED_TOKENS = (44, 58, 64, 83)  # every row on 2 layers: 44 tokens is the last the page offers
ROW_PIECES = {"MiniLM": (110, 158, 192), "SmolLM2": (64, 92, 128)}  # one row: 110 and 64 are the page's last


def text_of(model: explorer.Transformer, pieces: int) -> str:
    """The bench sentence, repeated and cut at the last word that keeps the text within `pieces` pieces (specials
    counted)."""
    words = ((SENTENCE + " ") * (pieces // 2 + 2)).split()
    low, high = 1, len(words)  # longest prefix within `pieces`: pieces grow with words
    while low < high:
        mid = (low + high + 1) // 2
        if len(model.tokenizer.encode(" ".join(words[:mid])).ids) <= pieces:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def seconds(work: Callable[[], object], repeat: int = 1) -> float:
    """The best of `repeat` wall-clock times of work()."""
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def first_layers(trace: explorer.Trace, n_layers: int) -> explorer.Trace:
    """The trace with only its first stack's first `n_layers` self-attention maps: what flow reads, for a
    graph of fewer layers on the same tokens."""
    stack = trace.first
    maps = stack.self_attention
    short = dataclasses.replace(maps, weights=maps.weights[:n_layers], scores=maps.scores[:n_layers])
    return dataclasses.replace(trace, stacks=(dataclasses.replace(stack, self_attention=short), *trace.stacks[1:]))


def slope(xs: list[float], ys: list[float]) -> float:
    """The exponent k of the least-squares fit y = c x^k."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def resident_bytes() -> int:
    """This process's resident memory now (VmRSS)."""
    return status_kb("VmRSS") * 1024


def peak_during(work: Callable[[], object]) -> tuple[object, float, int, int]:
    """(result, seconds, tracemalloc peak bytes, peak resident bytes above the start) of one call of work()."""
    gc.collect()
    start_rss = resident_bytes()
    peak = [start_rss]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], resident_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    tracemalloc.start()
    sampler.start()
    start = time.perf_counter()
    result = work()
    took = time.perf_counter() - start
    done.set()
    sampler.join()
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, took, traced, max(peak[0], resident_bytes()) - start_rss


def flow_table(name: str, model: explorer.Transformer, pieces: tuple[int, ...], every_row_up_to: int) -> list[dict]:
    """Flow and rollout times for one model at each length: one row, and every row up to `every_row_up_to` pieces."""
    rows = []
    for n in pieces:
        trace = explorer.run(model, text_of(model, n))
        tokens = len(trace.tokens)
        edges = flow_edges(trace)
        one = seconds(lambda trace=trace, tokens=tokens: attention_flow_rows(trace, [tokens - 1]), repeat=3)
        every = seconds(lambda trace=trace: attention_flow_rows(trace)) if n <= every_row_up_to else math.nan
        roll = seconds(lambda trace=trace: attention_rollout(trace), repeat=5)
        rows.append({"model": name, "layers": trace.attention.shape[0], "tokens": tokens, "edges": edges,
                     "one_row": one, "every_row": every, "rollout": roll})  # fmt: skip
        every_text = "    (skipped)" if math.isnan(every) else f"{every:9.3f} s"
        print(f"{name:8} L={rows[-1]['layers']:2} T={tokens:3} edges={edges:7,}  one row {one:7.3f} s  "
              f"every row {every_text}  rollout {roll * 1000:6.2f} ms", flush=True)  # fmt: skip
    return rows


def layer_scaling(model: explorer.Transformer, pieces: int) -> list[dict]:
    """One-row and every-row flow on the first k layers of SmolLM2, k in SMOLLM_LAYERS, at `pieces` pieces."""
    trace = explorer.run(model, text_of(model, pieces))
    tokens = len(trace.tokens)
    rows = []
    for k in SMOLLM_LAYERS:
        short = first_layers(trace, k)
        one = seconds(lambda short=short: attention_flow_rows(short, [tokens - 1]), repeat=3)
        every = seconds(lambda short=short: attention_flow_rows(short))
        rows.append({"layers": k, "tokens": tokens, "edges": flow_edges(short), "one_row": one, "every_row": every})
        print(f"SmolLM2 first {k:2} layers, T={tokens}: edges={flow_edges(short):6,}  one row {one:6.3f} s  "
              f"every row {every:7.3f} s", flush=True)  # fmt: skip
    return rows


def norm_memory(model: explorer.Transformer) -> None:
    """norm_attention for SmolLM2 at LONG pieces: time and extra memory against the attention weights' size."""
    trace = explorer.run(model, text_of(model, LONG))
    weights = trace.attention.nbytes
    norm_attention(model, trace)  # once, so that lazy imports and torch's first-call set-up are not counted
    gc.collect()
    result, took, traced, rss = peak_during(lambda: norm_attention(model, trace))
    print(f"SmolLM2, {len(trace.tokens)} pieces: norm_attention {took:.2f} s; trace.attention "
          f"{weights / 2**20:,.0f} MB; result {result.nbytes / 2**20:,.0f} MB")  # fmt: skip
    print(f"  extra memory, tracemalloc peak (numpy): {traced / 2**20:,.0f} MB = {traced / weights:.2f} x the weights")
    print(f"  extra memory, peak resident above start (numpy + torch): {rss / 2**20:,.0f} MB = "
          f"{rss / weights:.2f} x the weights")  # fmt: skip
    roll = seconds(lambda: attention_rollout(trace), repeat=3)
    print(f"  attention_rollout at {len(trace.tokens)} pieces, 30 layers: {roll:.3f} s")


def extra_cases(minilm: explorer.Transformer, smollm: explorer.Transformer, quick: bool) -> list[tuple]:
    """Flow where the page's limit falls: every row of the default configured model (2 layers, the shallowest graph
    with the most tokens per edge), and one row of both checkpoints at a hundred pieces and more."""
    cases = []
    for tokens in CONFIGURED_TOKENS[:2] if quick else CONFIGURED_TOKENS:
        trace = explorer.run(ModelConfig(), words(tokens))
        cases.append(("configured", 2, tokens, None, seconds(lambda trace=trace: attention_flow_rows(trace))))
    for name, model, pieces in (("MiniLM", minilm, ROW_PIECES["MiniLM"]), ("SmolLM2", smollm, ROW_PIECES["SmolLM2"])):
        for n in pieces[:1] if quick else pieces:
            trace = explorer.run(model, text_of(model, n))
            tokens = len(trace.tokens)
            took = seconds(lambda trace=trace, tokens=tokens: attention_flow_rows(trace, [tokens - 1]))
            cases.append((name, trace.attention.shape[0], tokens, 1, took))
    return cases


def page_limit(cases: list[tuple]) -> None:
    """Each case's work and time, whether the page offers it (FLOW_PAGE_MAX_WORK); the worst seconds per unit of
    work, and the budget that keeps flow within 3 s."""
    worst = 0.0
    for model, layers, tokens, rows, took in sorted(cases, key=lambda c: flow_work(c[1], c[2], c[3])):
        work = flow_work(layers, tokens, rows)
        rate = took / work
        worst = max(worst, rate) if work >= 1_000_000 else worst  # below that, scipy's per-call overhead dominates
        offered = "offered" if flow_offered(layers, tokens, rows) else "not offered"
        late = "  <-- over 3 s" if took > PAGE_SECONDS and flow_offered(layers, tokens, rows) else ""
        print(f"  {model:20} L={layers:2} T={tokens:3} {'one row  ' if rows == 1 else 'every row'} work "
              f"{work:13,} {took:7.3f} s ({rate * 1e9:5.1f} ns/unit): {offered}{late}")  # fmt: skip
    print(f"worst rate {worst * 1e9:.1f} ns per unit: 3 s buys {PAGE_SECONDS / worst:,.0f} units; "
          f"FLOW_PAGE_MAX_WORK = {FLOW_PAGE_MAX_WORK:,} (explorer.mixing_text)")  # fmt: skip
    for layers, name in ((2, "configured"), (6, "MiniLM"), (30, "SmolLM2")):
        print(f"  the page offers {name} ({layers} layers) every row up to {flow_max_tokens(layers, True)} tokens, "
              f"one row up to {flow_max_tokens(layers, False)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip SmolLM2 at 512 pieces and every row at 64 pieces")
    args = parser.parse_args()
    minilm = explorer.load_pretrained("minilm-l6")
    smollm = explorer.load_pretrained("smollm2-135m")
    print("== attention_flow and attention_rollout (best of 3 for one row, 1 run for every row)")
    table = flow_table("MiniLM", minilm, MINILM_PIECES, 32 if args.quick else 64)
    table += flow_table("SmolLM2", smollm, SMOLLM_PIECES, 32)
    minilm_rows = [r for r in table if r["model"] == "MiniLM"]
    print("\n== How flow scales")
    token_k = slope([r["tokens"] for r in minilm_rows], [r["one_row"] for r in minilm_rows])
    print(f"MiniLM (6 layers), one row against tokens: time ~ T^{token_k:.2f}")
    every = [r for r in minilm_rows if not math.isnan(r["every_row"])]
    if len(every) > 1:
        every_k = slope([r["tokens"] for r in every], [r["every_row"] for r in every])
        print(f"MiniLM (6 layers), every row against tokens: time ~ T^{every_k:.2f}")
    by_layers = layer_scaling(smollm, 16)
    layer_k = slope([r["layers"] for r in by_layers], [r["one_row"] for r in by_layers])
    every_layer_k = slope([r["layers"] for r in by_layers], [r["every_row"] for r in by_layers])
    print(f"SmolLM2 at 16 pieces against layers: one row ~ L^{layer_k:.2f}, every row ~ L^{every_layer_k:.2f}")
    print("\n== The page's limit: time against work = problems x edges (explorer.mixing_text.flow_work)")
    cases = [(r["model"], r["layers"], r["tokens"], 1, r["one_row"]) for r in table]
    cases += [
        (r["model"], r["layers"], r["tokens"], None, r["every_row"]) for r in table if not math.isnan(r["every_row"])
    ]
    cases += [("SmolLM2 first layers", r["layers"], r["tokens"], None, r["every_row"]) for r in by_layers]
    cases += extra_cases(minilm, smollm, args.quick)
    page_limit(cases)
    if not args.quick:
        print(f"\n== norm_attention at {LONG} pieces")
        norm_memory(smollm)


if __name__ == "__main__":
    main()
