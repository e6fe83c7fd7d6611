"""How long until a person sees a page drawn? Real Chromium against `streamlit run app.py` (dashboard.py as `make run`
serves it; --app dashboard.py for Streamlit's own server).

Starts the dashboard headless on a free port, then loads each page (--pages: Attention, Positional, Activations and
Train by default) for the small configuration from its URL again and again, each time in a new browser context (no
cache, no cookies, a new Streamlit session), and times page.goto(URL) until the script run has finished, every chart on
the page is drawn (every canvas of a matrix view marked drawn, every Plotly chart laid out: CHARTS_DRAWN in serve.py)
and no skeleton is left ("done"). Two earlier moments are shown too: "idle", the script run finished and the title shown
(elements may still be skeletons while their script chunks load), and "1st map", the first chart drawn. The first load
of each page after the server starts is its "first load" (empty st.cache_*); then --loads warm loads each in a new
browser context (the target applies to these), and --loads more in one shared context whose browser cache is warm
("cached"). With --baseline, bare Streamlit pages are served alongside and loaded in turn with the dashboard, so their
ratios hold on a machine whose speed drifts (on the 2-core VM the same bare page took 1.2 s in one run and 1.6 s in
another): the Attention page against a page with only the sidebar's controls (target <= 1.2x), the pages with Plotly
charts against a bare page with one Plotly chart (Positional and Activations <= 1.3x); the targets end the output as a
table. Those two are also given against a page with the same sidebar and one Plotly chart, with no target: the issue's
baseline has no sidebar, which costs 0.3-0.4 s. The Attention page is also given against the sidebar's controls with one
empty custom component, with no target: the floor of any page that draws a matrix view (bench_page_parts.py). For every
load the bench also counts how often Plotly's script (Streamlit's PlotlyChart chunk, 4.7 MB) came over the network: once
in a new context however many charts the page has, and never again in a context that has it cached.

Usage: python bench/bench_page_load.py [--loads N] [--pages attention,positional] [--query "d_model=256&..."]
       [--baseline] [--strict]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

# bench/ is on sys.path when a script here runs
from sentences import words
from serve import (
    APP,
    BASELINE_PRELUDE,
    CHARTS_DRAWN,
    CHROMIUM,
    CHROMIUM_ARGS,
    keepalive_ms,
    machine_cpu,
    machine_cpu_since,
    renderer_cpu,
    renderer_cpu_since,
    serving_all,
    turns,
    wait_ready,
)
from spread import LEVEL, ratio_interval, ratio_text

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.5  # seconds from navigation to a drawn heatmap, warm, on the Attention page
# --baseline targets, new-context loads (issue 25): each page within this many times its baseline's median
RATIO_TARGETS = {"attention": 1.2, "positional": 1.3, "activations": 1.3}
PAGES = {"attention": "", "positional": "positional", "activations": "activations", "train": "train"}  # URL paths
PLOTLY_SCRIPT = "PlotlyChart"  # the name of Streamlit's chunk that carries plotly.js
SMALL = {"d_model": 256, "n_heads": 8, "n_layers": 4, "d_ff": 1024, "tokens": words(16)}  # T = 16, as issue 2 asks
# --baseline: the least a Streamlit page costs on this machine, for scale: bare, with one small Plotly line chart (what
# a page with Plotly charts cannot do without), with the same sidebar controls as the dashboard but no chart, and with
# those controls and the chart (no target: the dashboard's pages with charts have the sidebar too).
BARE, ONE_PLOTLY = "bare page", "bare page + 1 Plotly chart"
SIDEBAR_ONLY, SIDEBAR_PLOTLY = "bare page + the sidebar's 12 controls", "the sidebar's 12 controls + 1 Plotly chart"
SIDEBAR_COMPONENT = "the sidebar's 12 controls + 1 empty custom component"
BARE_SIDEBAR = """import streamlit as st

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
"""
SIDEBAR = """import streamlit as st

st.set_page_config(layout="wide")
sb = st.sidebar
sb.text_input("Tokens", "the cat sat on the mat", key="tokens", bind="query-params", help="words")
for name in ("arch", "norm"):
    sb.selectbox(name, ["a", "b", "c"], key=name, bind="query-params", help="choose")
