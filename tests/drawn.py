"""Read charts the way the browser gets them: Plotly figures (the JSON Streamlit sends, arrays decoded) and
matrix-view boards (views/matrix_view.js) (test helper)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from dataclasses import dataclass

import numpy as np
from PIL import Image

from pictures.boards import decode_floats


def rgb(colour: str) -> list[int]:
    """ "#rrggbb" as [r, g, b], read here rather than with the code under test."""
    return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]


# plotly.io.to_json writes a numpy array as {"dtype": "f4", "bdata": base64, "shape": "3, 4"}, read here by hand
# rather than with plotly's own decoder, so that a test does not trust the code that wrote it.
PLOTLY_DTYPES = {"f8": "<f8", "f4": "<f4", "i1": "<i1", "u1": "<u1", "i2": "<i2", "u2": "<u2", "i4": "<i4",
                 "u4": "<u4"}  # fmt: skip


def _decoded(node):
    """A Plotly JSON value with every base64 typed array turned into a numpy array."""
    if isinstance(node, dict):
        if set(node) >= {"dtype", "bdata"}:
            values = np.frombuffer(base64.b64decode(node["bdata"]), dtype=PLOTLY_DTYPES[node["dtype"]])
            shape = node.get("shape")
            return values.reshape([int(n) for n in str(shape).split(",")]) if shape else values
        return {key: _decoded(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_decoded(value) for value in node]
    return node


def app_figures(at) -> list[dict]:
    """Every Plotly figure an AppTest run drew, top to bottom: {"data": [...], "layout": {...}} as sent to the
    browser, with arrays decoded."""
    return [_decoded(json.loads(element.proto.spec)) for element in at.get("plotly_chart")]


def figure_json(figure) -> dict:
    """A plotly Figure as Streamlit sends it (plotly.io.to_json), arrays decoded: what a figure-builder test reads."""
    import plotly.io

    return _decoded(json.loads(plotly.io.to_json(figure, validate=False)))


def figure_title(figure: dict) -> str:
    """A figure's title and subtitle as one string, its HTML line breaks and entities undone."""
    title = figure["layout"].get("title") or {}
    text = " ".join([title.get("text", ""), (title.get("subtitle") or {}).get("text", "")])
    return html.unescape(text.replace("<br>", " "))


def figure_titled(at, words: str) -> dict:
    """The one Plotly figure of an AppTest run whose title or subtitle contains `words`."""
    found = [figure for figure in app_figures(at) if words in figure_title(figure)]
    assert len(found) == 1, f"{len(found)} figures titled {words!r}: {[figure_title(f) for f in app_figures(at)]}"
    return found[0]


def figure_trace(figure: dict, name: str) -> dict:
    """The one trace of a figure called `name` (its legend entry)."""
    found = [trace for trace in figure["data"] if trace.get("name") == name]
    assert len(found) == 1, f"{len(found)} traces named {name!r}: {[t.get('name') for t in figure['data']]}"
    return found[0]


@dataclass
class DrawnMatrix:
    """A matrix view as drawn: values NaN where masked (grey), labels along each axis, titles."""

    name: str
    values: np.ndarray  # [Tq, Tk] float; NaN where the cell is drawn grey
    masked: np.ndarray  # [Tq, Tk] bool
    x_labels: list[str]
    y_labels: list[str]
    x_title: str
    y_title: str
    title: str
    view: dict
    image: np.ndarray  # [rows, cols, 3] uint8: the picture the panel paints, one pixel per cell


def _decode_png(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def app_boards(at) -> dict[str, dict]:
    """Every matrix-view board an AppTest run drew, by the key it was drawn with."""
    found = {}
    for element in at.get("bidi_component"):
        if element.proto.component_name == "matrix_view":
            found[element.proto.id.split("-", 2)[-1]] = board_as_sent(element.proto.bytes)
    return found


def board_as_sent(data: bytes) -> dict:
    """A board as the component receives it (views/matrix_view.py sends packed bytes: uint32 n, n bytes of JSON, then
    the blobs its panels point to as {"blob": i}), read here by hand with its blobs back in place, the form
    pictures.boards makes and the readers below take, rather than with the code under test."""
    length = int.from_bytes(data[:4], "little")
    board = json.loads(data[4 : 4 + length].decode("utf-8"))
    blobs = [data[4 + length + offset : 4 + length + offset + size] for offset, size in board.pop("blobs")]

    def raw(node):
        if isinstance(node, dict) and set(node) == {"blob"}:
            return blobs[node["blob"]]
        return node

    for panel in board["panels"]:
        for name in ("png", "values", "masked"):
            if name in panel:
                panel[name] = raw(panel[name])
        for more in panel.get("extra") or []:
            more["values"] = raw(more["values"])
    return board


def panel_matrix(panel: dict) -> DrawnMatrix:
    """One matrix panel of a board as drawn."""
    shape = (panel["rows"], panel["cols"])
    values = decode_floats(panel["values"], shape).astype(np.float64)
    masked = np.zeros(shape, dtype=bool)
    if panel["masked"]:
        masked = np.frombuffer(panel["masked"], dtype=np.uint8).reshape(shape).astype(bool)
    values[masked] = np.nan
    title = " ".join(t for t in (panel["title"], panel["subtitle"]) if t)
    return DrawnMatrix(panel["name"], values, masked, panel["x_labels"], panel["y_labels"], panel["x_title"],
                       panel["y_title"], title, panel, _decode_png(panel["png"]))  # fmt: skip


def sheet_maps(sheet: dict) -> dict[str, np.ndarray]:
    """Each small map of a sheet panel by its title: the [rows, cols, 3] part of the sheet's picture it is cut from."""
    picture = _decode_png(sheet["png"])  # one pixel per cell, map i at row i // columns, column i % columns of maps
    rows, cols, across = sheet["rows"], sheet["cols"], sheet["columns"]
    return {
        title: picture[(i // across) * rows : (i // across + 1) * rows, (i % across) * cols : (i % across + 1) * cols]
        for i, title in enumerate(sheet["titles"])
    }


def app_matrices(at) -> dict[str, DrawnMatrix]:
    """Every matrix panel the boards of an AppTest run drew, by name (not the small maps of a sheet: sheet_maps)."""
    drawn = [panel_matrix(p) for board in app_boards(at).values() for p in board["panels"] if p["kind"] == "matrix"]
    names = [m.name for m in drawn]
    assert len(set(names)) == len(names), f"two matrices share a name: {names}"
    return {m.name: m for m in drawn}


def as_read(markdown: str) -> str:
    """Markdown text as a reader sees it: its backslash escapes undone by CommonMark's rule (a backslash before an
    ASCII punctuation mark shows the mark), not by the code that wrote them."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def table_as_read(at, column: str):
    """The st.table holding `column`, its text cells as a reader sees them (as_read)."""
    [frame] = [t.value for t in at.table if column in t.value.columns]
    return frame.map(lambda cell: as_read(cell) if isinstance(cell, str) else cell)
