"""The real checkpoints in fresh servers, in real Chromium: first loads, warm page loads against the configured model,
512 pieces through every head, and the server's memory; then the targets of issue 25 as a table.

Both servers are started as `make run` and `make serve` start them (launch.py: imports done, checkpoints loading in
the background), and read and write the GGUF weights cache (explorer.weights_cache) in a new temporary directory, so
the first server finds it empty on every run of the bench, as a new machine does:
0. Server 1, cache empty: the Attention page of ?model=smollm2-135m, timed from page.goto to every chart drawn: the
   GGUF is parsed and dequantized, the cache written, the model built and run ("the very first time", <= 10 s).
1. --starts servers, each started fresh on the cache server 1 wrote, one after another: SmolLM2's first load in each
   (<= 2 s), then MiniLM's, and the server's resident memory after each. The figure is the median of SmolLM2's first
   loads: one load in one fresh server moved by 0.5x between runs of the same code (the server's background
   preload, launch.py, shares the two cores with the browser's first page). The last server goes on to steps 2-5.
2. Warm: the Attention page on a 32-piece sentence for the configured model, MiniLM and SmolLM2, in turn, each load
   in a new browser context (a new session; the shared caches warm), --rounds times. The ratio of each real model's
   median to the configured model's median, measured in the same run, is what the targets are about (issue 15):
   MiniLM <= 1.3x, SmolLM2 (270 heads) <= 2x.
3. 512 pieces through every head of both models, URL to drawn (SmolLM2 <= 5 s, MiniLM <= 1.5 s): --rounds loads of
   each, each on a text of 512 pieces the server has not seen (the bench sentence from another word on), so every
   load runs the model and draws anew; the median is the figure (one load moved by 0.3x from run to run). Each text
   is then loaded once more, its run cached (no target): how long the page takes without the model's run. The
   configured model's warm page of step 2 is loaded in turn with them, and these two rows are read against its
   median here: a ratio whose two sides were timed minutes apart took the machine's drift between them too.
4. The server's peak memory (VmHWM) with both checkpoints loaded, after the first 512-piece page of each (<= 2.5 GB),
   and after all of them (the caches hold at most their budget, views/shared_cache.py).
5. A class pasting its own paragraphs: --tabs tabs opened one after another and left open, each on a 512-piece
   SmolLM2 text of its own; the server's resident memory with all of them open, and its peak (<= 2.5 GB). A session
   keeps no trace once its page is drawn (views/state.py), so the cache's budget bounds them however many are open.

Issue 25 set its time targets in seconds, on a day when the configured model's warm Attention page took about 1.2 s
(README at 58c499e: 1.17 s). On this shared 2-core VM that page has since taken from 1.0 s to 2.8 s, so the table also
gives each time as a multiple of that page's median in the same run (step 2; step 3 for its own rows), against the
issue's seconds divided by 1.2 s: these ratios are what "met" reads, as for every other speed target in bench/. Long
texts weigh more on this VM than its page floor says: it hands freed memory back to its host after a few seconds, and a
later first write to such pages cost 0.7-0.85 s per 256 MB against 0.04 s right after the free (not every time: it
depends on which pages the kernel hands out), and a 512-piece SmolLM2 run writes about 550 MB of fresh pages.

With --reference REV (a git revision, e.g. 58c499e, the code when issue 25 was filed), step 3 also loads the
configured page as that revision draws it, served beside it from a git worktree, in turn with the others, and the
table gives the two 512-piece rows against it as well (no verdict of its own): the configured page of this code is
not a fixed yardstick, since every change that speeds up the dashboard's frame makes it faster, and a ratio against
it then grows when the page it divides did not change; the reference revision's page is the same work on every run.

Usage: python bench/bench_pretrained.py [--rounds N] [--starts N] [--tabs N] [--reference REV] [--strict]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

# bench/ is on sys.path when a script here runs
from bench_ab import serving_revision
from bench_page_load import READY, load_once
from sentences import SENTENCE
from serve import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LAUNCHED,
    machine_cpu,
    machine_cpu_since,
    server_memory,
    serving,
    turns,
    wait_ready,
)
from spread import ratio_text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.pretrained import INSTALLED, installed_path  # noqa: E402
from explorer.tokenization import bpe_from_gguf, wordpiece_from_folder  # noqa: E402

TARGETS = {"minilm-l6": 1.3, "smollm2-135m": 2.0}  # warm page time / the configured model's, same run (issue 15)
# Issue 25's targets: seconds (read as ratios to the configured page, table()) and the peak's megabytes.
VERY_FIRST_S, FIRST_S, LONG_S, PEAK_MB = 10.0, 2.0, {"smollm2-135m": 5.0, "minilm-l6": 1.5}, 2500.0
TARGETS_SET_ON_S = 1.2  # the configured model's warm Attention page when issue 25's seconds were set (see above)
CACHE_ENV = "ATTENTION_EXPLORER_CACHE"  # explorer.weights_cache: where the dequantized GGUF weights are kept
PIECES = 32
LONG = 512
FIRST_LOAD_MS = 600_000


def tokenizers() -> dict:
    """Each checkpoint's own tokenizer, to build texts of an exact number of pieces."""
    minilm = installed_path(INSTALLED["minilm-l6"])
    smollm = installed_path(INSTALLED["smollm2-135m"])
    return {"minilm-l6": wordpiece_from_folder(minilm), "smollm2-135m": bpe_from_gguf(smollm)}


