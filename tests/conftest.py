"""Shared fixtures: hand-built attention maps, the shipped checkpoints, and one Streamlit server + Chromium per test
session (per xdist worker): a server's start and its checkpoint loads are paid once, not once per module."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.serve import APP, CHARTS_DRAWN, CHROMIUM, CHROMIUM_ARGS, serving
from explorer.trace import AttentionMaps

# The GGUF weights cache (explorer.weights_cache) of the test runs: in the project's artifacts, not the user's home
# (540 MB for SmolLM2), shared by both xdist workers and every test server, kept between runs (a miss costs about 4 s a
# load); ATTENTION_EXPLORER_CACHE set by the caller wins, e.g. "off" to test cold loads.
os.environ.setdefault("ATTENTION_EXPLORER_CACHE", str(Path(__file__).resolve().parent.parent / "artifacts" / "weights"))
BROWSER_FILE_PREFIX = "test_browser_"  # .ci/junit_summary.py finds the browser tests in the report by their module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser test files run first, and a browser test lives in a test_browser_*.py file and only there.

    First: xdist hands whole files to the workers in this order, and the browser files are the longest (one takes two
    minutes), so taking them first leaves the many short engine files to even out the two workers' ends. The order
    inside each file, and of the files within each group, is kept. Only there: `make test` runs every test in one
    pytest run and its junit summary counts (and refuses skips of) the browser tests by module name."""
    items.sort(key=lambda item: not item.path.name.startswith(BROWSER_FILE_PREFIX))  # stable: file order kept
    for item in items:
        in_browser_file = item.path.name.startswith(BROWSER_FILE_PREFIX)
        if (item.get_closest_marker("browser") is not None) != in_browser_file:
            raise pytest.UsageError(
                f"{item.nodeid}: browser tests are marked @pytest.mark.browser and live in {BROWSER_FILE_PREFIX}*.py "
                "files, both or neither"
            )


def softmax_maps(
    scores: np.ndarray,
    allowed: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    kind: str = "self-attention",
) -> AttentionMaps:
    """AttentionMaps from raw scores [L, H, Tq, Tk] and allowed [Tq, Tk], the way the engine defines them."""
    masked = np.where(allowed, scores, -np.inf)  # [L, H, Tq, Tk]
    row_max = np.max(masked, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(allowed, np.exp(masked - row_max), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0).astype(np.float32)
    return AttentionMaps(kind, weights, masked.astype(np.float32), allowed, list(query_tokens), list(key_tokens))


@pytest.fixture
def make_maps() -> Callable[..., AttentionMaps]:
    """Factory: random softmax attention with L layers, H heads over the given tokens and allowed mask."""

    def make(
        n_layers: int = 2,
        n_heads: int = 3,
        tokens: list[str] | None = None,
        allowed: np.ndarray | None = None,
        seed: int = 0,
        key_tokens: list[str] | None = None,
    ) -> AttentionMaps:
        tokens = tokens or "the cat sat on the mat".split()
        key_tokens = key_tokens or tokens
        if allowed is None:
            allowed = np.ones((len(tokens), len(key_tokens)), dtype=bool)
        rng = np.random.default_rng(seed)
        scores = rng.normal(size=(n_layers, n_heads, len(tokens), len(key_tokens))) * 2.0
        return softmax_maps(scores, allowed, tokens, key_tokens)

    return make


def shared_checkpoint(name: str):
    """The shipped checkpoint `name`, loaded once per test process and shared with the app's own cache of checkpoints
    (views.caches._CHECKPOINTS), so the AppTest pages of this process find it there instead of loading a second copy
    (read, never mutated)."""
    import explorer
    from views import caches

    if name not in caches._CHECKPOINTS:
        caches._CHECKPOINTS[name] = explorer.load_pretrained(name)
    return caches._CHECKPOINTS[name]


@pytest.fixture(scope="session")
def minilm_model():
    """The shipped MiniLM checkpoint, loaded once per test session (read, never mutated)."""
    return shared_checkpoint("minilm-l6")


@pytest.fixture(scope="session")
def smollm_model():
    """The shipped SmolLM2 checkpoint, loaded once per test session (read, never mutated): about 10 s to load."""
    return shared_checkpoint("smollm2-135m")


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    """Base URL of `streamlit run app.py` (dashboard.py as `make run` and `make serve` serve it), one server per test
    session. Each browser test opens its own context (a new Streamlit session); what they share is the server's
    caches, as thirty students do. tests/test_browser_page_base_url.py also opens `streamlit run dashboard.py`."""
    with serving(APP) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per test session."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


LOCAL_PREFIXES = ("http://127.0.0.1", "http://localhost", "ws://127.0.0.1", "data:", "blob:", "about:")


@pytest.fixture
def page(browser):
    """A fresh page that records page errors and console errors in page.errors, and fails the test if the app
    asks for anything beyond this machine (the app must work with no network)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    p.errors = []
    external: list[str] = []
    p.on("request", lambda r: external.append(r.url) if not r.url.startswith(LOCAL_PREFIXES) else None)
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    p.on(
        "console",
        lambda m: (
            p.errors.append(m.text) if m.type == "error" and not m.text.startswith("Failed to load resource") else None
        ),
    )
    yield p
    context.close()
    assert not external, f"the app reached beyond this machine: {external[:3]}"


# Nothing left to draw: no skeleton (an element still loading), every Plotly chart laid out and every matrix view's
# canvas painted.
DRAWN = f"""() => document.querySelectorAll("[data-testid='stSkeleton']").length === 0
    && {CHARTS_DRAWN}.every(Boolean)"""
NEXT_FRAME = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def _wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script run has finished and the page has drawn what it sent.

    The 150 ms come first for a run a click has just asked for: the page says notRunning until the server's message
    that the run started arrives, and nothing on the page tells such a click from none. Then the run's end, and every
    chart drawn, and two frames for the page to lay itself out: not a fixed 300 ms, which every page load and every
    click paid (29 times in test_browser_attention.py alone) and which promised nothing on a busy machine."""
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=timeout_ms)
    page.wait_for_timeout(150)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout_ms)
    page.wait_for_function(DRAWN, timeout=timeout_ms)
    page.evaluate(NEXT_FRAME)


@pytest.fixture
def wait_idle() -> Callable[..., None]:
    """wait_idle(page): block until the app has finished its script run and drawn."""
    return _wait_idle


@pytest.fixture
def served_page(tmp_path) -> Callable[[str], contextlib.AbstractContextManager[str]]:
    """with served_page(source) as base: a page of its own (Streamlit script `source`, written to a temporary
    folder) served while the block runs, at URL `base`."""

    @contextlib.contextmanager
    def serve(source: str) -> Iterator[str]:
        (tmp_path / "page.py").write_text(source)
        with serving("page.py", root=tmp_path) as base:
            yield base

    return serve
