"""The real checkpoints in a fresh server, in real Chromium: first loads, warm page loads against the configured model,
512 pieces through every head, and the server's memory.

1. First load: a fresh `streamlit run dashboard.py`, then the Attention page of ?model=minilm-l6 and of
   ?model=smollm2-135m, each timed from page.goto to every chart drawn (the checkpoint is read, dequantized for
   SmolLM2, and built inside that load). The server's resident memory after each.
2. Warm: the Attention page on a 32-piece sentence for the configured model, MiniLM and SmolLM2, in turn, each load
   in a new browser context (a new session; the shared caches warm), --rounds times. The ratio of each real model's
   median to the configured model's median, measured in the same run, is what the targets are about (issue 15):
   MiniLM <= 1.3x, SmolLM2 (270 heads) <= 2x.
3. 512 pieces through every head of both models: the page renders (no exception, every chart drawn) and how long.
4. The server's memory with both checkpoints loaded: resident now and its peak (VmHWM).

Usage: python bench/bench_pretrained.py [--rounds N] [--strict]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from urllib.parse import quote

# bench/ is on sys.path when a script here runs
from bench_page_load import load_once
from sentences import SENTENCE
from serve import CHROMIUM, CHROMIUM_ARGS, server_memory, serving, turns

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.pretrained import INSTALLED, installed_path  # noqa: E402
from explorer.tokenization import bpe_from_gguf, wordpiece_from_folder  # noqa: E402

TARGETS = {"minilm-l6": 1.3, "smollm2-135m": 2.0}  # warm page time / the configured model's, same run (issue 15)
PIECES = 32
LONG = 512
FIRST_LOAD_MS = 600_000


def tokenizers() -> dict:
    """Each checkpoint's own tokenizer, to build texts of an exact number of pieces."""
    minilm = installed_path(INSTALLED["minilm-l6"])
    smollm = installed_path(INSTALLED["smollm2-135m"])
    return {"minilm-l6": wordpiece_from_folder(minilm), "smollm2-135m": bpe_from_gguf(smollm)}


def text_of(tokenizer, pieces: int) -> str:
    """The bench sentence, repeated and cut at the word that makes the text `pieces` pieces long (specials counted)."""
    words = (SENTENCE + " ") * (pieces // 4 + 2)
    words = words.split()
    for n in range(len(words), 0, -1):
        text = " ".join(words[:n])
        if len(tokenizer.encode(text).ids) <= pieces:
            return text
    raise ValueError("no text short enough")


def url(base: str, model: str | None, text: str) -> str:
    query = f"tokens={quote(text)}" + (f"&model={model}" if model else "")
    return f"{base}/?{query}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="warm loads of each page (default 5)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tokenize = tokenizers()
    texts = {name: text_of(tokenize[name], PIECES) for name in TARGETS}
    texts["configured"] = " ".join(texts["smollm2-135m"].split()[:PIECES])
    pieces = {name: len(tokenize[name].encode(texts[name]).ids) for name in TARGETS}
    print(f"32-piece sentence: MiniLM {pieces['minilm-l6']} pieces, SmolLM2 {pieces['smollm2-135m']} pieces; "
          f"the configured model {len(texts['configured'].split())} tokens")  # fmt: skip
    problems: list[str] = []
    ok = True
    with serving() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        rss, _ = server_memory(base)
        print(f"\nfresh server: {rss:,.0f} MB resident")
        print("\n1. first load of each checkpoint in this server (read, dequantize, build, run, draw)")
        for name in TARGETS:
            (_, _, done, _, _), found = load_once(browser, None, url(base, name, texts[name]), FIRST_LOAD_MS, True)
            problems += found
            rss, peak = server_memory(base)
            print(f"   {name:14} {done:6.2f} s   server {rss:,.0f} MB resident, peak {peak:,.0f} MB")

        print(f"\n2. warm Attention page, {PIECES} pieces, new session each load, {args.rounds} rounds in turn")
        times: dict[str, list[float]] = {name: [] for name in ("configured", *TARGETS)}
        for order in turns(list(times), args.rounds + 1):
            for name in order:
                model = None if name == "configured" else name
                (_, _, done, _, _), found = load_once(browser, None, url(base, model, texts[name]), 120_000, True)
                problems += found
                times[name].append(done)
        base_time = statistics.median(times["configured"][1:])  # the first round warms the caches: left out
        print(f"   configured     {base_time:6.2f} s median")
        for name, target in TARGETS.items():
            median = statistics.median(times[name][1:])
            ratio = median / base_time
            verdict = "ok" if ratio <= target else "OVER"
            ok &= ratio <= target
            print(f"   {name:14} {median:6.2f} s median   {ratio:4.2f}x the configured page (target <= {target}x) "
                  f"{verdict}")  # fmt: skip

        print(f"\n3. {LONG} pieces through every head")
        for name in TARGETS:
            text = text_of(tokenize[name], LONG)
            n = len(tokenize[name].encode(text).ids)
            (_, _, done, _, _), found = load_once(browser, None, url(base, name, text), FIRST_LOAD_MS, True)
            problems += found
            rss, peak = server_memory(base)
            verdict = "renders" if not found else "PROBLEM"
            ok &= not found
            print(f"   {name:14} {n} pieces  {done:6.2f} s  {verdict}   server {rss:,.0f} MB, peak {peak:,.0f} MB")

        rss, peak = server_memory(base)
        print(f"\n4. server memory with both checkpoints loaded: {rss:,.0f} MB resident, peak {peak:,.0f} MB")
        browser.close()
    for problem in problems:
        print("   problem:", problem)
    if args.strict and (not ok or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
