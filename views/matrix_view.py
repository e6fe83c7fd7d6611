"""The matrix-view component: draws a pictures.boards board in the page (the drawing is matrix_view.js)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from pictures.style import PNG_SIGNATURE

HERE = Path(__file__).parent
BLOB_FIELDS = ("png", "values", "masked")  # a panel's raw bytes (pictures/boards.py), sent as blobs by packed()
_matrix_view = st.components.v2.component(
    "matrix_view", js=(HERE / "matrix_view.js").read_text(), css=(HERE / "matrix_view.css").read_text()
)


def show_board(board: dict, key: str, on_pick: Callable[[], None] | None = None, width: int | str = "stretch") -> None:
    """Draw the board. When a pickable panel is clicked, `on_pick` runs as a callback before the rerun: read the
    click there with `picked_value(key)`. `width` "content": as wide as its panels (at most its parent's width)."""
    _matrix_view(data=packed(board), key=key, on_pick_change=on_pick or (lambda: None), width=width)


def packed(board: dict) -> bytes:
    """The board as the component receives it: its pictures and arrays as raw bytes beside JSON for the rest.

    A 512-piece board is mostly a PNG and float32 hover values (SmolLM2's: 2.2 MB of them). JSON cannot hold bytes,
    and as base64 they would be a third larger on the wire and decoded on the browser's main thread; Streamlit
    passes a component's bytes through as a Uint8Array. Layout: a little-endian uint32 n, then n bytes of JSON (the
    board, with each bytes field of a panel, "png", "values", "masked" and each extra row's "values", replaced by
    {"blob": i}, and "blobs": [[offset, length], ...] counted from the end of the JSON), then the blobs one after
    another. views/matrix_view.js unpacks it."""
    blobs: list[bytes] = []

    def blob(data: bytes, name: str) -> dict:
        if not isinstance(data, bytes):
            raise TypeError(f"a panel's {name} must be bytes, not {type(data).__name__}")
        blobs.append(data)
        return {"blob": len(blobs) - 1}

    panels = []
    for panel in board["panels"]:
        if not panel["png"].startswith(PNG_SIGNATURE):
            raise ValueError(f"panel {panel.get('name')!r}: its picture is not a PNG")
        panel = {**panel, **{name: blob(panel[name], name) for name in BLOB_FIELDS if panel.get(name)}}
        if panel.get("extra"):
            panel["extra"] = [{**more, "values": blob(more["values"], "values")} for more in panel["extra"]]
        panels.append(panel)
    spans, offset = [], 0
    for raw in blobs:
        spans.append([offset, len(raw)])
        offset += len(raw)
    header = json.dumps({**board, "panels": panels, "blobs": spans}).encode()
    return struct.pack("<I", len(header)) + header + b"".join(blobs)


def unpacked(data: bytes) -> dict:
    """The inverse of packed."""
    (length,) = struct.unpack_from("<I", data)
    board = json.loads(data[4 : 4 + length])
    start = 4 + length
    spans = board.pop("blobs")

    def raw(ref: dict) -> bytes:
        offset, size = spans[ref["blob"]]
        return data[start + offset : start + offset + size]

    for panel in board["panels"]:
        for name in BLOB_FIELDS:
            if isinstance(panel.get(name), dict):
                panel[name] = raw(panel[name])
        for more in panel.get("extra") or []:
            more["values"] = raw(more["values"])
    return board


def picked_value(key: str) -> dict | None:
    """Inside an on_pick callback: the `pick` of the panel just clicked."""
    state = st.session_state.get(key)
    return getattr(state, "pick", None) if state is not None else None
