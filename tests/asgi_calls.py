"""One HTTP request through an ASGI middleware, as the server would make it (test helper)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def call(middleware: Callable, scope: dict) -> list[dict]:
    """The messages `middleware` sends back for the request `scope` (with no body), run on an event loop of its own:
    Playwright's sync API may run one in this thread."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, middleware(scope, receive, send)).result()
    return sent
