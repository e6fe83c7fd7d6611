"""How long until the Compare page is fully drawn for two 12-layer, 12-head configurations at 64 tokens?

Starts the dashboard headless on a free port and opens /compare with A = 12 layers x 12 heads, d_model 768,
d_ff 3072 (BERT-base sized), post-norm, on 64 tokens; B is the page's default, A with pre-norm, on A's weights.
Each load times page.goto(URL) until the script run has finished, no skeleton or spinner is left, and all four
Vega-Lite charts of the page (the A | B maps, A - B, the head ranking and the per-layer lines) are drawn: each
canvas painted (CHARTS_DRAWN in serve.py). The ranking table is drawn only on request, so it is not waited for.
The first load after the server starts is "cold" (imports, both models built, traces and gradients computed);
then --loads "warm" loads, each in a new browser context (no browser cache, a new Streamlit session, the
server's st.cache_* filled): the target applies to these.

--baseline also times, the same way, a bare Streamlit page with as many Vega-Lite charts of the same kinds and
sizes (two 64 x 64 pictures side by side, one 64 x 64 map drawn cell by cell, a clickable 12 x 12 map, four
small line charts): what any such page costs on this machine at this moment, since the machine is shared.

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

from serve import CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, serving  # bench/ is on sys.path when a script here runs

TARGET = 3.0  # seconds from navigation to the fully drawn Compare page, warm
SENTENCE = "the cat sat on the mat while a small dog ran after it across the long green field"
EXPECTED_CHARTS = 4  # A | B maps, A - B map, ranking heatmap, per-layer lines
# --baseline: the least a Streamlit page with the same Vega-Lite charts costs here (A and B as pictures, A - B
# cell by cell with hover, as the Compare page draws 64-token maps).
BASELINE_APP = """import base64
import io

import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image

st.set_page_config(layout="wide")
st.sidebar.text_input("Tokens", "the cat sat on the mat")
st.title("Compare A and B")
rng = np.random.default_rng(0)


def cells(name, n):
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return {name: pd.DataFrame({"q": q.ravel(), "k": k.ravel(), "value": rng.random(n * n).astype(np.float32)})}


def matrix(name, n, px, colours, low=0.0, high=1.0):
    cell = px / n
    scale = {"domain": [low, (low + high) / 2, high], "range": colours, "interpolate": "rgb"}
    return {
        "width": px, "height": px, "data": {"name": name},
        "title": {"text": name, "subtitle": ["a note under the title"], "anchor": "start"},
        "transform": [{"calculate": "datum.k + 1", "as": "k_end"}, {"calculate": "datum.q + 1", "as": "q_end"}],
        "params": [{"name": name + "_pick", "select": {"type": "point", "fields": ["q", "k"]}}] if n <= 12 else [],
        "mark": {"type": "rect", "strokeWidth": 0},
        "encoding": {
            "x": {"field": "k", "type": "quantitative", "scale": {"domain": [0, n], "nice": False}},
            "x2": {"field": "k_end"},
            "y": {"field": "q", "type": "quantitative", "scale": {"domain": [0, n], "nice": False, "reverse": True}},
            "y2": {"field": "q_end"},
            "color": {"field": "value", "type": "quantitative", "scale": scale},
            "tooltip": [{"field": "q"}, {"field": "k"}, {"field": "value", "format": ".4f"}],
        },
    }


def picture(name, n, px):
    rgb = np.repeat(np.repeat(rng.integers(0, 255, (n, n, 3), dtype=np.uint8), 7, axis=0), 7, axis=1)
    buffer = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buffer, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    view = matrix(name, n, px, blues)
    del view["params"], view["transform"], view["encoding"]["tooltip"], view["encoding"]["color"], view["mark"]
    position = view.pop("encoding")
    image = {"data": {"values": [{"url": url, "k": 0, "k_end": n, "q": 0, "q_end": n}]},
             "mark": {"type": "image", "aspect": False},
             "encoding": {**position, "url": {"field": "url", "type": "nominal"}}}
    legend = {"data": {"values": [{"v": 0.0}, {"v": 1.0}]}, "mark": {"type": "point", "opacity": 0},
              "encoding": {"color": {"field": "v", "type": "quantitative"}}}
    del view["data"]
    return {**view, "layer": [image, legend]}


