"""The Attention page with "what the head adds" on against the same page with weights, in real Chromium (issue 22).

One server. For the configured model, MiniLM and SmolLM2 on a 32-piece sentence: the Attention page with
?measure=weights and with ?measure=norms, in turn, each load in a new browser context (a new session; the shared
caches warm), --rounds times after one warming round. Printed: the median URL -> every chart drawn of each, and the
ratio norms / weights in the same run (target <= 1.2x: the norms are computed once per link and server, then the page
draws the same number of maps).

Usage: python bench/bench_norms_page.py [--rounds N] [--strict]
"""

from __future__ import annotations

import argparse
import statistics
import sys

# bench/ is on sys.path when a script here runs
from bench_page_load import interleaved_loads
from bench_pretrained import PIECES, text_of, tokenizers, url
from serve import CHROMIUM, CHROMIUM_ARGS, serving

TARGET = 1.2  # norms page / weights page, same model, same run
MODELS = ("configured", "minilm-l6", "smollm2-135m")
TIMEOUT_MS = 300_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="loads of each page after the warming round (default 5)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed or a page has a problem")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tokenize = tokenizers()
    texts = {name: text_of(tokenize[name], PIECES) for name in MODELS[1:]}
    texts["configured"] = " ".join(texts["smollm2-135m"].split()[:PIECES])
    with serving() as base, sync_playwright() as pw:
        links = {
            (model, measure): url(base, None if model == "configured" else model, texts[model]) + f"&measure={measure}"
            for model in MODELS
            for measure in ("weights", "norms")
        }
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        times, problems = interleaved_loads(browser, links, args.rounds + 1, TIMEOUT_MS)
        browser.close()
    print(
        f"Attention page, {PIECES} pieces, URL -> every chart drawn, median of {args.rounds} loads (new context each)"
    )
    print(f"{'model':14} {'weights':>8} {'norms':>8} {'ratio':>6}")
    ok = True
    for model in MODELS:
        weights, norms = (statistics.median(times[(model, m)][1:]) for m in ("weights", "norms"))  # round 0 warms
        ratio = norms / weights
        ok &= ratio <= TARGET
        verdict = "ok" if ratio <= TARGET else "OVER"
        print(f"{model:14} {weights:7.2f}s {norms:7.2f}s {ratio:5.2f}x  (target <= {TARGET}x) {verdict}")
    for problem in problems:
        print("problem:", problem)
    if args.strict and (not ok or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
