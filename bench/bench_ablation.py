"""Removing heads, every layer's guess and each head's share of the prediction: what each costs next to one run.

Time (median of --rounds, the steps interleaved in each round, after a warm-up round that is left out):
1. SmolLM2, 32 pieces: one ablated rerun (explorer.run with two heads removed, as every page reruns it) / one
   unablated run, target <= 1.5x. Beside it, for information, the forward alone from the unablated trace's stream at
   the first removed head's layer (Stack.forward(first_layer=...), the blocks below reused, no Trace built).
2. SmolLM2, 32 pieces: the attribution board (explorer.head_logit_attribution on the run's trace) / one run, target
   <= 1.2x; and the logit lens (explorer.logit_lens, k=5), its extra time as a ratio to one run.
3. MiniLM, 32 and 512 pieces: every head's ablation effect on the sentence embedding (explorer.head_ablation_effects,
   72 heads in one batch per layer, attention without weights) / one run, printed as a ratio.

Memory: each step in a fresh subprocess (which loads SmolLM2 and runs the trace first), measured as the peak resident
set size during the step (VmHWM of /proc/self/status, reset through /proc/self/clear_refs just before it) minus the
resident size before it. Resident memory counts every allocation, torch's tensors included, which tracemalloc does not
see. The subprocess sets MALLOC_MMAP_THRESHOLD_ so that large blocks go back to the system when freed, and trims the
heap before the step: memory an earlier allocation left behind cannot hide the step's own.
4. SmolLM2, 32 pieces: the lens's peak memory beyond the trace.
5. SmolLM2, 512 pieces: the peak memory of the lens and of the attribution beyond what the process holds with the model
   and the trace (what the page already uses), against the size of one layer's logits, T x V x 4 bytes (target <= 1x:
   never [L, T, V]). explorer.run's own peak and the trace's arrays are printed for scale.

The memory table also gives each step's time, measured once in its subprocess.

On a machine busy with other work, torch's threads wait on each other and every time swells several-fold; run with
OMP_NUM_THREADS=1 there for ratios that mean something.

Usage: python bench/bench_ablation.py [--rounds N] [--strict]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: `import explorer`

from sentences import SENTENCE  # noqa: E402  (bench/ is on sys.path when a script here runs)
from serve import status_kb  # noqa: E402

import explorer  # noqa: E402
from explorer.ablation import HeadAblation, parse_heads  # noqa: E402

RERUN_TARGET = 1.5  # ablated rerun / unablated run (issue 24)
BOARD_TARGET = 1.2  # attribution board / one run
MEMORY_TARGET = 1.0  # the lens's and the attribution's peak beyond the trace / one layer's logits
PIECES, LONG = 32, 512
REMOVED = "L12H3,L20H5"  # two heads, the lower in the middle of SmolLM2's 30 layers
STEPS = ("run", "lens", "attribution")


def text_of(model: explorer.Transformer, pieces: int) -> str:
    """The bench sentence, repeated and cut at the last word that keeps the text within `pieces` pieces."""
    words = ((SENTENCE + " ") * (pieces // 4 + 2)).split()
    for n in range(len(words), 0, -1):
        text = " ".join(words[:n])
        if len(model.tokenizer.encode(text).ids) <= pieces:
            return text
    raise ValueError("no text short enough")


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def reused_rerun(model: explorer.Transformer, base: explorer.Trace, heads: str) -> None:
    """The ablated forward from the unablated stream entering the first removed head's layer; no Trace is built."""
    removed = parse_heads(heads)
    first = min(layer for layer, _ in removed)
    stack = model.decoder
    ablation = HeadAblation.of(removed, len(stack.layers), stack.layers[0].self_attn.n_heads)
    allowed = torch.from_numpy(base.first.self_attention.allowed)[None]  # [1, T, T] causal
    with torch.inference_mode():
        stack(torch.from_numpy(base.first.residual[first])[None], allowed, ablation=ablation, first_layer=first)


