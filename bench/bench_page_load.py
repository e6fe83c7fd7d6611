"""How long until a person sees the attention heatmap? Real Chromium against `streamlit run dashboard.py`.

Starts the dashboard headless on a free port, then loads the small configuration from its URL again and
again, each time in a new browser context (no cache, no cookies, a new Streamlit session), and times
page.goto(URL) until the script run has finished, every chart on the page is drawn (every canvas of a matrix
view marked drawn, a Vega-Lite canvas with painted pixels: CHARTS_DRAWN in serve.py) and no skeleton is left
("done"). Two earlier moments are shown too: "idle", the script run finished and the title shown (elements may
still be skeletons while their script chunks load), and "1st map", the first chart drawn. The first load after
the server starts is "cold" (imports, empty st.cache_*); then --loads warm loads each in a new browser context
(the target applies to these), and --loads more in one shared context whose browser cache is warm. With
--baseline, bare Streamlit pages are served alongside and loaded in turn with the dashboard, so their ratios hold on
a machine whose speed drifts (on the 2-core VM the same bare page took 1.2 s in one run and 1.6 s in another).

Usage: python bench/bench_page_load.py [--loads N] [--query "d_model=256&..."] [--baseline] [--strict]
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
from pathlib import Path
from urllib.parse import urlencode

# bench/ is on sys.path when a script here runs
from sentences import words
from serve import (
    BASELINE_PRELUDE,
    CHARTS_DRAWN,
    CHROMIUM,
    CHROMIUM_ARGS,
    keepalive_ms,
    renderer_cpu,
    renderer_cpu_since,
    serving_all,
    turns,
)

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.5  # seconds from navigation to a drawn heatmap, warm
SMALL = {"d_model": 256, "n_heads": 8, "n_layers": 4, "d_ff": 1024, "tokens": words(16)}  # T = 16, as issue 2 asks
# --baseline: the least a Streamlit page costs on this machine, for scale: bare, with one small Vega-Lite heatmap
# (what the page drew before the matrix view), and with the same sidebar controls as the dashboard but no chart.
BASELINE_APPS = {
    "bare page": """import streamlit as st

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
st.title("Attention")
""",
    "bare page + 1 Vega-Lite heatmap": """import numpy as np
import pandas as pd
import streamlit as st

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
st.title("Attention")
z = np.random.default_rng(0).random((16, 16))
cells = pd.DataFrame([(q, k, z[q, k]) for q in range(16) for k in range(16)], columns=["q", "k", "w"])
st.vega_lite_chart(cells, {"mark": "rect", "width": 500, "height": 500, "encoding": {
    "x": {"field": "k", "type": "ordinal"}, "y": {"field": "q", "type": "ordinal"},
    "color": {"field": "w", "type": "quantitative"}, "tooltip": [{"field": "w"}]}})
