"""'Download this view (HTML)' gives the same bytes for the same view: Plotly named each figure's element with a random
id, so two downloads of one view, by one teacher or from two servers, never matched (found by the teacher-link
review, which compared a teacher's files with students')."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from pictures.html_export import view_html


def _figures() -> list[go.Figure]:
    return [go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.5, 0.5]])), go.Figure(go.Scatter(y=[1, 2, 3]))]


def test_the_same_view_gives_the_same_bytes():
    first = view_html("Attention", ["Link to this view: http://host/?layer=1"], _figures())
    assert first == view_html("Attention", ["Link to this view: http://host/?layer=1"], _figures())


def test_each_figure_keeps_an_element_of_its_own():
    page = view_html("Attention", [], _figures()).decode()
    ids = re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', page)
    assert len(ids) == 2 and len(set(ids)) == 2
    for element in ids:  # the script that draws each figure finds its element
        assert f'document.getElementById("{element}")' in page
