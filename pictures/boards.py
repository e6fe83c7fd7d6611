"""What the matrix-view component (views/matrix_view.js) draws: matrices as plain data, built without Streamlit.

Why a component of our own and not Plotly heatmaps for the app's matrices: Streamlit loads Plotly as a 4.7 MB
script, about a second of a cold page load on this 2-core machine (bench/bench_page_load.py), and the Attention page
draws up to 144 maps of 512 x 512 cells at once, as one sheet. The component is a few kilobytes of script: it paints
each matrix from a PNG coloured here (with pictures.style.Ramp, the same colours as every other chart) and reads
hover values from the float32 array the panel carries, so hover works for every cell of any size.

A board is {"panels": [...], "breaks": [...]}: each panel is one matrix with axes and a legend ("kind": "matrix"), or
a sheet of small maps of one shape ("kind": "sheet"), such as every layer x head of a model. Panels sit in a row
that wraps; the panels whose index is in "breaks" start a new row. A panel holds its picture ("png") and the arrays
hover reads ("values", "masked") as raw bytes, which views/matrix_view.py sends to the browser as they are.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
import torch
import torch.nn.functional as F

from pictures.style import MAX_CELL_PX, MAX_CELL_TEXT, MAX_TICKS, Ramp, noted, png_bytes, ticks

GRID_LINES_UP_TO = 40  # thin white lines between cells while neither side has more cells than this
LEGEND_TICKS = 4  # at most this many round values marked between the two ends of a colour legend
FEWER_LEGEND_TICKS = (2, 1)  # the sparser sets a short legend bar falls back to (fewer_legend_ticks)
# pooled_maps copies this much at a time: under glibc's largest mmap threshold (32 MB), so each chunk reuses the
# last one's memory instead of faulting in fresh pages (SmolLM2's 270 maps of 512 x 512, causal: 0.21 s, against
# 0.39-0.44 s in chunks of 32 maps, 33.5 MB, on the 2-core VM, where fresh pages are slow).
POOL_CHUNK_BYTES = 8 * 2**20
# The narrowest cell a value is written in by default: "0.25" in the component's 11 px cell font takes about 20 px (a
# 13-token reordering map at 190 px, 14.6 px a cell, wrote each number over its neighbours)
CELL_TEXT_PX = 22.0


def encode_floats(values: np.ndarray) -> bytes:
    """Values as little-endian float32 bytes, row by row (what the component reads)."""
    return np.ascontiguousarray(values, dtype="<f4").tobytes()


def decode_floats(data: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """The inverse of encode_floats."""
    return np.frombuffer(data, dtype="<f4").reshape(shape)


def matrix_panel(
    values: np.ndarray,
    allowed: np.ndarray | None,
    ramp: Ramp,
    *,
    name: str,
    x_labels: list[str],
    y_labels: list[str],
    x_title: str,
    y_title: str,
    value_title: str,
    title: str,
    subtitle: str | None = None,
    value_digits: int = 4,
    text_digits: int | None = 2,
    masked_text: str = "masked: may not attend (weight 0)",
    max_px: float = 640,
    pick: str | None = None,
    extra: dict[str, np.ndarray | tuple[np.ndarray, int | None]] | None = None,
    outline: tuple[int, int] | None = None,
    tick_px: float | None = None,
    text_px: float = CELL_TEXT_PX,
    plot_px: tuple[float, float] | None = None,
    frame: tuple[int, int] | None = None,
    hover_titles: tuple[str, str] | None = None,
    hover_names: tuple[list[str], list[str]] | None = None,
    legend_marks: list[float] | None = None,
    legend: bool = True,
    legend_title: str | None = None,
    label_chars: int = 14,
    wrap_subtitle: bool = False,
) -> dict:
    """A [Tq, Tk] matrix: keys across, queries down (first on top), masked cells grey.

    The panel has labelled axes and a colour legend, and hover gives query, key and value, then one row per `extra`
    matrix ({title: [Tq, Tk] values}, e.g. the two maps a difference came from; {title: (values, decimals)} to show
    that row with its own number of decimals, 0 for a rank, None for 4 significant digits). With `pick` = "cell", a
    click sends back the cell clicked ({"row": q, "col": k}). `outline` = (row, col) draws a red frame round that
    cell, `frame` = (rows, cols) one round the top-left block of that many cells. Cells are square, at most max_px a
    side, unless `plot_px` = (width, height) gives the matrix its own size. Hover names a cell's row and column by
    the axis titles, or by `hover_titles` = (row name, column name) when both axes have the same title; it writes
    each row and column as its label, or as `hover_names` = (row names, column names) gives them. The colour
    legend marks round values between its ends (legend_ticks; fewer_legend_ticks on a short bar), or the values
    `legend_marks`, under `legend_title`
    (default: `value_title`; a board whose maps share one scale names them there); without `legend` the panel draws
    none (a neighbour on the same scale draws it). With `wrap_subtitle` the subtitle wraps to the width the rest of
    the panel takes instead of widening it (a board sized to its content keeps to its map).

    Labels: up to MAX_TICKS tokens an axis, or with `tick_px` as many as fit that far apart (every n-th token);
    the component cuts a label longer than `label_chars` characters short on the axis, and hover gives it whole.
    Values are written in the cells of small matrices (MAX_CELL_TEXT) whose cells are at least `text_px` wide (by
    default CELL_TEXT_PX, which "0.25" needs: narrower cells wrote numbers over one another).
    """
    values = np.asarray(values, dtype=np.float32)  # [Tq, Tk]
    tq, tk = values.shape
    if len(x_labels) != tk or len(y_labels) != tq:
        raise ValueError(f"{len(y_labels)} x {len(x_labels)} labels for a {tq} x {tk} matrix")
    masked = np.zeros((tq, tk), dtype=bool) if allowed is None else ~np.asarray(allowed, dtype=bool)  # [Tq, Tk]
    if plot_px is None:  # px per cell: square cells, at most max_px a side
        cell = cell_h = min(MAX_CELL_PX, max_px / max(tq, tk))
    else:
        cell, cell_h = plot_px[0] / tk, plot_px[1] / tq
    cell, cell_h = max(1.0, cell), max(1.0, cell_h)  # every cell at least a pixel wide and high: hover reaches it
    shown = np.where(masked, np.nan, values)  # [Tq, Tk]: NaN is drawn grey
    return {
        "kind": "matrix",
        "name": name,
        "title": title,
        "subtitle": subtitle,
        "wrap_subtitle": wrap_subtitle,
        "rows": tq,
        "cols": tk,
        "cell_px": cell,
        "cell_h": cell_h,
        "png": png_bytes(ramp.rgb(shown)),  # one pixel per cell; the browser scales it up unsmoothed
        "values": encode_floats(values),
        "masked": masked.astype(np.uint8).tobytes() if masked.any() else None,  # [Tq, Tk] row by row, 1 = masked
        "x_labels": list(x_labels),
        "y_labels": list(y_labels),
        "x_ticks": _tick_cells(tk, cell, tick_px),
        "y_ticks": _tick_cells(tq, cell_h, tick_px),
        "x_title": x_title,
        "y_title": y_title,
        "hover_titles": None if hover_titles is None else list(hover_titles),
        "hover_names": None if hover_names is None else [list(names) for names in hover_names],
        "value_title": value_title,
        "value_digits": value_digits,
        "text_digits": text_digits if tq * tk <= MAX_CELL_TEXT and cell >= text_px else None,
        "grid_lines": max(tq, tk) <= GRID_LINES_UP_TO,
        "masked_text": masked_text,
        "label_chars": label_chars,
        "legend": {
            "title": value_title if legend_title is None else legend_title,
            "colours": list(ramp.colours),
            "low": ramp.low,
            "high": ramp.high,
            "ticks": legend_ticks(ramp.low, ramp.high) if legend_marks is None else list(legend_marks),
            "fewer_ticks": fewer_legend_ticks(ramp.low, ramp.high) if legend_marks is None else [],
        }
        if legend
        else None,
        "pick": pick,
        "extra": [_extra_row(title, row, value_digits) for title, row in (extra or {}).items()],
        "frame": _red_frame(outline, frame),
    }


def _red_frame(outline: tuple[int, int] | None, frame: tuple[int, int] | None) -> list[int] | None:
    """matrix_panel's `outline` (one cell) or `frame` (a top-left block) as the one block the component frames in
    red: [first row, first column, rows, columns]."""
    if outline is not None and frame is not None:
        raise ValueError("a panel frames one cell (outline) or one block (frame), not both")
    if outline is not None:
        return [int(outline[0]), int(outline[1]), 1, 1]
    return None if frame is None else [0, 0, int(frame[0]), int(frame[1])]


def legend_ticks(low: float, high: float, most: int = LEGEND_TICKS) -> list[float]:
    """Round values strictly between low and high to mark on a colour legend (its ends are labelled anyway): the
    multiples of the largest of 1, 2 or 5 x 10^k steps that gives at most `most` of them. None when the legend's
    three significant digits could not tell them from each other or from the ends (a nearly constant matrix)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return []
    ticks = _round_values_between(low, high, most)
    texts = [f"{t:.3g}" for t in (low, *ticks, high)]  # as the legend writes them (views/matrix_view.js, legendText)
    return ticks if len(set(texts)) == len(texts) else []


