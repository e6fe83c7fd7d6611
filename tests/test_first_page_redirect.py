"""views/first_page_redirect.py: a link to the first page by its name goes to the root, query kept; nothing else."""

from __future__ import annotations

import pytest

from tests.asgi_calls import call
from views.first_page_redirect import FirstPageRedirectMiddleware


def answer(path: str, query: bytes = b"", method: str = "GET", base_path: str = "") -> tuple[int, dict, bool]:
    """One request through the middleware in front of an app that answers 200: (status, headers, whether the app
    was asked)."""
    asked: list[str] = []

    async def app(scope, receive, send):
        asked.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": []}
    sent = call(FirstPageRedirectMiddleware(app, first_page="attention", base_path=base_path), scope)
    return sent[0]["status"], dict(sent[0]["headers"]), bool(asked)


@pytest.mark.parametrize(
    ("path", "query", "base_path", "location"),
    [
        ("/attention", b"tokens=the%20cat&layer=1", "", b"./?tokens=the%20cat&layer=1"),
        ("/attention", b"", "", b"./"),
        ("/attention/", b"head=2", "", b"../?head=2"),
        ("/explorer/attention", b"n_heads=2", "explorer", b"./?n_heads=2"),
    ],
)
def test_the_first_pages_name_is_sent_to_the_root_with_its_query(path, query, base_path, location):
    status, headers, asked = answer(path, query, base_path=base_path)
    assert (status, headers[b"location"], asked) == (307, location, False)


@pytest.mark.parametrize(
    ("path", "method", "base_path"),
    [
        ("/", "GET", ""),  # the first page itself
        ("/positional", "GET", ""),  # another page
        ("/attention", "POST", ""),
        ("/attention.js", "GET", ""),  # a file
        ("/_stcore/health", "GET", ""),
        ("/attention", "GET", "explorer"),  # not under the base path
        ("/explorer/positional", "GET", "explorer"),
    ],
)
def test_every_other_request_reaches_the_app(path, method, base_path):
    status, _, asked = answer(path, method=method, base_path=base_path)
    assert (status, asked) == (200, True)
