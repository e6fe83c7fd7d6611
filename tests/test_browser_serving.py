"""`make serve` for a class: two servers started the documented way answer the same link with identical downloads,
so any server behind a reverse proxy can take any student."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.serve import base_url, free_port, wait_health

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
LINK = "/?seed=7&n_heads=4&mask=causal&tokens=the%20teacher%20shares%20one%20link&layer=1&head=3"


@contextlib.contextmanager
def make_serve() -> Iterator[str]:
    """`make serve` on a free port of 127.0.0.1, as README tells a teacher to start it; yields its base URL."""
    port = free_port()
    command = ["make", "--no-print-directory", "serve", f"SERVE_PORT={port}", "SERVE_ADDRESS=127.0.0.1"]
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_health(port, server, log, timeout=120)
            yield base_url(port)
        finally:
            os.killpg(server.pid, signal.SIGTERM)  # make and the streamlit it started
            server.wait(timeout=20)


def downloads(page, base: str, wait_idle) -> dict[str, bytes]:
    """The Attention page's two downloads for LINK on the server at `base`."""
    page.goto(base + LINK)
    wait_idle(page)
    files = {}
    for kind in ("CSV", "JSON"):
        with page.expect_download() as info:
            page.get_by_role("button", name=f"Download {kind}").click()
        files[kind] = Path(info.value.path()).read_bytes()
    return files


def test_two_servers_give_the_same_link_identical_downloads(page, wait_idle):
    with make_serve() as first, make_serve() as second:
        one, two = downloads(page, first, wait_idle), downloads(page, second, wait_idle)
    assert one["JSON"] == two["JSON"] and one["CSV"] == two["CSV"]
    assert b'"seed": 7' in one["JSON"] and b'"layer": 1' in one["JSON"]  # the link's model and head, not defaults
    assert len(one["CSV"].splitlines()) == 1 + 5 * 5  # a header, then every cell of the 5-token map