def fewer_legend_ticks(low: float, high: float) -> list[list[float]]:
    """Sparser sets of legend_ticks (at most FEWER_LEGEND_TICKS values each), densest first, each unlike the sets
    before it: what a legend bar too short for legend_ticks' labels writes (views/matrix_view.js), an even "1, 0.5,
    0" rather than the "1, 0.6, 0.4, 0" left of 0.2, 0.4, 0.6, 0.8 when the two next to the ends are dropped."""
    sets = [legend_ticks(low, high)]
    for most in FEWER_LEGEND_TICKS:
        ticks = legend_ticks(low, high, most)
        if ticks and ticks not in sets:
            sets.append(ticks)
    return sets[1:]


def _round_values_between(low: float, high: float, most: int) -> list[float]:
    coarser: list[float] = []
    for power in range(math.floor(math.log10(high - low)) + 1, math.floor(math.log10(high - low)) - 3, -1):
        for unit in (5, 2, 1):
            step = unit * 10.0**power
            inside = [k * step for k in range(math.floor(low / step) + 1, math.ceil(high / step))]
            if len(inside) > most:
                return coarser
            coarser = [float(f"{t:.12g}") + 0.0 for t in inside]  # 0.6, not 0.6000000000000001; + 0.0: no -0.0
    return coarser