left, right = sb.columns(2)
for i, name in enumerate(("n_layers", "n_heads", "d_model", "d_ff")):
    (left, right)[i % 2].number_input(name, 1, 4096, 4, step=1, key=name, bind="query-params", help="count")
for name in ("positional", "mask", "activation"):
    sb.selectbox(name, ["a", "b", "c"], key=name, bind="query-params", help="choose")
sb.number_input("seed", 0, 1000, 0, step=1, key="seed", bind="query-params", help="seed")
with sb.expander("Share this view"):
    st.markdown("`http://127.0.0.1/?n_heads=2`")
"""
CHART_IMPORTS = "import numpy as np\nimport plotly.graph_objects as go\n"
# A components v2 element that draws one empty canvas, marked drawn as the matrix view marks its own: what any page
# with a matrix view pays for Streamlit's component machinery before it draws a map (bench_page_parts.py).
EMPTY_COMPONENT = """
empty = st.components.v2.component("empty_board", js='''export default function (component) {
  const board = document.createElement("div");
  const canvas = document.createElement("canvas");
  board.className = "mv-board";
  canvas.width = 800;
  canvas.height = 400;
  canvas.dataset.drawn = "true";
  board.append(canvas);
  component.parentElement.replaceChildren(board);
}''')
empty(data=b"board", key="maps")
"""
ONE_CHART = """st.title("Activations")
y = np.random.default_rng(0).random(16)
st.plotly_chart(go.Figure(go.Scatter(x=np.arange(16), y=y, mode="lines+markers")), theme=None)
"""
BASELINE_APPS = {
    BARE: BARE_SIDEBAR + 'st.title("Attention")\n',
    ONE_PLOTLY: CHART_IMPORTS + BARE_SIDEBAR + ONE_CHART,
    SIDEBAR_ONLY: SIDEBAR + 'st.title("Attention")\n',
    SIDEBAR_PLOTLY: CHART_IMPORTS + SIDEBAR + ONE_CHART,
    SIDEBAR_COMPONENT: SIDEBAR + 'st.title("Attention")\n' + EMPTY_COMPONENT,
}

LOCAL = re.compile(r"^(https?|wss?)://127\.0\.0\.1[:/]|^(data|blob|about):")
IDLE = """() => {
    const app = document.querySelector("[data-testid='stApp']");
    return !!app && app.getAttribute("data-test-script-state") === "notRunning" && !!document.querySelector("h1");
}"""
FIRST_CHART = f"() => {CHARTS_DRAWN}.some(Boolean)"
# Done: the script run has finished, nothing is still a skeleton, and every chart on the page is drawn.
READY = f"""() => {{
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    if (document.querySelector("[data-testid='stSkeleton']")) return false;
    if (!document.querySelector("h1")) return false;
    return {CHARTS_DRAWN}.every(Boolean);
}}"""


# Seconds from goto to idle, to the first chart (None: none) and to done; then the CPU seconds the page's renderer
# used until done, on its main thread (where Streamlit's JavaScript and React run) and in all its threads.
Times = tuple[float, float | None, float, float, float]


def watch_plotly_script(context, page, fetched: list[int]) -> None:
    """From now on, append to `fetched` the bytes of every download of Plotly's script over the network by `page` (a
    copy from the browser's cache costs no bytes and is not counted)."""
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    urls: dict[str, str] = {}
    cdp.on("Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"]))

    def finished(event: dict) -> None:
        if PLOTLY_SCRIPT in urls.get(event["requestId"], "") and event["encodedDataLength"] > 10_000:
            fetched.append(int(event["encodedDataLength"]))

    cdp.on("Network.loadingFinished", finished)