def text_of(tokenizer, pieces: int, start: int = 0) -> str:
    """The bench sentence, repeated and cut at the word that makes the text `pieces` pieces long (specials counted);
    from its word `start` on, for another text of the same length (a page the caches have not seen)."""
    words = (SENTENCE + " ") * (pieces // 4 + 2)
    words = words.split()[start:]
    for n in range(len(words), 0, -1):
        text = " ".join(words[:n])
        if len(tokenizer.encode(text).ids) <= pieces:
            return text
    raise ValueError("no text short enough")


def is_commit(revision: str) -> bool:
    """Whether git knows `revision` as a commit of this project (a hash, a tag, HEAD~2...)."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    return found.returncode == 0


def url(base: str, model: str | None, text: str) -> str:
    query = f"tokens={quote(text)}" + (f"&model={model}" if model else "")
    return f"{base}/?{query}"


def fresh_server_loads(
    browser, texts: dict[str, str], problems: list[str], number: int, started: float, base: str
) -> float:
    """The first loads of SmolLM2 and then MiniLM in a server just started (at perf_counter `started`); SmolLM2's
    seconds."""
    rss, _ = server_memory(base)
    print(f"   server {number}: answering after {time.perf_counter() - started:.1f} s, {rss:,.0f} MB resident")
    first = first_load(browser, base, "smollm2-135m", texts["smollm2-135m"], problems)
    first_load(browser, base, "minilm-l6", texts["minilm-l6"], problems)
    return first


def drawn_in(browser, link: str, timeout_ms: int, problems: list[str]) -> tuple[float, list[str]]:
    """Seconds from goto to every chart drawn, in a new browser context, and the problems the page showed (added to
    `problems` too)."""
    (_, _, done, _, _), found = load_once(browser, None, link, timeout_ms, True)
    problems += found
    return done, found


def first_load(browser, base: str, name: str, text: str, problems: list[str]) -> float:
    """Seconds from goto to drawn for a checkpoint's first page in this server; prints it with the server's memory."""
    done, _ = drawn_in(browser, url(base, name, text), FIRST_LOAD_MS, problems)
    rss, peak = server_memory(base)
    print(f"   {name:14} {done:6.2f} s   server {rss:,.0f} MB resident, peak {peak:,.0f} MB")
    return done


# what, measured, target, unit, for a time the configured page's median it is read against (None: not a time), and
# the reference revision's configured page in the same step (None: not loaded, --reference)
Row = tuple[str, float, float, str, float | None, float | None]


def open_tabs(browser, base: str, texts: list[str], problems: list[str]) -> list:
    """Open each text's SmolLM2 Attention page in a tab of its own, one after another, each drawn before the next
    opens, and leave them open (each a live session); the browser contexts, to close."""
    contexts = []
    for text in texts:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        started = time.perf_counter()
        page.goto(url(base, "smollm2-135m", text))
        wait_ready(page, READY, FIRST_LOAD_MS)
        rss, peak = server_memory(base)
        print(f"   tab {len(contexts)}: drawn in {time.perf_counter() - started:5.2f} s   server {rss:,.0f} MB, "
              f"peak {peak:,.0f} MB")  # fmt: skip
    return contexts


def table(rows: list[Row], reference: str | None = None) -> bool:
    """Print issue 25's table; a time is also given as a multiple of its row's floor (the configured model's warm
    page in this run) and is met when that is within its target over TARGETS_SET_ON_S. With `reference` (a revision),
    the rows timed beside its configured page are also given against that page, with no verdict of their own. True
    when every row is met."""
    floors = sorted({row[4] for row in rows if row[4] is not None})
    print(f"\nthe configured model's warm Attention page, this run: {' and '.join(f'{f:.2f} s' for f in floors)} "
          f"(when the targets were set: {TARGETS_SET_ON_S} s)")  # fmt: skip
    extra = f" × {reference}'s page |" if reference else ""
    print(f"\n| figure | measured | issue's target | × configured page | target |{extra} met |")
    print("|---" * (7 if reference else 6) + "|")
    met = []
    for what, value, target, unit, floor, reference_floor in rows:
        if floor is not None:
            ratio, ratio_target = value / floor, target / TARGETS_SET_ON_S
            ok = ratio <= ratio_target
            shown = f"{ratio_text(ratio, ratio_target)}× | <= {ratio_target:.2f}×"
        else:
            ok = value <= target
            shown = "| "
        if reference:
            shown += f" | {value / reference_floor:.2f}×" if reference_floor else " | "
        met.append(ok)
        print(f"| {what} | {value:,.2f} {unit} | <= {target:,.2f} {unit} | {shown} | {'yes' if ok else 'NO'} |")
    return all(met)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="warm loads of each page (default 5)")
    parser.add_argument("--starts", type=int, default=3, help="fresh servers to time a first load in (default 3)")
    parser.add_argument("--tabs", type=int, default=4, help="tabs left open on long texts of their own (default 4)")
    parser.add_argument("--reference", metavar="REV", help="also time the configured page as REV draws it (step 3)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    if min(args.starts, args.rounds) < 1:
        parser.error("--starts and --rounds take 1 or more")
    if args.reference and not is_commit(args.reference):
        parser.error(f"--reference {args.reference}: no such commit in {ROOT}")
    from playwright.sync_api import sync_playwright

    tokenize = tokenizers()
    texts = {name: text_of(tokenize[name], PIECES) for name in TARGETS}
    texts["configured"] = " ".join(texts["smollm2-135m"].split()[:PIECES])
    pieces = {name: len(tokenize[name].encode(texts[name]).ids) for name in TARGETS}
    print(f"32-piece sentence: MiniLM {pieces['minilm-l6']} pieces, SmolLM2 {pieces['smollm2-135m']} pieces; "
          f"the configured model {len(texts['configured'].split())} tokens")  # fmt: skip
    problems: list[str] = []
    ok = True
    rows: list[Row] = []
    reference = serving_revision(args.reference) if args.reference else contextlib.nullcontext()
    with reference as reference_base, tempfile.TemporaryDirectory() as cache, sync_playwright() as pw:
        # the reference revision's server, when asked for, runs for the whole bench and is idle until step 3
        os.environ[CACHE_ENV] = cache  # both servers inherit it: the first fills it, the second reads it
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        print(f"\n0. server 1, weights cache empty ({cache}): SmolLM2 the very first time (parse, dequantize, "
              "write the cache, build, run, draw)")  # fmt: skip
        started = time.perf_counter()
        with serving(LAUNCHED) as base:
            print(f"   server answering after {time.perf_counter() - started:.1f} s")
            very_first = first_load(browser, base, "smollm2-135m", texts["smollm2-135m"], problems)
        very_first_row = ("SmolLM2 first load, the very first time (no weights cache)", very_first, VERY_FIRST_S, "s")
        print(f"\n1. {args.starts} servers started fresh one after another, on the cache server 1 wrote: first loads")
        firsts = []
        for number in range(2, args.starts + 1):  # the last server goes on below
            started = time.perf_counter()
            with serving(LAUNCHED) as base:
                firsts.append(fresh_server_loads(browser, texts, problems, number, started, base))
        started = time.perf_counter()
        with serving(LAUNCHED) as base:
            firsts.append(fresh_server_loads(browser, texts, problems, args.starts + 1, started, base))
            first = statistics.median(firsts)
            print(f"   SmolLM2's first load, median of {len(firsts)} servers: {first:.2f} s "
                  f"({', '.join(f'{t:.2f}' for t in firsts)})")  # fmt: skip

            cpu_before = machine_cpu()
            print(f"\n2. warm Attention page, {PIECES} pieces, new session each load, {args.rounds} rounds in turn")
            times: dict[str, list[float]] = {name: [] for name in ("configured", *TARGETS)}
            for order in turns(list(times), args.rounds + 1):
                for name in order:
                    model = None if name == "configured" else name
                    done, _ = drawn_in(browser, url(base, model, texts[name]), 120_000, problems)
                    times[name].append(done)
            base_time = statistics.median(times["configured"][1:])  # the first round warms the caches: left out
            print(f"   configured     {base_time:6.2f} s median")
            rows.append((*very_first_row, base_time, None))
            first_row = "SmolLM2 first load in a fresh server (weights cache present; median)"
            rows.append((first_row, first, FIRST_S, "s", base_time, None))
            for name, target in TARGETS.items():
                median = statistics.median(times[name][1:])
                ratio = median / base_time
                verdict = "ok" if ratio <= target else "OVER"
                ok &= ratio <= target
                print(f"   {name:14} {median:6.2f} s median   {ratio:4.2f}x the configured page (target <= {target}x) "
                      f"{verdict}")  # fmt: skip

            print(f"\n3. {LONG} pieces through every head, URL to drawn: a text the server has not seen in each of "
                  f"{args.rounds} rounds, in turn with the configured model's warm page of step 2")  # fmt: skip
            long_times: dict[str, list[float]] = {"configured": [], "smollm2-135m": [], "minilm-l6": []}
            warm_pages = {"configured": base}  # the configured page, by the servers that draw it in turn here
            if reference_base:
                warm_pages["reference"] = reference_base
                long_times["reference"] = []
                drawn_in(browser, url(reference_base, None, texts["configured"]), 120_000, problems)  # warms it
            first_peak = None
            same_again: dict[str, list[float]] = {"smollm2-135m": [], "minilm-l6": []}  # each text loaded twice
            for round_, order in enumerate(turns(list(long_times), args.rounds)):
                for name in order:
                    if name in warm_pages:
                        done, _ = drawn_in(browser, url(warm_pages[name], None, texts["configured"]), 120_000, problems)
                        long_times[name].append(done)
                        drawn_by = f"   as {args.reference} draws it" if name == "reference" else ""
                        print(f"   {'configured':14} {PIECES} tokens  {done:6.2f} s{drawn_by}")
                        continue
                    text = text_of(tokenize[name], LONG, start=round_)
                    n = len(tokenize[name].encode(text).ids)
                    done, found = drawn_in(browser, url(base, name, text), FIRST_LOAD_MS, problems)
                    long_times[name].append(done)
                    rss, peak = server_memory(base)
                    verdict = "renders" if not found else "PROBLEM"
                    ok &= not found
                    print(
                        f"   {name:14} {n} pieces  {done:6.2f} s  {verdict}   server {rss:,.0f} MB, peak {peak:,.0f} MB"
                    )
                    if first_peak is None and all(long_times[m] for m in ("smollm2-135m", "minilm-l6")):
                        first_peak = peak  # the figure: the peak after one 512-piece page of each checkpoint
                    again, _ = drawn_in(browser, url(base, name, text), FIRST_LOAD_MS, problems)
                    same_again[name].append(again)
                    print(f"   {name:14} the same text again (its run cached)  {again:6.2f} s")
            long_floor = statistics.median(long_times.pop("configured"))
            print(f"   configured     {long_floor:6.2f} s median in this step ({base_time:.2f} s in step 2)")
            reference_floor = statistics.median(long_times.pop("reference")) if reference_base else None
            if reference_floor:
                print(f"   configured     {reference_floor:6.2f} s median as {args.reference} draws it "
                      f"(this code's page {long_floor / reference_floor:.2f}x it)")  # fmt: skip
            print(f"   the machine's CPU time in 2 and 3: {machine_cpu_since(cpu_before)}")
            for name, times_of in long_times.items():
                title = "SmolLM2" if name == "smollm2-135m" else "MiniLM"
                median = statistics.median(times_of)
                cached = statistics.median(same_again[name])
                print(f"   {title}: a new text {median:.2f} s median ({median / long_floor:.2f}x the configured page), "
                      f"the same text again {cached:.2f} s ({cached / long_floor:.2f}x, no target): the page without "
                      "the model's run and its measures")  # fmt: skip
                what = f"{title}, {LONG} pieces, every head, URL to drawn (median)"
                rows.append((what, median, LONG_S[name], "s", long_floor, reference_floor))

            rss, peak = server_memory(base)
            print(f"\n4. server memory with both checkpoints loaded: {rss:,.0f} MB resident; peak {first_peak:,.0f} MB "
                  f"after one 512-piece page of each, {peak:,.0f} MB after all {2 * args.rounds}")  # fmt: skip
            peak_row = "server peak memory, both checkpoints, after both 512-piece pages"
            rows.append((peak_row, first_peak, PEAK_MB, "MB", None, None))

            print(f"\n5. {args.tabs} tabs left open, each on a {LONG}-piece SmolLM2 text of its own")
            offsets = range(args.rounds, args.rounds + args.tabs)  # texts from words no earlier step started at
            long_texts = [text_of(tokenize["smollm2-135m"], LONG, start=i) for i in offsets]
            tabs = open_tabs(browser, base, long_texts, problems)
            time.sleep(2)  # the last page's script run ends after it is drawn
            rss, peak = server_memory(base)
            print(f"   with all {args.tabs} open: {rss:,.0f} MB resident, peak {peak:,.0f} MB")
            for context in tabs:
                context.close()
            tabs_row = f"server peak memory, with {args.tabs} more tabs open on long texts of their own"
            rows.append((tabs_row, peak, PEAK_MB, "MB", None, None))
        browser.close()
    for problem in problems:
        print("   problem:", problem)
    ok &= table(rows, args.reference)
    if args.strict and (not ok or problems):
        sys.exit(1)


if __name__ == "__main__":
    main()
