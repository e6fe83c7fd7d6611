"""Matrix-view boards of the activations page's tables by layer: the per-head grids (entropy, mean distance,
sparsity) and the gradient norm of each weight matrix and bias, whose hover also gives the norm itself (act_grad).
Tables in, panels and boards out (pictures/boards.py; no Streamlit here)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pictures.activation_charts import LINE_WIDTH
from pictures.boards import board, matrix_panel
from pictures.style import MASKED_OFF_VIRIDIS, MAX_CELL_PX, TICK_PX, VIRIDIS, Ramp, layer_head_axes

CIVIDIS = ("#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8678", "#a59c74", "#c3b369", "#e1cc55",
           "#fee838")  # fmt: skip
MAX_TEXT_HEADS = 6  # a per-head grid (a third of the page wide) writes its values up to this many heads
HEAD_GRID_PX = 150  # px across a per-head grid at most: three fit in a row
HEAD_GRID_TALL_PX = 300  # px down at most: a deep model's cells stay big enough to read (SmolLM2's 30 layers: 10 px)


def head_grid_panel(
    grid: np.ndarray,
    title: str,
    subtitle: str,
    colour_title: str,
    zmin: float,
    zmax: float,
    colours: tuple[str, ...] = VIRIDIS,
    name: str = "heads",
) -> dict:
    """A [layer, head] grid of one per-head statistic as a matrix-view panel, the value written in each cell (up to
    MAX_TEXT_HEADS heads); a head with no value (no query had an allowed key) is white, off these ramps (a grey is
    one of cividis's colours, and one of VIRIDIS's to a colour-blind eye: MASKED_OFF_VIRIDIS). Square cells, the
    grid at most HEAD_GRID_PX wide and HEAD_GRID_TALL_PX high; a label on every layer and head while they are
    TICK_PX apart, on every n-th beyond."""
    n_layers, n_heads = grid.shape
    cell = min(MAX_CELL_PX, HEAD_GRID_PX / max(n_heads, 1), HEAD_GRID_TALL_PX / max(n_layers, 1))
    finite = np.isfinite(grid)  # [L, H]
    return matrix_panel(
        np.where(finite, grid, 0.0).astype(np.float32),
        None if finite.all() else finite,
        Ramp(colours, zmin, zmax if zmax > zmin else zmin + 1.0, MASKED_OFF_VIRIDIS),
        name=name,
        **layer_head_axes(n_layers, n_heads),
        value_title=colour_title,
        title=title,
        subtitle=subtitle,
        text_digits=2 if n_heads <= MAX_TEXT_HEADS and n_layers <= 16 else None,
        masked_text="no value: no query had an allowed key",
        plot_px=(cell * n_heads, cell * n_layers),
        tick_px=TICK_PX,
    )


# px a block's column takes, at most LINE_WIDTH in all: SmolLM2's 30 blocks at 21 px made the board (with its names and
# legend) 870 px wide, which a 1024 px window drew at 0.6, its 11 px names at 7 px; at 14 px it is about 650 px
GRADIENT_BLOCK_PX = 14


def gradient_heatmap(norms: pd.DataFrame, stack: str) -> dict:
    """[parameter, block] gradient norm of each weight matrix and bias of one stack as a matrix-view board, coloured
    by the norm's log10 so that small and large norms both show (a zero gradient, which has no logarithm, is white,
    MASKED_OFF_VIRIDIS); hover gives the norm itself."""
    part = norms[(norms["stack"] == stack) & norms["layer"].notna()]
    table = part.pivot_table(index="parameter", columns="layer", values="norm", sort=False)  # [parameters, L]
    values = table.to_numpy(dtype=np.float64)  # [parameters, L]
    positive = values > 0
    logs = np.log10(np.where(positive, values, 1.0))  # [parameters, L]
    finite = logs[positive]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    decades = [float(k) for k in range(math.ceil(low), math.floor(high) + 1) if low < k < high]
    n_params, n_blocks = values.shape
    panel = matrix_panel(
        logs.astype(np.float32),
        positive,
        Ramp(VIRIDIS, low, high if high > low else low + 1.0, MASKED_OFF_VIRIDIS),
        name="act_grad",
        x_labels=[str(int(c)) for c in table.columns],
        y_labels=list(table.index),
        x_title="block",
        y_title="parameter",
        value_title="log₁₀ norm",
        value_digits=2,
        extra={"gradient norm": (values.astype(np.float32), None)},
        title=f"Gradient norm of each weight matrix and bias ({stack} stack)",
        subtitle="colour: log₁₀ of the norm (-2 is 0.01), so that small and large norms both show",
        text_digits=None,
        masked_text="no gradient reaches it (norm 0)",
        plot_px=(min(LINE_WIDTH, max(240, GRADIENT_BLOCK_PX * n_blocks)), 24 * n_params),
        label_chars=40,  # e.g. multihead_attn.out_proj.weight, whole
        legend_marks=decades if 0 < len(decades) <= 6 else None,
    )
    return board([panel])