def interleaved_loads(
    browser, links: dict[tuple[str, ...], str], rounds: int, timeout_ms: int
) -> tuple[dict[tuple[str, ...], list[float]], list[str]]:
    """Each link loaded `rounds` times, the links in turn (serve.turns), each load in a new context, timed from goto to
    every chart drawn: the seconds of each link's loads in order (the first round warms the caches), and the problems
    the pages showed, each after its key's words."""
    times: dict[tuple[str, ...], list[float]] = {key: [] for key in links}
    problems: list[str] = []
    for order in turns(list(links), rounds):
        for key in order:
            (_, _, done, _, _), found = load_once(browser, None, links[key], timeout_ms, True)
            problems += [f"{' '.join(key)}: {problem}" for problem in found]
            times[key].append(done)
    return times, problems


def load_once(
    browser, context, url: str, timeout_ms: int, chart: bool, fetched: list[int] | None = None
) -> tuple[Times, list[str]]:
    """Seconds from goto to IDLE, to the first chart drawn (when the page has a `chart`) and to done (READY), and
    the renderer's CPU seconds until done (Times); and the problems the page showed (one that shows an exception
    fails the load: serve.wait_ready). With context None the load
    gets a fresh context (empty browser cache), closed afterwards. With `fetched`, the bytes of each download of
    Plotly's script over the network are appended to it."""
    own = context is None
    context = context or browser.new_context(viewport={"width": 1400, "height": 1000})
    cpu_before = renderer_cpu()
    page = context.new_page()
    if fetched is not None:
        watch_plotly_script(context, page, fetched)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # The app works offline: any request that leaves this machine is a problem.
    page.on("request", lambda r: None if LOCAL.match(r.url) else problems.append(f"network: {r.url[:120]}"))
    try:
        t0 = time.perf_counter()
        page.goto(url)
        wait_ready(page, IDLE, timeout_ms)
        idle = time.perf_counter() - t0
        first = None
        if chart:
            wait_ready(page, FIRST_CHART, timeout_ms)
            first = time.perf_counter() - t0
        wait_ready(page, READY, timeout_ms)
        done = time.perf_counter() - t0
        main_cpu, all_cpu = renderer_cpu_since(cpu_before)
        return (idle, first, done, main_cpu, all_cpu), problems
    finally:
        page.close()
        if own:
            context.close()


@dataclass
class Loads:
    """Every load of one URL: the cold one, those in a new context each, those in one context with a warm cache; and
    how many charts the page drew and how often Plotly's script came over the network, per kind of load."""

    cold: tuple[Times, list[str]]
    fresh: list[tuple[Times, list[str]]] = field(default_factory=list)
    cached: list[tuple[Times, list[str]]] = field(default_factory=list)
    plotly_fresh: list[int] = field(default_factory=list)  # bytes of each download in the new-context loads
    plotly_cached: list[int] = field(default_factory=list)  # ... in the cached loads (after the warming load)
    charts: int = 0

    def median(self, loads: str, which: int = 2) -> float:
        """The median of one of Times (default: done) over the new-context ("fresh") or "cached" loads."""
        return statistics.median(times[which] for times, _ in getattr(self, loads))

    def done(self, loads: str) -> list[float]:
        """Seconds to done of each new-context ("fresh") or "cached" load, round by round."""
        return [times[2] for times, _ in getattr(self, loads)]


def report(name: str, loads: list[tuple[Times, list[str]]], note: str, target: float | None = None) -> bool:
    """One table row: median seconds to idle, to the first chart and to done, and the renderer's median CPU
    seconds; True when done is within target."""
    times = [t for t, _ in loads]
    idle, done, main_cpu, all_cpu = (statistics.median(t[i] for t in times) for i in (0, 2, 3, 4))
    first = "-" if times[0][1] is None else f"{statistics.median(t[1] for t in times):.2f}"
    ok = target is None or done <= target
    verdict = "" if target is None else f"<= {target} s {'ok' if ok else 'OVER'}"
    spread = f"{min(t[2] for t in times):.2f}-{max(t[2] for t in times):.2f}" if len(times) > 1 else ""
    cpu = f"{main_cpu:>5.2f} {all_cpu:>5.2f}"
    print(f"{name:60} {len(times):>5} {idle:>6.2f} {first:>8} {done:>6.2f} {spread:>11} {cpu}  {verdict:12} {note}")
    return ok


