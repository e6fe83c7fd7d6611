"""The matrix-view component: draws a pictures.boards board in the page (the drawing is matrix_view.js)."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent
# A panel's base64 fields (pictures/boards.py), sent as bytes by packed(), each with what comes before its base64.
BLOB_FIELDS = {"png": "data:image/png;base64,", "values": "", "masked": ""}
_matrix_view = st.components.v2.component(
    "matrix_view", js=(HERE / "matrix_view.js").read_text(), css=(HERE / "matrix_view.css").read_text()
)


def show_board(board: dict, key: str, on_pick: Callable[[], None] | None = None) -> None:
    """Draw the board. When a pickable panel is clicked, `on_pick` runs as a callback before the rerun: read the
    click there with `picked_value(key)`."""
    _matrix_view(data=packed(board), key=key, on_pick_change=on_pick or (lambda: None))


def packed(board: dict) -> bytes:
    """The board as the component receives it: its pictures and arrays as raw bytes, not base64 inside JSON.

    A 512-piece board is mostly a PNG and float32 hover values (SmolLM2's: 3.4 MB of JSON, 2.9 MB of it base64). Sent
    as JSON, the browser holds it as one long string, then decodes each base64 string into bytes on its main thread;
    sent as bytes (Streamlit passes a component's bytes through as a Uint8Array), it is a quarter smaller on the wire
    and each array is one copy. Layout: a little-endian uint32 n, then n bytes of JSON (the board, with each base64
    field of a panel, "png", "values", "masked" and each extra row's "values", replaced by {"blob": i}, and "blobs":
    [[offset, length], ...] counted from the end of the JSON), then the blobs one after another. views/matrix_view.js
    unpacks it."""
    blobs: list[bytes] = []

    def blob(text: str, prefix: str = "") -> dict:
        if not text.startswith(prefix):
            raise ValueError(f"expected {prefix!r}, got {text[:40]!r}")
        blobs.append(base64.b64decode(text[len(prefix) :]))
        return {"blob": len(blobs) - 1}

    panels = []
    for panel in board["panels"]:
        panel = {
            **panel,
            **{name: blob(panel[name], prefix) for name, prefix in BLOB_FIELDS.items() if panel.get(name)},
        }
        if panel.get("extra"):
            panel["extra"] = [{**more, "values": blob(more["values"])} for more in panel["extra"]]
        panels.append(panel)
    spans, offset = [], 0
    for raw in blobs:
        spans.append([offset, len(raw)])
        offset += len(raw)
    header = json.dumps({**board, "panels": panels, "blobs": spans}).encode()
    return struct.pack("<I", len(header)) + header + b"".join(blobs)


def unpacked(data: bytes) -> dict:
    """The inverse of packed: the board with its base64 fields back."""
    (length,) = struct.unpack_from("<I", data)
    board = json.loads(data[4 : 4 + length])
    start = 4 + length
    spans = board.pop("blobs")

    def text(ref: dict, prefix: str = "") -> str:
        offset, size = spans[ref["blob"]]
        return prefix + base64.b64encode(data[start + offset : start + offset + size]).decode("ascii")

    for panel in board["panels"]:
        for name, prefix in BLOB_FIELDS.items():
            if isinstance(panel.get(name), dict):
                panel[name] = text(panel[name], prefix)
        for more in panel.get("extra") or []:
            more["values"] = text(more["values"])
    return board


def picked_value(key: str) -> dict | None:
    """Inside an on_pick callback: the `pick` of the panel just clicked."""
    state = st.session_state.get(key)
    return getattr(state, "pick", None) if state is not None else None
