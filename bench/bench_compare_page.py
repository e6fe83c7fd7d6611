"""How long until the Compare page is fully drawn for two 12-layer, 12-head configurations at 64 tokens?

Starts the dashboard headless on a free port and opens /compare with A = 12 layers x 12 heads, d_model 768,
d_ff 3072 (BERT-base sized), post-norm, on 64 tokens; B is the page's default, A with pre-norm, on A's weights.
Each load times page.goto(URL) until the script run has finished, no skeleton or spinner is left, every Plotly
chart on the page is drawn (the A | B maps, A - B, the head ranking and the per-layer lines) and the ranking
table is on screen. The first load after the server starts is "cold" (imports, both models built, traces and
gradients computed); then --loads "warm" loads, each in a new browser context (no browser cache, a new
Streamlit session, the server's st.cache_* filled): the target applies to these.

--baseline also times, the same way, a bare Streamlit page with as many charts (four 64 x 64 heatmaps' worth of
Plotly) and a table: what any such page costs on this machine at this moment, since the machine is shared.

Usage: python bench/bench_compare_page.py [--loads N] [--d-model 768] [--tokens 64] [--baseline] [--strict]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlencode

from serve import CHROMIUM_ARGS, free_port, start_server, wait_health  # bench/ is on sys.path when a script here runs

TARGET = 3.0  # seconds from navigation to the fully drawn Compare page, warm
SENTENCE = "the cat sat on the mat while a small dog ran after it across the long green field"
EXPECTED_CHARTS = 4  # A | B maps, A - B map, ranking heatmap, per-layer lines
# --baseline: the least a Streamlit page with the same kinds of charts and a table costs here.
BASELINE_APP = """import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
import streamlit as st

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
z = np.random.default_rng(0).random((64, 64)).astype(np.float32)
pair = make_subplots(rows=1, cols=2)
pair.add_trace(go.Heatmap(z=z, coloraxis="coloraxis"), 1, 1)
pair.add_trace(go.Heatmap(z=z.T, coloraxis="coloraxis"), 1, 2)
left, right = st.columns([2, 1])
left.plotly_chart(pair)
right.plotly_chart(go.Figure(go.Heatmap(z=z - z.T, zmid=0)))
st.dataframe(pd.DataFrame({"layer": range(144), "js": np.linspace(1, 0, 144)}), on_select="rerun", key="t")
st.plotly_chart(go.Figure(go.Heatmap(z=z[:12, :12])))
st.plotly_chart(go.Figure(go.Scatter(y=z[0])))
"""
# Done: the run has finished, nothing is a skeleton or spinner, every chart is drawn, the ranking table is there.
READY = f"""() => {{
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    if (document.querySelector("[data-testid='stSkeleton'], [data-testid='stSpinner']")) return false;
    const plots = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")];
    if (plots.length < {EXPECTED_CHARTS}) return false;
    const drawn = plots.every((p) => p._fullLayout && p.querySelector(".main-svg")
        && (p._fullData || []).every((t) => t.type !== "heatmap" || p.querySelector(".hm, .heatmaplayer image")));
    return drawn && !!document.querySelector("[data-testid='stDataFrame'] canvas");
}}"""


def words(n: int) -> str:
    base = SENTENCE.split()
    return " ".join(base[i % len(base)] for i in range(n))


def load_once(browser, url: str, timeout_ms: int) -> tuple[float, int, list[str]]:
    """Seconds from goto to READY in a new browser context, the number of charts, and the problems shown."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function(READY, timeout=timeout_ms, polling="raf")
        took = time.perf_counter() - t0
        charts = page.locator("[data-testid='stPlotlyChart']").count()
        problems += [f"exception: {e.inner_text()[:200]}" for e in page.locator("[data-testid='stException']").all()]
        problems += [
            f"error: {e.inner_text()[:200]}" for e in page.locator("[data-testid='stAlertContentError']").all()
        ]
        return took, charts, problems
    finally:
        context.close()


def measure(app: str, path: str, loads: int, timeout_ms: int) -> tuple[tuple, list[tuple]]:
    """The cold load and `loads` warm loads of http://127.0.0.1:<port><path>, each in a new browser context."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryFile() as log:
        port = free_port()
        server = start_server(app, port, log)
        try:
            wait_health(port, server, log)
            url = f"http://127.0.0.1:{port}{path}"
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=CHROMIUM_ARGS
                )
                cold = load_once(browser, url, timeout_ms)
                warm = [load_once(browser, url, timeout_ms) for _ in range(loads)]
                browser.close()
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    return cold, warm


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
    cold, warm = measure("dashboard.py", f"/compare?{query}", args.loads, timeout_ms)
    times = [t for t, _, _ in warm]
    median = statistics.median(times)
    ok = median <= TARGET
    print("Compare page in Chromium: goto -> every chart drawn, table shown, script idle; seconds")
    print(f"  A: {config}, post-norm; B: pre-norm on A's weights; {args.tokens} tokens")
    print(f"  {os.cpu_count()} cpus, load average {load} at the start")
    print(f"  cold (first load: builds both models, traces, gradients): {cold[0]:.2f} s, {cold[1]} charts")
    print(
        f"  warm, new context x{len(times)}: median {median:.2f} s (range {min(times):.2f}-{max(times):.2f}), "
        f"target <= {TARGET} s: {'ok' if ok else 'OVER'}"
    )
    if args.baseline:
        with tempfile.TemporaryDirectory() as folder:
            baseline = Path(folder) / "baseline.py"
            baseline.write_text(BASELINE_APP)
            _, bare = measure(str(baseline), "/", args.loads, timeout_ms)
        bare_median = statistics.median(t for t, _, _ in bare)
        print(
            f"  baseline (bare page, same kinds of charts and a table), warm, new context x{len(bare)}: median "
            f"{bare_median:.2f} s; Compare page / baseline = {median / bare_median:.2f}"
        )
    print(f"  load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    problems = list(dict.fromkeys(p for _, _, ps in [cold, *warm] for p in ps))
    for problem in problems:
        print("  problem:", problem)
    return 1 if args.strict and (not ok or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
