"""Per norm placement: how fast it learns to reverse 8 tokens at the Train page's defaults, and whether it trains
without warm-up at a high learning rate.

Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture") predict that post-norm needs a
learning-rate warm-up (its gradients near the output are large at initialisation) and pre-norm does not. This bench
tests that on the Train page's model, per placement (post, pre, res-post, peri), over several seeds (each seed sets
the initial weights and the batches), every placement of a seed starting from the same weights (common_start), as
the page's "all four" trains them:

1. Steps to 99 %: the page's defaults (explorer.ModelConfig(), reverse of length 8, AdamW lr 3e-3, warm-up 20,
   batch 64, gradients clipped to norm 1), the first step whose training batch has 99 % of its tokens right
   (explorer.training.steps_to_accuracy, what the page's summary says), within the page's 300 default steps.
2. No warm-up at a high learning rate: 300 steps with warm-up 0 at each --lrs value, and the same with the page's
   warm-up of 20 steps at the highest one, the control that says whether warm-up is what rescues a failing run. Per
   run: whether a training batch reached 99 %, token accuracy on 512 held-out sequences after the last step and the
   loss over the last 10 steps (guessing uniformly among the 10 tokens gives ln 10 = 2.30 and 10 %). The verdict
   counts the seeds whose run trained (99 % on held-out data), failed (under 50 % on held-out data: failing runs stay
   near chance) or diverged (a non-finite loss).

Runs are independent and deterministic (one torch thread each), so they are shared out over --jobs processes.

Usage: python bench/bench_train_placements.py [--seeds 0,1,2] [--lrs 0.01,0.03] [--layers 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: `import explorer`

import explorer  # noqa: E402
from explorer.config import NORMS  # noqa: E402
from explorer.tasks import make_task  # noqa: E402
from explorer.training import common_start, evaluate, single_thread, steps_to_accuracy, train  # noqa: E402

GOAL = 0.99
STEPS = 300  # the Train page's default steps
PAGE_LR, PAGE_WARMUP, BATCH = 3e-3, 20, 64  # the Train page's defaults
TASK = make_task("reverse", 8)
GUESSING = math.log(len(TASK.vocabulary))  # the loss of a uniform guess: ln 10
FAILED = 0.5  # held-out accuracy under this after 300 steps: failed (runs that fail stay near chance, 10 to 22 %)


def one_run(norm: str, seed: int, lr: float, warmup: int, layers: int, stop_at_goal: bool) -> dict:
    """One placement's training run; stop_at_goal ends it at the first training batch at GOAL (steps to 99 %)."""
    cfg = explorer.ModelConfig(seed=seed, n_layers=layers)
    with single_thread():
        start = common_start(cfg, TASK)
        t0 = time.perf_counter()
        result = train(
            cfg.replace(norm=norm),
            TASK,
            steps=STEPS,
            lr=lr,
            warmup=warmup,
            batch_size=BATCH,
            seed=seed,
            initial=start,
            snapshot_every=STEPS,
            callback=(lambda step, loss, accuracy: accuracy < GOAL) if stop_at_goal else None,
        )
        seconds = time.perf_counter() - t0
        losses = result.history["loss"]
        return {
            "norm": norm,
            "reached": steps_to_accuracy(result.history, GOAL),
            "fresh": evaluate(result.model, TASK, seed=777),  # sequences no run trained on
            "last_loss": float(losses.iloc[-10:].mean()),
            "diverged": not all(math.isfinite(x) for x in losses),
            "seconds": seconds,
        }


def spread(values: list[float], digits: int) -> str:
    """Median (min-max) of the values."""
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def verdict(runs: list[dict]) -> str:
    """What the seeds' runs say together: how many trained (GOAL on held-out data), failed or diverged."""
    trained = sum(r["fresh"] >= GOAL for r in runs)
    failed = sum(not r["diverged"] and r["fresh"] < FAILED for r in runs)
    diverged = sum(r["diverged"] for r in runs)
    words = [f"{trained}/{len(runs)} trained"]
    if failed:
        words.append(f"{failed} failed")
    if diverged:
        words.append(f"{diverged} diverged")
    return ", ".join(words)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (initial weights and batches)")
    ap.add_argument("--lrs", default="0.01,0.03", help="comma-separated learning rates to try without warm-up")
    ap.add_argument("--layers", type=int, default=2, help="blocks of the model (the page's default: 2)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes running runs at once")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lrs = sorted(float(x) for x in args.lrs.split(","))
    t0 = time.perf_counter()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cpus, {args.jobs} processes of one torch thread each, load average {load}")
    print(
        f"reverse, length {TASK.length}; ModelConfig(n_layers={args.layers}) per placement, every placement of a "
        f"seed from the same initial weights; seeds {', '.join(map(str, seeds))}; AdamW, batch {BATCH}, "
        f"clip 1.0, {STEPS} steps at most"
    )
    plans = [(f"steps to {GOAL:.0%} at the page's defaults (lr {PAGE_LR:g}, warm-up {PAGE_WARMUP})", PAGE_LR,
              PAGE_WARMUP, True)]  # fmt: skip
    plans += [(f"lr {lr:g}, warm-up 0", lr, 0, False) for lr in lrs]
    plans.append((f"lr {lrs[-1]:g}, warm-up {PAGE_WARMUP} (the control)", lrs[-1], PAGE_WARMUP, False))
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {
            (title, norm): [pool.submit(one_run, norm, seed, lr, warmup, args.layers, stop) for seed in seeds]
            for title, lr, warmup, stop in plans
            for norm in NORMS
        }
        for i, (title, *_) in enumerate(plans):
            print(f"\n{title}")
            if i == 0:
                header = f"{'placement':<14}{f'steps to {GOAL:.0%}: median (range)':<34}{'per seed':<20}"
            else:
                header = (
                    f"{'placement':<14}{f'reached {GOAL:.0%}':<12}{'held-out accuracy':<24}"
                    f"{'loss, last 10 steps':<24}verdict"
                )
            print(header)
            print("-" * max(len(header), 80))
            for norm in NORMS:
                runs = [f.result() for f in futures[(title, norm)]]
                reached = [r["reached"] for r in runs]
                if i == 0:
                    got = [s for s in reached if s is not None]
                    text = spread(got, 0) + (
                        f", {len(runs) - len(got)} not within {STEPS}" if len(got) < len(runs) else ""
                    )
                    per_seed = " ".join("-" if s is None else str(s) for s in reached)
                    print(f"{norm:<14}{text:<34}{per_seed:<20}", flush=True)
                else:
                    count = f"{sum(s is not None for s in reached)}/{len(runs)}"
                    fresh = spread([r["fresh"] for r in runs], 3)
                    loss = spread([r["last_loss"] for r in runs], 3)
                    print(f"{norm:<14}{count:<12}{fresh:<24}{loss:<24}{verdict(runs)}", flush=True)
    print(f"\nguessing uniformly: loss ln 10 = {GUESSING:.2f}, accuracy 10%")
    print(f"trained: {GOAL:.0%} of tokens right on held-out data; failed: under {FAILED:.0%}")
    print(f"total time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
