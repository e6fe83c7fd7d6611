"""Start the dashboard headless and wait until it answers; the Chromium flags this machine needs (benches and tests)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Whether each chart on the page is drawn: a Vega-Lite canvas with painted pixels, or a matrix view
# (views/matrix_view.js) whose every canvas is marked drawn.
CHARTS_DRAWN = """(() => {
    const painted = (c) => c.width > 0 && c.height > 0
        && c.getContext("2d").getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0);
    const vega = [...document.querySelectorAll("[data-testid='stVegaLiteChart']")].map(
        (chart) => [...chart.querySelectorAll("canvas")].some(painted) || !!chart.querySelector("svg.marks g"));
    const boards = [...document.querySelectorAll("[data-testid^='stBidiComponent']")].map((host) => {
        const canvases = [...(host.shadowRoot || host).querySelectorAll(".mv-board canvas")];
        return canvases.length > 0 && canvases.every((c) => c.dataset.drawn === "true");
    });
    return [...vega, ...boards];
})()"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app: str, port: int, log) -> subprocess.Popen:
    """The app, headless on 127.0.0.1:port; its output goes to the file `log` (a pipe nobody reads would fill)."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    command = [
        sys.executable, "-m", "streamlit", "run", app, "--server.headless=true", f"--server.port={port}",
        "--server.address=127.0.0.1", "--server.fileWatcherType=none",
    ]  # fmt: skip
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_health(port: int, server: subprocess.Popen, log, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")
            raise RuntimeError(f"streamlit exited early with code {server.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as answer:
                if answer.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("streamlit did not answer /_stcore/health in time")


@contextlib.contextmanager
def serving(app: str = "dashboard.py") -> Iterator[str]:
    """`streamlit run app` on a free port for the duration of the block: yields its base URL."""
    port = free_port()
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a pipe nobody reads would block the server
        server = start_server(app, port, log)
        try:
            wait_health(port, server, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