def count_charts(browser, url: str, timeout_ms: int) -> int:
    """How many charts (Plotly charts and matrix-view boards) the page at `url` draws, once it is done."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    wait_ready(page, READY, timeout_ms)
    found = page.evaluate(f"() => {CHARTS_DRAWN}.length")
    context.close()
    return int(found)


def measure(urls: dict[str, str], loads: int, timeout_ms: int) -> dict[str, Loads]:
    """For each URL (by name): the cold load, `loads` loads each in a new context and `loads` in one context with a warm
    cache, loaded in turn (serve.turns), counting the downloads of Plotly's script in each."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # The first load of each URL, before anything else: the server's caches are still empty. "1st map" is timed
        # once the page is known to have a chart.
        results = {name: Loads(load_once(browser, None, url, timeout_ms, False)) for name, url in urls.items()}
        for name, url in urls.items():
            results[name].charts = count_charts(browser, url, timeout_ms)
        shared = {name: browser.new_context(viewport={"width": 1400, "height": 1000}) for name in urls}
        for name, url in urls.items():
            load_once(browser, shared[name], url, timeout_ms, results[name].charts > 0)  # fills its browser cache
        for order in turns(list(urls), loads):
            for name in order:
                r = results[name]
                r.fresh.append(load_once(browser, None, urls[name], timeout_ms, r.charts > 0, r.plotly_fresh))
            for name in order:
                r = results[name]
                r.cached.append(load_once(browser, shared[name], urls[name], timeout_ms, r.charts > 0, r.plotly_cached))
        browser.close()
    return results