def panel(i):
    return {
        "width": 400, "height": 190, "data": {"name": "lines"}, "transform": [{"filter": f"datum.panel == {i}"}],
        "layer": [
            {"mark": "line", "encoding": {"x": {"field": "layer", "type": "quantitative"},
             "y": {"field": "value", "type": "quantitative"}, "color": {"field": "model"},
             "strokeDash": {"field": "model"}}},
            {"mark": {"type": "point", "filled": True}, "encoding": {"x": {"field": "layer", "type": "quantitative"},
             "y": {"field": "value", "type": "quantitative"}, "color": {"field": "model"},
             "shape": {"field": "model"}, "tooltip": [{"field": "model"}, {"field": "value"}]}},
        ],
    }


def top(spec):  # drawn like the app's charts: on canvas, at their own size
    return {**spec, "autosize": {"type": "pad", "contains": "padding"},
            "usermeta": {"embedOptions": {"renderer": "canvas", "actions": False}}}


blues, diverging = ["#f7fbff", "#6baed6", "#08306b"], ["#c2410c", "#ffffff", "#1f5fa8"]
left, right = st.columns([5, 3])
left.vega_lite_chart(top({"hconcat": [picture("A", 64, 210), picture("B", 64, 210)],
                          "resolve": {"scale": {"color": "shared"}}}), theme=None, width="content")
right.vega_lite_chart(top({**matrix("A_minus_B", 64, 215, diverging, -1.0, 1.0), "datasets": cells("A_minus_B", 64)}),
                      theme=None, width="content")
st.vega_lite_chart(top({**matrix("ranking", 12, 360, blues), "datasets": cells("ranking", 12)}), theme=None,
                   width="content", key="ranking", on_select="rerun", selection_mode="ranking_pick")
lines = pd.DataFrame([(p, m, layer, rng.random()) for p in range(4) for m in "AB" for layer in range(-1, 12)],
                     columns=["panel", "model", "layer", "value"])
st.vega_lite_chart(top({"vconcat": [{"hconcat": [panel(0), panel(1)]}, {"hconcat": [panel(2), panel(3)]}],
                        "datasets": {"lines": lines}}), theme=None, width="content")
"""
# Done: the run has finished, nothing is a skeleton or spinner, and all the page's charts are drawn.
READY = f"""() => {{
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute("data-test-script-state") !== "notRunning") return false;
    if (document.querySelector("[data-testid='stSkeleton'], [data-testid='stSpinner']")) return false;
    const drawn = {CHARTS_DRAWN};
    return drawn.length >= {EXPECTED_CHARTS} && drawn.every(Boolean);
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
        page.wait_for_function(READY, timeout=timeout_ms, polling=50)
        took = time.perf_counter() - t0
        charts = page.locator("[data-testid='stVegaLiteChart'], [data-testid='stPlotlyChart']").count()
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

    with serving(app) as base, sync_playwright() as pw:
        url = f"{base}{path}"
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        cold = load_once(browser, url, timeout_ms)
        warm = [load_once(browser, url, timeout_ms) for _ in range(loads)]
        browser.close()
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
        with tempfile.TemporaryDirectory() as folder:
            baseline = Path(folder) / "baseline.py"
            baseline.write_text(BASELINE_APP)
            _, bare = measure(str(baseline), "/", args.loads, timeout_ms)
        bare_median = statistics.median(t for t, _, _ in bare)
        print(
            f"  baseline (bare page, {bare[0][1]} Vega-Lite charts of the same sizes), warm, new context x{len(bare)}: "
            f"median {bare_median:.2f} s; Compare page / baseline = {median / bare_median:.2f}"
        )
    print(f"  load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    problems = list(dict.fromkeys(p for _, _, ps in [cold, *warm, *bare] for p in ps))
    for problem in problems:
        print("  problem:", problem)
    return 1 if args.strict and (not ok or problems) else 0


if __name__ == "__main__":
    sys.exit(main())
