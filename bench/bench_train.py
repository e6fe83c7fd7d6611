"""How long does the default configuration take to learn to reverse 8 tokens, on this machine?

Trains explorer.ModelConfig() (2 layers x 4 heads, d_model 64, post-norm, sinusoidal positions) on the reverse
task of length 8 with train()'s defaults (AdamW, lr 3e-3, warmup 20, batch 64, seed 0) and
stop_at_accuracy=0.99: training stops at the first 10-step check whose token accuracy on 512 held-out sequences
reaches 99%, within the step budget of 300 that tests/test_training.py uses. The time counted is the whole
train() call: building the model, every step, the attention snapshots and the accuracy checks.

Each run is repeated with torch's default intra-op threads (one per core) and with 1 thread, interleaved so
that the load of other processes hits both alike. A reduction's order depends on the thread count, so the two
settings need not take the same number of steps; each setting is deterministic on its own. The "weights" column
fingerprints the trained weights bit for bit (sha256 of every parameter): the same within a thread count, and,
measured on the 2-core machine, different between 1 and 2 threads, which is why the app trains on one
(explorer.training.single_thread).

Usage: python bench/bench_train.py [--repeats N] [--threads 2,1] [--strict]
--strict exits 1 when a median is over the target or a run missed 99% within the budget.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: `import explorer`

import explorer  # noqa: E402
from explorer.tasks import make_task  # noqa: E402
from explorer.training import evaluate, train  # noqa: E402

TARGET = 10.0  # seconds to 99% token accuracy on reverse (length 8)
STEP_BUDGET = 300  # the budget tests/test_training.py trains within
GOAL = 0.99


def one_run(threads: int) -> dict:
    torch.set_num_threads(threads)
    task = make_task("reverse", 8)
    t0 = time.perf_counter()
    result = train(explorer.ModelConfig(), task, steps=STEP_BUDGET, seed=0, stop_at_accuracy=GOAL)
    seconds = time.perf_counter() - t0
    steps = int(result.history["step"].iloc[-1])
    digest = hashlib.sha256()
    for parameter in result.model.parameters():
        digest.update(parameter.detach().numpy().tobytes())
    return {
        "weights": digest.hexdigest()[:12],
        "seconds": seconds,
        "steps": steps,
        "reached": result.stopped_early,
        "fresh": evaluate(result.model, task, seed=777),  # sequences the stopping rule never saw
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: torch's, then 1)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a median is over the target")
    args = ap.parse_args()
    default_threads = torch.get_num_threads()
    counts = [int(t) for t in args.threads.split(",")] if args.threads else sorted({default_threads, 1}, reverse=True)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {os.cpu_count()} cpus, default {default_threads} threads, load average {load}")
    print(
        f"reverse, length 8, ModelConfig() defaults, train(steps={STEP_BUDGET}, stop_at_accuracy={GOAL}); "
        f"{args.repeats} interleaved runs per thread count"
    )
    one_run(counts[-1])  # warm-up: imports, allocator, kernels
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for _ in range(args.repeats):
        for n in counts:
            runs[n].append(one_run(n))
    torch.set_num_threads(default_threads)

    header = (
        f"{'threads':>7} {'median':>8} {'min':>7} {'max':>7} {'steps':>6} {'ms/step':>8} {'held-out':>9} "
        f"{'weights':>13}  target"
    )
    print(header)
    print("-" * len(header))
    failed = 0
    weights = {n: {r["weights"] for r in runs[n]} for n in counts}
    for n in counts:
        times = [r["seconds"] for r in runs[n]]
        steps = sorted({r["steps"] for r in runs[n]})
        median = statistics.median(times)
        reached = all(r["reached"] for r in runs[n])
        ok = median <= TARGET and reached
        failed += not ok
        per_step = statistics.median(r["seconds"] / r["steps"] for r in runs[n]) * 1e3
        print(
            f"{n:>7} {median:>7.2f}s {min(times):>6.2f}s {max(times):>6.2f}s {'/'.join(map(str, steps)):>6} "
            f"{per_step:>8.1f} {min(r['fresh'] for r in runs[n]):>9.4f} {'/'.join(sorted(weights[n])):>13}  "
            f"{'ok' if ok else 'OVER' if reached else 'MISSED 99%'} (<= {TARGET:.0f} s)",
            flush=True,
        )
    print(f"target: 99% token accuracy within {STEP_BUDGET} steps in under {TARGET:.0f} s (median wall time)")
    repeatable = all(len(w) == 1 for w in weights.values())
    alike = len(set().union(*weights.values())) == 1
    print(f"weights bit for bit: {'the same' if repeatable else 'NOT the same'} on every repeat of a thread count; "
          f"{'the same' if alike else 'different'} across thread counts {', '.join(map(str, counts))}")  # fmt: skip
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