def medians(steps: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """The median seconds of each step over `rounds`, all steps run in each round in turn, after one warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds + 1):
        for name, step in steps.items():
            times[name].append(timed(step))
    return {name: statistics.median(values[1:]) for name, values in times.items()}


def row(what: str, seconds: float, ratio: float, target: float | None) -> bool:
    """Prints one line of the table; True when the ratio meets its target (or there is none)."""
    met = target is None or ratio <= target
    goal = "-" if target is None else f"<= {target}x {'ok' if met else 'OVER'}"
    print(f"{what:58} {seconds * 1000:9.1f} ms {ratio:7.2f}x   {goal}")
    return met


def time_tables(rounds: int) -> bool:
    smollm = explorer.load_pretrained("smollm2-135m")
    text = text_of(smollm, PIECES)
    base = explorer.run(smollm, text)
    T = len(base.tokens)
    m = medians(
        {
            "run": lambda: explorer.run(smollm, text),
            "ablated": lambda: explorer.run(smollm, text, ablate=REMOVED),
            "reused": lambda: reused_rerun(smollm, base, REMOVED),
            "board": lambda: explorer.head_logit_attribution(smollm, base),
            "lens": lambda: explorer.logit_lens(smollm, base, k=5),
        },
        rounds,
    )
    one = m["run"]
    print(f"SmolLM2-135M, {T} pieces, median of {rounds} rounds")
    print(f"{'what':58} {'time':>12} {'ratio':>8}   target")
    ok = row("one run (explorer.run)", one, 1.0, None)
    ok &= row(f"ablated rerun, {REMOVED} removed (explorer.run)", m["ablated"], m["ablated"] / one, RERUN_TARGET)
    first = min(layer for layer, _ in parse_heads(REMOVED))
    row(f"  its forward from layer {first}'s stream (no Trace built)", m["reused"], m["reused"] / one, None)
    ok &= row("attribution board (head_logit_attribution)", m["board"], m["board"] / one, BOARD_TARGET)
    row("logit lens, k=5, every layer and position (extra time)", m["lens"], m["lens"] / one, None)

    minilm = explorer.load_pretrained("minilm-l6")
    for pieces in (PIECES, LONG):  # the long text: the What heads do page's wait on a pasted paragraph
        text = text_of(minilm, pieces)
        T = len(explorer.run(minilm, text).tokens)
        m = medians(
            {
                "run": partial(explorer.run, minilm, text),
                "board": partial(explorer.head_ablation_effects, minilm, text),
            },
            rounds,
        )
        print(f"\nMiniLM-L6, {T} pieces, median of {rounds} rounds")
        row("one run (explorer.run)", m["run"], 1.0, None)
        row("every head's ablation effect, 72 heads (head_ablation_effects)", m["board"], m["board"] / m["run"], None)
    return ok


def measure(step: str, pieces: int) -> dict:
    """In this (fresh) process: SmolLM2 and its trace, then one step's peak resident memory beyond what was resident."""
    model = explorer.load_pretrained("smollm2-135m")
    text = text_of(model, pieces)
    trace = explorer.run(model, text) if step != "run" else None
    # The weights cache maps SmolLM2's tensors from a file (explorer.weights_cache): pages the forward never read, such
    # as the 113 MB read-out, would become resident in the step and count as its memory. Reading them first keeps
    # them with "the loaded model", as they were when the weights were the process's own arrays.
    with torch.inference_mode():
        for parameter in model.parameters():
            parameter.sum()
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    before = status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    start = time.perf_counter()
    if step == "run":
        trace = explorer.run(model, text)
    elif step == "lens":
        explorer.logit_lens(model, trace, k=5)
    else:
        explorer.head_logit_attribution(model, trace)
    seconds = time.perf_counter() - start
    peak = status_kb("VmHWM")
    arrays = [
        trace.first.residual,
        trace.first.output,
        trace.attention,
        trace.scores,
        *trace.first.activations.values(),
    ]
    return {
        "pieces": len(trace.tokens),
        "vocabulary": model.head.out_features,
        "extra_mb": (peak - before) / 1024,
        "seconds": seconds,
        "trace_mb": sum(a.nbytes for a in arrays) / 2**20,
    }


def measured(step: str, pieces: int) -> dict:
    env = os.environ | {"MALLOC_MMAP_THRESHOLD_": str(1 << 16)}
    out = subprocess.run(
        [sys.executable, __file__, "--measure", step, "--pieces", str(pieces)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_table() -> bool:
    print("\nSmolLM2-135M, peak resident memory of one step beyond the process before it (model and trace loaded)")
    print(f"{'what':34} {'pieces':>6} {'time, once':>10} {'peak beyond':>12} {'one layer T x V x 4':>20}   target")
    ok = True
    for step, pieces in (("lens", PIECES), ("run", LONG), ("lens", LONG), ("attribution", LONG)):
        r = measured(step, pieces)
        logits = r["pieces"] * r["vocabulary"] * 4 / 2**20
        name = {"run": "explorer.run (the trace itself)", "lens": "logit lens, k=5", "attribution": "attribution"}[step]
        lead = f"{name:34} {r['pieces']:6} {r['seconds']:8.2f} s {r['extra_mb']:9.1f} MB {logits:17.1f} MB"
        if step == "run":
            print(f"{lead}   - (its arrays: {r['trace_mb']:.0f} MB)")
            continue
        ratio = r["extra_mb"] / logits
        target = MEMORY_TARGET if pieces == LONG else None
        met = target is None or ratio <= target
        ok &= met
        print(f"{lead}   " + ("-" if target is None else f"<= {target}x {'ok' if met else 'OVER'} ({ratio:.2f}x)"))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of every step (default 5; median)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--measure", choices=STEPS, help=argparse.SUPPRESS)  # the memory subprocess's own step
    parser.add_argument("--pieces", type=int, default=PIECES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.pieces)))
        return
    ok = time_tables(args.rounds)
    ok &= memory_table()
    if args.strict and not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
