"""How long until the Compare page is fully drawn for two 12-layer, 12-head configurations at 64 tokens?

Starts the dashboard headless on a free port and opens /compare with A = 12 layers x 12 heads, d_model 768,
d_ff 3072 (BERT-base sized), post-norm, on 64 tokens; B is the page's default, A with pre-norm, on A's weights.
Each load times page.goto(URL) until the script run has finished, no skeleton or spinner is left, and all four
charts of the page are drawn: the three matrix-view boards (views/matrix_view.js: the A | B maps, A - B, the head
ranking), every canvas of each painted, and the Plotly per-layer lines, drawn by plotly.js (CHARTS_DRAWN in
serve.py). The ranking table is drawn only on request, so it is not waited for.
The first load after the server starts is "cold" (imports, both models built, traces and gradients computed);
then --loads "warm" loads, each in a new browser context (no browser cache, a new Streamlit session, the
server's st.cache_* filled): the target applies to these.

--baseline also times a bare Streamlit page drawing the same kinds of charts: the same component with three boards
of random matrices of the page's sizes (A | B and A - B at 64 x 64, every cell with hover, A - B with both
weights; a clickable 12 x 12 map) and one Plotly figure of four small line panels (the page's own layer_lines, on
random numbers). It is what any such page
costs on this machine at this moment: it is served alongside and loaded in turn with the Compare page, since the
machine's speed drifts.

Usage: python bench/bench_compare_page.py [--loads N] [--d-model 768] [--tokens 64] [--baseline] [--strict]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlencode

# bench/ is on sys.path when a script here runs
from sentences import words
from serve import APP, BASELINE_PRELUDE, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, serving_all, turns, wait_ready

TARGET = 3.0  # seconds from navigation to the fully drawn Compare page, warm
EXPECTED_CHARTS = 4  # matrix-view boards: A | B maps, A - B map, ranking heatmap; Plotly: per-layer lines
CHARTS = "[data-testid='stPlotlyChart'], [data-testid^='stBidiComponent']"
# --baseline: the least a Streamlit page with the same boards and Plotly chart costs here (the maps have the
# sizes the Compare page gives them at 64 tokens).
BASELINE_APP = (
    BASELINE_PRELUDE
    + """
import numpy as np
import pandas as pd
import streamlit as st

from explorer.compare import PER_LAYER
from pictures.boards import board, matrix_panel
from pictures.compare_lines_chart import layer_lines
from pictures.style import BLUES, Ramp
from views.matrix_view import show_board
from views.widgets import plotly_chart

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
st.title("Compare A and B")
rng = np.random.default_rng(0)
blues = Ramp(BLUES, 0.0, 1.0)
diverging = Ramp(("#c2410c", "#ffffff", "#1f5fa8"), -1.0, 1.0)
oranges = Ramp(("#fff5eb", "#fd8d3c", "#7f2704"), 0.0, 1.0)


def panel(name, values, ramp, px, **more):
    n_rows, n_cols = values.shape
    return matrix_panel(
        values, None, ramp, name=name, x_labels=[f"k{i}" for i in range(n_cols)],
        y_labels=[f"q{i}" for i in range(n_rows)], x_title="key", y_title="query", value_title=name, title=name,
        max_px=px, **more,
    )


a, b = rng.random((64, 64)).astype(np.float32), rng.random((64, 64)).astype(np.float32)
left, right = st.columns([5, 3])
with left:
    show_board(board([panel("A", a, blues, 112), panel("B", b, blues, 112)]), key="pair")
with right:
    show_board(board([panel("A_minus_B", a - b, diverging, 180, extra={"A": a, "B": b})]), key="difference")
ranking = rng.random((12, 12)).astype(np.float32)
show_board(board([panel("ranking", ranking, oranges, 360, pick="cell", extra={"max": ranking})]), key="ranking")
lines = pd.DataFrame([(statistic, layer, rng.random(), rng.random()) for statistic in PER_LAYER
                      for layer in range(-1, 12)], columns=["statistic", "layer", "a", "b"])
