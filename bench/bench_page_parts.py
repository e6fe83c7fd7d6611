"""What each part of the dashboard costs the Attention page against issue 25's sidebar-only baseline page.

The Attention page's target is 1.2x the sidebar-only page of bench_page_load.py --baseline. This bench serves that
page beside copies of it with one part of the dashboard added each, and the dashboard itself, loads them in turn
(serve.turns) in a new browser context each time, and prints each one's median time from goto to drawn as a multiple
of the sidebar-only page's, with the interval the ratio could move within by chance (bench/spread.py). It shows how
much of the 1.2x the dashboard's frame uses before the page's own controls draw anything:

- the navigation between the dashboard's eight pages (st.navigation);
- a custom component that draws one empty canvas, as Streamlit's components v2 (the matrix view's kind) and as a
  components v1 iframe (the older kind, for comparison);
- the matrix view drawing the Attention page's board (one map, the entropy panel and every map small) for the
  configured model of bench_page_load.SMALL;
- the navigation and that board together;
- one st.button, for scale: an element whose script Streamlit fetches when it first arrives.

Usage: python bench/bench_page_parts.py [--rounds 20]
Needs Chromium at /usr/bin/chromium (apt-get install -y chromium) or at $CHROMIUM.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

# bench/ is on sys.path when a script here runs
from bench_page_load import EMPTY_COMPONENT, IDLE, SIDEBAR, SMALL
from serve import APP, BASELINE_PRELUDE, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, serving_all, turns, wait_ready
from spread import LEVEL, ratio_interval

TIMEOUT_MS = 60_000
BASELINE = "sidebar-only page (the baseline)"
TITLE = 'st.title("Attention")\n'
NAVIGATION = """
def attention():
    st.title("Attention")
    PAGE_BODY


others = ("Mixing", "What heads do", "Compare", "Positional encodings", "Activations", "Anatomy", "Train")
pages = [st.Page(attention, title="Attention", default=True)]
pages += [st.Page(lambda: None, title=title, url_path=title.lower().replace(" ", "-")) for title in others]
st.navigation(pages).run()
"""
IFRAME_HTML = """<!doctype html><html><body style="margin: 0">
<script>
const send = (type, more) => window.parent.postMessage({ isStreamlitMessage: true, type, ...more }, "*");
window.addEventListener("message", (event) => {
  if (event.data.type !== "streamlit:render") return;
  const canvas = document.createElement("canvas");
  canvas.width = 800;
  canvas.height = 400;
  canvas.dataset.drawn = "true";
  document.body.replaceChildren(canvas);
  send("streamlit:setFrameHeight", { height: 400 });
});
send("streamlit:componentReady", { apiVersion: 1 });
</script></body></html>
"""
COMPONENT_V1 = """
import streamlit.components.v1 as components

components.declare_component("empty_canvas", path=IFRAME_FOLDER)(data="board", key="maps", default=None)
"""
BOARD = """
import explorer
from explorer.analysis.stats import head_entropy
from explorer.config import ModelConfig
from pictures.attention_panels import attention_map_panel, entropy_panel, grid_panel
from pictures.boards import board
from views.matrix_view import show_board


@st.cache_resource
def attention_board(tokens: str) -> dict:
    cfg = ModelConfig(**SIZES)
    maps = explorer.run(explorer.build_model(cfg), tokens).maps("self-attention")
    return board([attention_map_panel(maps, 0, 0), entropy_panel(head_entropy(maps))], [grid_panel(maps)])
