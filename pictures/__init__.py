"""Pictures of the engine's numbers: Plotly figures for notebooks (and, in time, the app's charts)."""

from pictures.notebook_figures import (
    attention_figure,
    attention_grid_figure,
    depth_figure,
    difference_figure,
    gradient_figure,
    position_similarity_figure,
    positional_figure,
    training_figure,
)

__all__ = [
    "attention_figure",
    "attention_grid_figure",
    "depth_figure",
    "difference_figure",
    "gradient_figure",
    "position_similarity_figure",
    "positional_figure",
    "training_figure",
]