""",
    "bare page + the sidebar's 12 controls": """import streamlit as st

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
st.title("Attention")
""",
}
LOCAL = re.compile(r"^(https?|wss?)://127\.0\.0\.1[:/]|^(data|blob|about):")
# baselines that draw a chart (the others have no "1st map")
BASELINES_WITH_A_CHART = {"bare page + 1 Vega-Lite heatmap"}
assert BASELINES_WITH_A_CHART.issubset(BASELINE_APPS), "a misspelt name here leaves that baseline's 1st map untimed"
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


def load_once(browser, context, url: str, timeout_ms: int, chart: bool) -> tuple[Times, list[str]]:
    """Seconds from goto to IDLE, to the first chart drawn (when the page has a `chart`) and to done (READY), and
    the renderer's CPU seconds until done (Times); and the problems the page showed. With context None the load
    gets a fresh context (empty browser cache), closed afterwards."""
    own = context is None
    context = context or browser.new_context(viewport={"width": 1400, "height": 1000})
    cpu_before = renderer_cpu()
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    # The app works offline: any request that leaves this machine is a problem.
    page.on("request", lambda r: None if LOCAL.match(r.url) else problems.append(f"network: {r.url[:120]}"))
    try:
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function(IDLE, timeout=timeout_ms, polling=50)
        idle = time.perf_counter() - t0
        first = None
        if chart:
            page.wait_for_function(FIRST_CHART, timeout=timeout_ms, polling=50)
            first = time.perf_counter() - t0
        page.wait_for_function(READY, timeout=timeout_ms, polling=50)
        done = time.perf_counter() - t0
        main_cpu, all_cpu = renderer_cpu_since(cpu_before)
        problems += [f"exception: {e.inner_text()[:200]}" for e in page.locator("[data-testid='stException']").all()]
        return (idle, first, done, main_cpu, all_cpu), problems
    finally:
        page.close()
        if own:
            context.close()


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
    print(f"{name:58} {len(times):>5} {idle:>6.2f} {first:>8} {done:>6.2f} {spread:>11} {cpu}  {verdict:12} {note}")
    return ok


def measure(
    apps: dict[str, str], charted: set[str], query: str, loads: int, timeout_ms: int
) -> tuple[dict[str, tuple], float]:
    """For each app (name -> script; those in `charted` draw a chart): the cold load, `loads` loads each in a new
    context and `loads` in one context with a warm cache, all apps served at once and loaded in turn (serve.turns);
    and the milliseconds a script takes over a kept-alive connection to the first app once it has run."""
    from playwright.sync_api import sync_playwright

    with serving_all(apps) as bases, sync_playwright() as pw:
        urls = {name: f"{base}/?{query}" for name, base in bases.items()}
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        cold = {name: load_once(browser, None, url, timeout_ms, name in charted) for name, url in urls.items()}
        fresh: dict[str, list] = {name: [] for name in urls}
        cached: dict[str, list] = {name: [] for name in urls}
        shared = {name: browser.new_context(viewport={"width": 1400, "height": 1000}) for name in urls}
        for name, url in urls.items():
            load_once(browser, shared[name], url, timeout_ms, name in charted)  # fills this context's browser cache
        for order in turns(list(urls), loads):
            for name in order:
                fresh[name].append(load_once(browser, None, urls[name], timeout_ms, name in charted))
            for name in order:
                cached[name].append(load_once(browser, shared[name], urls[name], timeout_ms, name in charted))
        browser.close()
        keepalive = keepalive_ms(next(iter(bases.values())))
    return {name: (cold[name], fresh[name], cached[name]) for name in urls}, keepalive


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", default="dashboard.py")
    ap.add_argument("--loads", type=int, default=5, help="warm loads of each kind after the cold one")
    ap.add_argument("--query", default=urlencode(SMALL), help="query string with the configuration")
    ap.add_argument("--timeout", type=float, default=60, help="seconds one load may take")
    ap.add_argument("--baseline", action="store_true", help="also time bare Streamlit pages, for scale")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the warm median is over the target")
    args = ap.parse_args()
    if not (ROOT / args.app).exists():
        sys.exit(f"{args.app} does not exist yet: nothing to load.")

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    timeout_ms = int(args.timeout * 1000)
    with tempfile.TemporaryDirectory() as folder:
        apps = {args.app: args.app}
        for i, (name, source) in enumerate(BASELINE_APPS.items() if args.baseline else ()):
            apps[name] = str(Path(folder) / f"baseline_{i}.py")
            Path(apps[name]).write_text(BASELINE_PRELUDE + source)
        charted = {args.app, *BASELINES_WITH_A_CHART}
        results, keepalive = measure(apps, charted, args.query, args.loads, timeout_ms)
    print("page load in Chromium, seconds from goto (medians): to the script run finished and the title shown (idle),")
    print("  to the first chart drawn (1st map), to every chart drawn with no skeleton left (done); and the CPU")
    print("  seconds the page's renderer used until done, on its main thread (main) and in all its threads (all)")
    print(f"  {os.cpu_count()} cpus, load average {load} at the start")
    print(f"  /?{args.query}")
    times = f"{'idle':>6} {'1st map':>8} {'done':>6} {'done range':>11} {'main':>5} {'all':>5}"
    print(f"{'load':58} {'loads':>5} {times}  {'target':12} what")
    ok = True
    for app, (cold, fresh, cached) in results.items():
        target = TARGET if app == args.app else None
        report(f"{app}: cold server", [cold], "first load after the server started: imports, empty st.cache_*")
        ok &= report(f"{app}: warm, new context", fresh, "empty browser cache, new session", target)
        report(f"{app}: warm, cached", cached, "same browser context (cached JS), new page")
    main_done, main_cpu = (statistics.median(times[i] for times, _ in results[args.app][1]) for i in (2, 3))
    for name, (_, fresh, _) in list(results.items())[1:]:
        done, cpu = (statistics.median(times[i] for times, _ in fresh) for i in (2, 3))
        extra = f"{args.app} needs {main_cpu - cpu:+.2f} s of main-thread CPU more"
        print(f"  {args.app} / {name}, warm, new context: {main_done / done:.2f} ({extra})")
    print(f"  {args.app}: a script over a kept-alive connection takes {keepalive:.1f} ms (about 40 with Nagle on)")
    problems = [p for cold, fresh, cached in results.values() for _, found in [cold, *fresh, *cached] for p in found]
    for problem in dict.fromkeys(problems):
        print("  problem:", problem)
    return 1 if args.strict and (not ok or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
