"""Send a link to the first page by its name (`/attention`) to the app's root, where that page lives.

The dashboard's first page is its default page, which Streamlit serves at the root alone: opened at `/attention`,
like every other page at its own name, it showed Streamlit's "Page not found" dialog over the Attention page, which
could not be clicked until the dialog was closed. This ASGI middleware answers that one path with a redirect to the
root, the query string kept, before Streamlit sees it. The redirect is relative (`./`), so it stays right under
`--server.baseUrlPath` and behind a proxy that serves the app under a prefix. app.py runs it; `streamlit run
dashboard.py` still shows the dialog.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from views.page_base_url import configured_base_path, page_name


class FirstPageRedirectMiddleware:
    """ASGI middleware: a GET or HEAD of `/<first_page>` or `/<first_page>/` (below the base path) is answered 307
    to the root, its query kept; every other request passes through untouched."""

    def __init__(self, app: ASGIApp, first_page: str, base_path: str | None = None) -> None:
        self.app = app
        self.first_page = first_page
        self.base_path = configured_base_path() if base_path is None else base_path.strip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
        if not asked or page_name(scope["path"], self.base_path) != self.first_page:
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string", b"")
        up = b"../" if scope["path"].endswith("/") else b"./"  # from /x/attention and /x/attention/ to /x/
        location = up + (b"?" + query if query else b"")
        headers = [(b"location", location), (b"content-length", b"0"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 307, "headers": headers})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
