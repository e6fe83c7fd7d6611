"""Tell the browser where the server is when a page other than the first is opened by its link.

Streamlit's frontend does not know the server's base path. Opened at `/positional`, it asks
`/positional/_stcore/health` and `/positional/_stcore/host-config` first, gets two 404s, waits 100 ms (its retry
delay), then asks `/_stcore/...` and connects (Streamlit issue #7074, open). Every page but Attention paid that
wait before its script could start: 0.13 s from the page's HTML to its websocket, against 0.03 s at `/`.

The frontend reads a base URL from `window.__streamlit.BACKEND_BASE_URL` when the page defines it, and then asks
there alone. This ASGI middleware adds that definition to the HTML the server answers a page's URL with: the URL's
parent folder, as the browser sees it, so it stays right behind a proxy that serves the app under a prefix. The
app's first page is left alone: there Streamlit's first guess is already right. Streamlit's own server has no
place for a middleware, so app.py runs the dashboard as an st.App with this one.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# First path segments of Streamlit's own routes: never a page.
SERVER_ROUTES = ("_stcore", "static", "media", "component", "app", "auth", "oauth2callback")
SCRIPT = (
    b"<script>window.__streamlit=Object.assign("
    b'{BACKEND_BASE_URL:new URL(".",window.location.href).href},window.__streamlit)</script>'
)
HEAD = b"<head>"


def configured_base_path() -> str:
    """The server's base URL path (Streamlit's server.baseUrlPath), without slashes at either end; "" at the root."""
    from streamlit import config

    return (config.get_option("server.baseUrlPath") or "").strip("/")


def page_name(path: str, base_path: str) -> str | None:
    """The page a request's path opens below the app's base path (`positional` for `/positional`), or None when
    it is the first page, a path of Streamlit's server, a file, or not under the base path at all."""
    if base_path:
        prefix = f"/{base_path}"
        if path != prefix and not path.startswith(prefix + "/"):
            return None
        path = path[len(prefix) :]
    name = path.strip("/")
    if not name or "/" in name or "." in name or name in SERVER_ROUTES:
        return None
    return name


def with_base_url(html: bytes) -> bytes:
    """The page's HTML with the base-URL script first in its head (unchanged if it has no <head>)."""
    return html.replace(HEAD, HEAD + SCRIPT, 1)


class PageBaseUrlMiddleware:
    """ASGI middleware: a page's HTML (a GET of a page's URL answered 200 with text/html) gains SCRIPT; every other
    request and response passes through untouched."""

    def __init__(self, app: ASGIApp, base_path: str | None = None) -> None:
        self.app = app
        self.base_path = configured_base_path() if base_path is None else base_path.strip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or page_name(scope["path"], self.base_path) is None:
            await self.app(scope, receive, send)
            return
        # The HTML is 3 kB: ask for it uncompressed, so that it can be edited.
        headers = [(key, value) for key, value in scope["headers"] if key.lower() != b"accept-encoding"]
        held: dict[str, Any] = {}

        async def send_edited(message: Message) -> None:
            if message["type"] == "http.response.start":
                kind = dict((key.lower(), value) for key, value in message.get("headers", [])).get(b"content-type", b"")
                if message["status"] == 200 and kind.startswith(b"text/html"):
                    held["start"], held["body"] = message, b""
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                held["body"] += message.get("body", b"")
                if message.get("more_body", False):
                    return
                body = with_base_url(held.pop("body"))
                start = held.pop("start")
                kept = [(key, value) for key, value in start["headers"] if key.lower() != b"content-length"]
                await send({**start, "headers": [*kept, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            await send(message)

        await self.app({**scope, "headers": headers}, receive, send_edited)
