"""views/page_base_url.py: a page's HTML gains the base-URL script; every other request and response is untouched."""

from __future__ import annotations

import pytest

from tests.asgi_calls import call
from views.page_base_url import SCRIPT, PageBaseUrlMiddleware, page_name, with_base_url

HTML = b'<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8" /><title>Streamlit</title></head><body></body>'
HTML += b"</html>"


def run(
    path: str,
    body_parts: list[bytes],
    kind: bytes = b"text/html",
    status: int = 200,
    method: str = "GET",
    base_path: str = "",
) -> tuple[list[dict], list]:
    """One request through the middleware in front of an app that answers with `body_parts` (a streamed body when
    more than one): the messages the server would send, and the headers the app was asked with."""
    seen_headers: list = []

    async def app(scope, receive, send):
        seen_headers.extend(scope["headers"])
        headers = [(b"content-type", kind), (b"content-length", str(sum(map(len, body_parts))).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for i, part in enumerate(body_parts):
            await send({"type": "http.response.body", "body": part, "more_body": i < len(body_parts) - 1})

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"host", b"127.0.0.1"), (b"accept-encoding", b"gzip, br")],
    }
    return call(PageBaseUrlMiddleware(app, base_path=base_path), scope), seen_headers


def body(sent: list[dict]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def length(sent: list[dict]) -> int:
    return int(dict(sent[0]["headers"])[b"content-length"])


@pytest.mark.parametrize(
    ("path", "base", "page"),
    [
        ("/positional", "", "positional"),
        ("/positional/", "", "positional"),  # Streamlit redirects it; a page all the same
        ("/", "", None),  # the first page: Streamlit's first guess is right there
        ("", "", None),
        ("/_stcore/health", "", None),
        ("/static/js/index.js", "", None),
        ("/favicon.png", "", None),  # a file
        ("/media", "", None),
        ("/explorer/positional", "explorer", "positional"),
        ("/explorer", "explorer", None),
        ("/explorer/", "explorer", None),
        ("/positional", "explorer", None),  # not under the base path
        ("/explorerx/positional", "explorer", None),
    ],
)
def test_which_paths_are_pages(path, base, page):
    assert page_name(path, base) == page


def test_a_page_gets_the_script_first_in_its_head_with_its_new_length():
    sent, seen = run("/positional", [HTML])
    assert body(sent) == with_base_url(HTML)
    assert body(sent).count(SCRIPT) == 1 and body(sent).index(SCRIPT) == HTML.index(b"<head>") + len(b"<head>")
    assert length(sent) == len(HTML) + len(SCRIPT)
    assert [k for k, _ in sent[0]["headers"]].count(b"content-length") == 1
    assert b"accept-encoding" not in dict(seen)  # asked uncompressed, so that it can be edited


def test_a_streamed_page_is_joined_before_it_is_edited():
    parts = [HTML[:10], HTML[10:40], HTML[40:]]  # "<head>" split across two parts
    sent, _ = run("/activations", parts)
    assert body(sent) == with_base_url(HTML) and length(sent) == len(with_base_url(HTML))


def test_a_page_under_the_base_path_gets_it_and_the_first_page_does_not():
    assert body(run("/explorer/heads", [HTML], base_path="explorer")[0]) == with_base_url(HTML)
    for path in ("/explorer/", "/"):
        sent, seen = run(path, [HTML], base_path="explorer" if path != "/" else "")
        assert body(sent) == HTML and length(sent) == len(HTML)
        assert dict(seen)[b"accept-encoding"] == b"gzip, br"


@pytest.mark.parametrize(
    ("path", "kind", "status", "method"),
    [
        ("/positional", b"text/html", 200, "HEAD"),
        ("/positional", b"text/html", 304, "GET"),
        ("/positional", b"application/json", 200, "GET"),
        ("/positional", b"text/html", 200, "POST"),
        ("/static/js/a.js", b"text/javascript", 200, "GET"),
        ("/_stcore/host-config", b"application/json", 200, "GET"),
    ],
)
def test_anything_else_passes_through_untouched(path, kind, status, method):
    answer = HTML if kind == b"text/html" else b'{"a": "<head>"}'
    sent, _ = run(path, [answer[:7], answer[7:]], kind=kind, status=status, method=method)
    assert body(sent) == answer and length(sent) == len(answer)
    assert sum(m["type"] == "http.response.body" for m in sent) == 2  # passed on as it came, part by part


def test_html_without_a_head_is_left_as_it_is():
    page = b"<html><body>no head</body></html>"
    assert body(run("/positional", [page])[0]) == page
