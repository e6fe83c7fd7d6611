"""The Compare page's "Share this comparison" box: a link to A, B, their texts and the attention shown."""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit

import streamlit as st


def share_link(query: dict[str, str]) -> str:
    """This app's address with `query` (none: the bare address)."""
    base = (st.context.url or "").split("?")[0]
    if base and not urlsplit(base).path:
        base += "/"
    return base + ("?" + urlencode(query, quote_via=quote) if query else "")


def view_query(kinds: list[str]) -> dict[str, str]:
    """The view as the address bar holds it: the kind of attention (of `kinds`, when there is a choice), the layer
    and head, what the maps show (measure=norms), B's tokens kept in their own order (align=false), stretched colours,
    and the per-layer lines' y axes when they are not auto."""
    kind = st.session_state.get("kind")
    view = {"kind": kind} if len(kinds) > 1 and kind in kinds else {}
    view |= {key: str(st.session_state[key]) for key in ("layer", "head") if st.session_state.get(key) not in (None, 0)}
    view |= {"measure": "norms"} if st.session_state.get("measure") == "norms" else {}
    view |= {"align": "false"} if st.session_state.get("align") is False else {}
    view |= {"stretch": "true"} if st.session_state.get("stretch") else {}
    return view | ({"axes": st.session_state["axes"]} if st.session_state.get("axes") in ("linear", "log") else {})


@st.fragment
def share_box(query: dict[str, str], kinds: list[str]) -> None:
    """The link in a copyable code block, drawn only once the box is opened (a code block costs the browser a
    script to load), with the view shown at that moment (the box and the maps are separate fragments)."""
    box = st.expander(
        "Share this comparison", icon=":material/link:", key="share_box", bind="query-params", on_change="rerun"
    )
    if box.open:
        box.caption(
            "A, B, the tokens, and the attention shown when this box was opened (the address bar always holds the "
            "view shown now), ready to copy:"
        )
        box.code(share_link(query | view_query(kinds)), language=None, wrap_lines=True)
