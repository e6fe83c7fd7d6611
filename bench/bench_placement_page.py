"""The Attention page of a res-post-norm or peri-norm model against the same configuration with pre-norm, in real
Chromium (issue 23).

One server. For two configurations (the sidebar's default size and a larger one) on a 32-token sentence: the
Attention page with ?norm=pre, ?norm=res-post and ?norm=peri, in turn, each load in a new browser context (a new
session; the shared caches warm), --rounds times after one warming round. Printed: the median URL -> every chart drawn
of each, and the ratios res-post / pre and peri / pre in the same run (target <= 1.1x: a res-post block runs as many
norms as a pre-norm one, a peri block twice as many, next to attention and the feed-forward, which dominate).

Usage: python bench/bench_placement_page.py [--rounds N] [--strict]
"""

from __future__ import annotations

import argparse
import statistics
import sys

# bench/ is on sys.path when a script here runs
from bench_page_load import interleaved_loads
from bench_pretrained import PIECES, text_of, tokenizers, url
from serve import CHROMIUM, CHROMIUM_ARGS, serving

TARGET = 1.1  # res-post or peri page / pre-norm page, same configuration, same run
CONFIGS = {
    "default": "",
    "6x8, d 256": "&n_layers=6&n_heads=8&d_model=256&d_ff=1024",
}
PLACEMENTS = ("pre", "res-post", "peri")
TIMEOUT_MS = 300_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="loads of each page after the warming round (default 5)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed or a page has a problem")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    text = " ".join(text_of(tokenizers()["smollm2-135m"], PIECES).split()[:PIECES])
    with serving() as base, sync_playwright() as pw:
        links = {
            (config, norm): url(base, None, text) + CONFIGS[config] + f"&norm={norm}"
            for config in CONFIGS
            for norm in PLACEMENTS
        }
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        times, problems = interleaved_loads(browser, links, args.rounds + 1, TIMEOUT_MS)
        browser.close()
    print(
        f"Attention page, {len(text.split())} tokens, URL -> every chart drawn, median of {args.rounds} loads "
        "(new context each)"
    )
    print(f"{'config':12} " + " ".join(f"{norm:>9}" for norm in PLACEMENTS) + "   ratios to pre")
    ok = True
    for config in CONFIGS:
        medians = {norm: statistics.median(times[(config, norm)][1:]) for norm in PLACEMENTS}  # round 0 warms
        ratios = {norm: medians[norm] / medians["pre"] for norm in PLACEMENTS[1:]}
        ok &= all(ratio <= TARGET for ratio in ratios.values())
        shown = "  ".join(
            f"{norm} {ratio:.2f}x {'ok' if ratio <= TARGET else 'OVER'}" for norm, ratio in ratios.items()
        )
        print(
            f"{config:12} " + " ".join(f"{medians[n]:8.2f}s" for n in PLACEMENTS) + f"   {shown} (target <= {TARGET}x)"
        )
    for problem in problems:
        print("problem:", problem)
    if args.strict and (not ok or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