def plotly_note(r: Loads, loads: int) -> str:
    """How often Plotly's script came over the network in the new-context and the cached loads."""
    if not r.plotly_fresh and not r.plotly_cached:
        return "Plotly's script: never fetched"
    size = max(r.plotly_fresh + r.plotly_cached) / 1e6
    return (
        f"Plotly's script ({size:.1f} MB) fetched {len(r.plotly_fresh)} times in {loads} new-context loads, "
        f"{len(r.plotly_cached)} times in {loads} cached loads"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", default=APP, help="the script streamlit runs (dashboard.py: without app.py's middleware)")
    ap.add_argument("--loads", type=int, default=5, help="warm loads of each kind after the cold one")
    ap.add_argument("--pages", default=",".join(PAGES), help=f"pages of the app to load, of {', '.join(PAGES)}")
    ap.add_argument("--query", default=urlencode(SMALL), help="query string with the configuration")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one load may take")
    ap.add_argument("--baseline", action="store_true", help="also time bare Streamlit pages, for scale")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed or a load had a problem")
    args = ap.parse_args()
    if not (ROOT / args.app).exists():
        sys.exit(f"{args.app} does not exist yet: nothing to load.")
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    if unknown := [p for p in pages if p not in PAGES]:
        sys.exit(f"no page {', '.join(unknown)}: pages are {', '.join(PAGES)}")

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    timeout_ms = int(args.timeout * 1000)
    with tempfile.TemporaryDirectory() as folder:
        apps = {args.app: args.app}
        for i, (name, source) in enumerate(BASELINE_APPS.items() if args.baseline else ()):
            apps[name] = str(Path(folder) / f"baseline_{i}.py")
            Path(apps[name]).write_text(BASELINE_PRELUDE + source)
        with serving_all(apps) as bases:
            urls = {page: f"{bases[args.app]}/{PAGES[page]}?{args.query}" for page in pages}
            urls |= {name: f"{bases[name]}/?{args.query}" for name in list(apps)[1:]}
            cpu_before = machine_cpu()
            results = measure(urls, args.loads, timeout_ms)
            cpu_used = machine_cpu_since(cpu_before)
            keepalive = keepalive_ms(bases[args.app])
    print("page load in Chromium, seconds from goto (medians): to the script run finished and the title shown (idle),")
    print("  to the first chart drawn (1st map), to every chart drawn with no skeleton left (done); and the CPU")
    print("  seconds the page's renderer used until done, on its main thread (main) and in all its threads (all)")
    print(f"  {os.cpu_count()} cpus, load average {load} at the start; {args.app}/<page>?{args.query}")
    print(f"  the machine's CPU time while the pages loaded: {cpu_used}")
    times = f"{'idle':>6} {'1st map':>8} {'done':>6} {'done range':>11} {'main':>5} {'all':>5}"
    print(f"{'load':60} {'loads':>5} {times}  {'target':12} what")
    ok = True
    for name, r in results.items():
        target = TARGET if name == "attention" else None
        report(f"{name}: first load", [r.cold], "the page's first load on a new server: empty st.cache_*")
        note = f"empty browser cache, new session; {r.charts} charts"
        ok &= report(f"{name}: warm, new context", r.fresh, note, target)
        report(f"{name}: warm, cached", r.cached, "same browser context (cached JS), new page")
    print()
    for name, r in results.items():
        print(f"  {name}: {plotly_note(r, args.loads)}")
        if r.plotly_cached:  # the browser should keep it: a cached load that downloads it again is a problem
            ok = False
    if args.baseline:
        ok &= print_ratios(results)
    print(f"  {args.app}: a script over a kept-alive connection takes {keepalive:.1f} ms (about 40 with Nagle on)")
    problems = [p for r in results.values() for _, found in [r.cold, *r.fresh, *r.cached] for p in found]
    for problem in dict.fromkeys(problems):
        print("  problem:", problem)
    return 1 if args.strict and (not ok or problems) else 0


def fresh_ratio(results: dict[str, Loads], page: str, base: str) -> tuple[float, tuple[float, float]]:
    """`page`'s median over `base`'s in new-context loads, and the interval it could move within by chance."""
    ratio = results[page].median("fresh") / results[base].median("fresh")
    return ratio, ratio_interval(results[page].done("fresh"), results[base].done("fresh"))


def print_ratios(results: dict[str, Loads]) -> bool:
    """Each page against its baseline, in new-context and in cached loads, then RATIO_TARGETS as a table (figure,
    measured, target, met); True when every page loaded is within its target."""
    print("  ratios of medians of done (and the extra main-thread CPU seconds), page / baseline:")
    rows = []
    for name in [n for n in PAGES if n in results]:
        base = SIDEBAR_ONLY if name == "attention" else ONE_PLOTLY
        parts = []
        for loads in ("fresh", "cached"):
            ratio = results[name].median(loads) / results[base].median(loads)
            cpu = results[name].median(loads, 3) - results[base].median(loads, 3)
            parts.append(f"{'new context' if loads == 'fresh' else 'cached'} {ratio:.2f} ({cpu:+.2f} s)")
        print(f"  {name} / {base}: {', '.join(parts)}")
        if name in RATIO_TARGETS:
            ratio, spread = fresh_ratio(results, name, base)
            rows.append((f"{name.capitalize()} page / {base}, new browser context", ratio, spread, RATIO_TARGETS[name]))
    for name in [n for n in ("positional", "activations") if n in results]:
        ratio = results[name].median("fresh") / results[SIDEBAR_PLOTLY].median("fresh")
        print(f"  {name} / {SIDEBAR_PLOTLY} (no target: the same sidebar as the page): new context {ratio:.2f}")
    if "attention" in results:
        ratio, (low, high) = fresh_ratio(results, "attention", SIDEBAR_COMPONENT)
        print(
            f"  attention / {SIDEBAR_COMPONENT} (no target: what a page with a matrix view pays before its maps): "
            f"new context {ratio:.2f} ({low:.2f}-{high:.2f}x)"
        )
    print(f"\n| figure | measured | {LEVEL:.0%} interval | target | met |\n|---|---|---|---|---|")
    for what, ratio, (low, high), target in rows:
        met = "yes" if ratio <= target else "NO"
        print(f"| {what} | {ratio_text(ratio, target)}x | {low:.2f}-{high:.2f}x | <= {target}x | {met} |")
    if any(low <= target <= high for _, _, (low, high), target in rows):
        print(
            "  The interval resamples the rounds (bench/spread.py). Where it holds the target, these loads cannot tell"
            " the page from its target: more --loads narrow it."
        )
    return all(ratio <= target for _, ratio, _, target in rows)


if __name__ == "__main__":
    sys.exit(main())