"""
SHOW_BOARD = 'show_board(attention_board(st.session_state["tokens"]), key="maps")'
BUTTON = 'st.button("Remove this head")\n'

BOARD_DRAWN = f"() => {CHARTS_DRAWN}.length > 0 && {CHARTS_DRAWN}.every(Boolean)"
IFRAME_DRAWN = """() => [...document.querySelectorAll("iframe")].some((frame) => {
    try { return !!frame.contentDocument.querySelector("canvas[data-drawn]"); } catch (e) { return false; }
})"""
BUTTON_DRAWN = """() => !!document.querySelector("[data-testid='stButton'] button")"""
NOTHING_MORE = "() => true"
DASHBOARD = "the dashboard's Attention page"


def board_source() -> str:
    """BOARD for the configured model bench_page_load measures (SMALL)."""
    sizes = {name: value for name, value in SMALL.items() if name != "tokens"}
    return f"\nSIZES = {sizes!r}\n" + BOARD


def parts(iframe_folder: Path) -> dict[str, tuple[str, str]]:
    """Each variant's name: its app's source and what must be drawn, besides the title, for it to count as loaded."""
    board = board_source()
    return {
        BASELINE: (SIDEBAR + TITLE, NOTHING_MORE),
        "+ navigation": (SIDEBAR + NAVIGATION.replace("PAGE_BODY", "pass"), NOTHING_MORE),
        "+ components v2, one empty canvas": (SIDEBAR + TITLE + EMPTY_COMPONENT, BOARD_DRAWN),
        "+ components v1 iframe, one empty canvas": (
            SIDEBAR + TITLE + COMPONENT_V1.replace("IFRAME_FOLDER", repr(str(iframe_folder))),
            IFRAME_DRAWN,
        ),
        "+ the Attention page's board": (SIDEBAR + TITLE + board + SHOW_BOARD + "\n", BOARD_DRAWN),
        "+ navigation + that board": (SIDEBAR + board + NAVIGATION.replace("PAGE_BODY", SHOW_BOARD), BOARD_DRAWN),
        "+ one st.button": (SIDEBAR + TITLE + BUTTON, BUTTON_DRAWN),
    }


def load(browser, url: str, drawn: str) -> float:
    """Seconds from goto until the script run has finished, the title shows, `drawn` holds and no skeleton is left,
    in a new browser context."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        start = time.perf_counter()
        page.goto(url)
        for ready in (IDLE, drawn, "() => !document.querySelector(\"[data-testid='stSkeleton']\")"):
            wait_ready(page, ready, TIMEOUT_MS)
        seconds = time.perf_counter() - start
    finally:
        context.close()
    if errors:
        raise RuntimeError(f"{url}: {errors[0]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="loads of each page in turn, after one warming round")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    query = urlencode(SMALL)
    with tempfile.TemporaryDirectory() as folder:
        iframe_folder = Path(folder) / "iframe"
        iframe_folder.mkdir()
        (iframe_folder / "index.html").write_text(IFRAME_HTML)
        variants = parts(iframe_folder)
        apps, drawn = {}, {}
        for i, (name, (source, ready)) in enumerate(variants.items()):
            apps[name] = str(Path(folder) / f"part_{i}.py")
            Path(apps[name]).write_text(BASELINE_PRELUDE + source)
            drawn[name] = ready
        apps[DASHBOARD], drawn[DASHBOARD] = APP, BOARD_DRAWN
        times: dict[str, list[float]] = {name: [] for name in apps}
        with serving_all(apps) as bases, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for round_, order in enumerate(turns(list(apps), args.rounds + 1)):
                for name in order:
                    seconds = load(browser, f"{bases[name]}/?{query}", drawn[name])
                    if round_:  # the first round warms the servers' caches
                        times[name].append(seconds)
            browser.close()
    base = times.pop(BASELINE)
    print(f"URL -> drawn, new browser context each, median of {args.rounds} loads in turn; ?{query}")
    print(f"{'page':45} {'median':>7} {'ratio':>6}  {LEVEL:.0%} interval")
    print(f"{BASELINE:45} {statistics.median(base):6.2f}s {1:6.2f}x")
    for name, seconds in times.items():
        low, high = ratio_interval(seconds, base)
        ratio = statistics.median(seconds) / statistics.median(base)
        print(f"{name:45} {statistics.median(seconds):6.2f}s {ratio:6.2f}x  {low:.2f}-{high:.2f}x")
    print("  The Attention page's target is 1.2x the baseline (issue 25).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
