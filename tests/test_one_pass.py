"""pictures/one_pass.py against Plotly's own make_subplots and update_layout, which it stands in for."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from pictures.one_pass import axis_name, merged, panel_axes, subplot_grid
from pictures.style import PANEL_TITLE_FONT


@pytest.mark.parametrize(
    ("rows", "cols", "options"),
    [(2, 2, {"shared_xaxes": True, "vertical_spacing": 0.12}), (1, 3, {"horizontal_spacing": 0.08}), (3, 1, {})],
)
def test_the_grid_is_the_one_make_subplots_lays_out(rows, cols, options):
    titles = [f"panel {n}" for n in range(rows * cols)]
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=titles, **options)
    made = figure.update_annotations(font=PANEL_TITLE_FONT).layout.to_plotly_json()  # as every grid here titles them
    made.pop("template")
    assert subplot_grid(rows, cols, titles, **options) == made


def test_each_grid_is_a_new_copy_a_figure_may_change():
    first = subplot_grid(2, 2, ["a", "b", "c", "d"], shared_xaxes=True)
    first["xaxis"]["title"] = {"text": "changed"}
    first["annotations"][0]["font"]["size"] = 40
    again = subplot_grid(2, 2, ["a", "b", "c", "d"], shared_xaxes=True)
    assert "title" not in again["xaxis"] and again["annotations"][0]["font"]["size"] != 40


def test_a_panels_axes_are_those_add_trace_gives_it():
    figure = make_subplots(rows=2, cols=3)
    for row in (1, 2):
        for col in (1, 2, 3):
            figure.add_trace(go.Scatter(x=[0], y=[0]), row=row, col=col)
            trace = figure.data[-1]
            assert {"xaxis": trace.xaxis, "yaxis": trace.yaxis} == panel_axes(row, col, 3)
            assert axis_name(trace.xaxis) in figure.layout and axis_name(trace.yaxis) in figure.layout


def test_merged_writes_over_nested_settings_as_update_layout_does():
    base = {"legend": {"font": {"size": 13}}, "margin": {"t": 40, "b": 56}}
    extra = {"legend": {"title": {"text": "point"}}, "margin": {"b": 80}, "shapes": [{"type": "rect"}], "height": 300}
    figure = go.Figure(layout=base)
    figure.update_layout(extra)
    assert go.Figure(layout=merged(base, extra)).layout == figure.layout
    assert base["margin"] == {"t": 40, "b": 56} and base["legend"] == {"font": {"size": 13}}  # neither is changed