plotly_chart(layer_lines(lines), key="layer_lines")
"""
)
# Done: the run has finished, nothing is a skeleton or spinner, and all the page's charts are drawn.
READY = f"""() => {{
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    if (document.querySelector("[data-testid='stSkeleton'], [data-testid='stSpinner']")) return false;
    const drawn = {CHARTS_DRAWN};
    return drawn.length >= {EXPECTED_CHARTS} && drawn.every(Boolean);
}}"""


def load_once(browser, url: str, timeout_ms: int) -> tuple[float, int, list[str]]:
    """Seconds from goto to READY in a new browser context, the number of charts, and the problems shown."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        t0 = time.perf_counter()
        page.goto(url)
        wait_ready(page, READY, timeout_ms)
        took = time.perf_counter() - t0
        charts = page.locator(CHARTS).count()
        problems += [
            f"error: {e.inner_text()[:200]}" for e in page.locator("[data-testid='stAlertContentError']").all()
        ]
        return took, charts, problems
    finally:
        context.close()


def measure(apps: dict[str, tuple[str, str]], loads: int, timeout_ms: int) -> dict[str, tuple[tuple, list]]:
    """For each app (name -> (script, path)): the cold load and `loads` warm loads of
    http://127.0.0.1:<port><path>, each in a new browser context, all apps served at once and loaded in turn
    (serve.turns)."""
    from playwright.sync_api import sync_playwright

    with serving_all({name: app for name, (app, _) in apps.items()}) as bases, sync_playwright() as pw:
        urls = {name: bases[name] + path for name, (_, path) in apps.items()}
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        cold = {name: load_once(browser, url, timeout_ms) for name, url in urls.items()}
        warm: dict[str, list] = {name: [] for name in urls}
        for order in turns(list(urls), loads):
            for name in order:
                warm[name].append(load_once(browser, urls[name], timeout_ms))
        browser.close()
    return {name: (cold[name], warm[name]) for name in urls}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", type=int, default=5, help="warm loads after the cold one")
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=300, help="seconds one load may take (the cold one builds)")
    ap.add_argument("--baseline", action="store_true", help="also time a bare page with the same kinds of charts")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the warm median is over the target")
    args = ap.parse_args()

    config = {"n_layers": 12, "n_heads": 12, "d_model": args.d_model, "d_ff": 4 * args.d_model}
    query = urlencode({**config, "tokens": words(args.tokens)}, quote_via=quote)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    timeout_ms = int(args.timeout * 1000)
    with tempfile.TemporaryDirectory() as folder:
        apps = {"compare": (APP, f"/compare?{query}")}
        if args.baseline:
            baseline = Path(folder) / "baseline.py"
            baseline.write_text(BASELINE_APP)
            apps["baseline"] = (str(baseline), "/")
        results = measure(apps, args.loads, timeout_ms)
    cold, warm = results["compare"]
    times = [t for t, _, _ in warm]
    median = statistics.median(times)
    ok = median <= TARGET
    print("Compare page in Chromium: goto -> every chart drawn, script idle; seconds")
    print(f"  A: {config}, post-norm; B: pre-norm on A's weights; {args.tokens} tokens")
    print(f"  {os.cpu_count()} cpus, load average {load} at the start")
    print(f"  cold (first load: builds both models, traces, gradients): {cold[0]:.2f} s, {cold[1]} charts")
    print(
        f"  warm, new context x{len(times)}: median {median:.2f} s (range {min(times):.2f}-{max(times):.2f}), "
        f"target <= {TARGET} s: {'ok' if ok else 'OVER'}"
    )
    bare: list[tuple] = []
    if args.baseline:
        _, bare = results["baseline"]
        bare_median = statistics.median(t for t, _, _ in bare)
        print(
            f"  baseline (bare page, {bare[0][1]} charts of the same kinds and sizes, loaded in turn with the page), "
            f"warm, new context x{len(bare)}: "
            f"median {bare_median:.2f} s; Compare page / baseline = {median / bare_median:.2f}"
        )
    print(f"  load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    problems = list(dict.fromkeys(p for _, _, ps in [cold, *warm, *bare] for p in ps))
    for problem in problems:
        print("  problem:", problem)
    return 1 if args.strict and (not ok or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