def _extra_row(title: str, row: np.ndarray | tuple[np.ndarray, int | None], value_digits: int) -> dict:
    """One extra hover row: its title, values and decimals (the panel's unless the row brings its own; None: four
    significant digits)."""
    values, digits = row if isinstance(row, tuple) else (row, value_digits)
    return {"title": title, "values": encode_floats(values), "digits": digits}


def _tick_cells(n: int, cell_px: float, tick_px: float | None) -> list[int]:
    """The cells to label along an axis of n cells: up to MAX_TICKS, or (with tick_px) as many as fit that far
    apart, at least 2."""
    most = MAX_TICKS if tick_px is None else max(2, int(cell_px * n / tick_px))
    return [int(t) for t in ticks(n, most)]


def sheet_panel(
    maps: np.ndarray,
    allowed: np.ndarray | None,
    ramp: Ramp,
    *,
    name: str,
    titles: list[str],
    columns: int,
    max_px: float,
    hovers: list[str],
    picks: list[dict] | None = None,
    picked: int | None = None,
    title: str | None = None,
    subtitle: str | None = None,
    whole: Collection[int] = (),
) -> dict:
    """Small [Tq, Tk] maps, `columns` to a row, each under its title: one picture of them all, drawn on one canvas.

    One canvas and one image however many maps there are: as panels of their own, the 144 maps of a 12 x 12 model
    cost the browser 0.3 s more. Each map's longer side is `max_px`. Hover gives a map's `hovers` text; a click
    sends back its `picks` entry (none: the maps are not clickable); map `picked` is framed in red. `title` and
    `subtitle` go above the sheet. Cells `allowed` leaves out are grey, except in the maps numbered in `whole`, drawn
    on every cell (what a head replaced by its mean adds reaches every query from every key).

    Maps with more cells a side than `max_px` pixels are sent at their drawn size (pooled_maps: each pixel the
    largest value of the cells it covers), and the subtitle says so: 270 maps of 512 x 512 would be a 70-million-
    pixel picture, of which the browser shows 2 million.
    """
    maps = np.asarray(maps, dtype=np.float32)  # [n, Tq, Tk]
    n, tq, tk = maps.shape
    if not len(titles) == len(hovers) == n or (picks is not None and len(picks) != n):
        raise ValueError(f"{len(titles)} titles and {len(hovers)} hovers for {n} maps")
    masked = np.zeros((tq, tk), dtype=bool) if allowed is None else ~np.asarray(allowed, dtype=bool)  # [Tq, Tk]
    factor = max(1, math.ceil(max(tq, tk) / max(max_px, 1.0)))
    shown = pooled_maps(maps, masked, factor)  # [n, Tq / factor, Tk / factor], NaN where every cell is masked
    if whole := sorted(set(whole)):
        shown[whole] = pooled_maps(maps[whole], np.zeros_like(masked), factor)  # [len(whole), Tq', Tk']
    sq, sk = shown.shape[1:]
    rows = -(-n // columns)
    picture = np.full((rows * columns, sq, sk, 3), 255, dtype=np.uint8)  # white where the last row has no map
    picture[:n] = ramp.rgb(shown)  # [n, sq, sk, 3]
    picture = picture.reshape(rows, columns, sq, sk, 3).swapaxes(1, 2).reshape(rows * sq, columns * sk, 3)
    cell = min(MAX_CELL_PX, max_px / max(sq, sk))
    if factor > 1:
        pooled = f"Each small map is {tq} × {tk} cells drawn on {sq} × {sk} pixels: a pixel shows the largest value "
        pooled += (
            f"of the {factor} × {factor} cells it covers{_edge_note(tq, tk, factor)}; the map above shows every cell."
        )
        subtitle = pooled if not subtitle else f"{subtitle} {pooled}"
    return {
        "kind": "sheet",
        "name": name,
        "title": title,
        "subtitle": subtitle,
        "columns": columns,
        "rows": sq,
        "cols": sk,
        "cell_px": cell,  # square cells
        "png": png_bytes(picture),  # map i's cells at row i // columns, column i % columns of maps
        "titles": list(titles),
        "hovers": list(hovers),
        "picks": picks,
        "picked": picked,
    }


def _edge_note(tq: int, tk: int, factor: int) -> str:
    """What sheet_panel's pooled subtitle adds when a side is no multiple of `factor`: its last pixels cover fewer
    cells (494 cells in blocks of 8: the last block holds 6)."""
    rows, cols = tq % factor, tk % factor
    if not rows and not cols:
        return ""
    edges = [edge for edge, left in (("right", cols), ("bottom", rows)) if left]
    return f" (fewer at the {' and '.join(edges)} edge{'s' if len(edges) > 1 else ''})"


def pooled_maps(maps: np.ndarray, masked: np.ndarray, factor: int, chunk_bytes: int = POOL_CHUNK_BYTES) -> np.ndarray:
    """[n, Tq, Tk] -> [n, ceil(Tq / factor), ceil(Tk / factor)] float32: the largest allowed value of each block of
    factor x factor cells, NaN (drawn grey) where every cell of the block is masked (masked [Tq, Tk], True =
    masked). A block max, not a mean, so one sharp line (a head reading the previous token) stays as dark as it
    is. Computed a chunk of maps (at most `chunk_bytes` of float32) at a time: no float copy of all the maps at
    once. A masked cell may hold any finite value (attention weights hold 0 there); it is never drawn."""
    if factor == 1:
        return np.where(masked, np.nan, maps).astype(np.float32)
    # -inf on masked cells by adding 0 or -inf in place: masked_fill's broadcast over [c, Tq, Tk] is 20x slower
    blocked = torch.from_numpy(np.where(masked, -math.inf, 0.0).astype(np.float32)) if masked.any() else None
    chunk = max(1, chunk_bytes // (4 * masked.size))  # maps per chunk
    parts = []
    with torch.inference_mode():
        for start in range(0, len(maps), chunk):
            part = torch.from_numpy(np.array(maps[start : start + chunk], dtype=np.float32))  # [c, Tq, Tk], a copy
            part = (part if blocked is None else part.add_(blocked)).unsqueeze(1)  # [c, 1, Tq, Tk]
            pooled = F.max_pool2d(part, factor, factor, ceil_mode=True).squeeze(1)  # [c, Tq', Tk']
            parts.append(pooled.masked_fill(pooled == -math.inf, math.nan).numpy())
    return np.concatenate(parts) if parts else np.zeros((0, -(-maps.shape[1] // factor), -(-maps.shape[2] // factor)))


def board(*rows: list[dict]) -> dict:
    """What the component draws: each list of panels in a row of its own, which wraps when the page is narrow."""
    starts = np.cumsum([0, *(len(row) for row in rows)])[:-1]
    return {"panels": [panel for row in rows for panel in row], "breaks": [int(i) for i in starts[1:]]}


def noted_board(panels: list[dict], note: str | None) -> dict:
    """The board of `panels` in one row, the first one's subtitle ending in `note` (what one colour scale shared by
    every panel shows: stretched, or pale)."""
    if note:
        panels[0]["subtitle"] = noted(panels[0]["subtitle"], note)
    return board(panels)
