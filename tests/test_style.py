"""pictures.style: colour ramps interpolate linearly in RGB, PNGs hold one pixel per cell, charts stay quiet."""

from __future__ import annotations

import numpy as np

from pictures.style import MASKED_COLOUR, Ramp, chart, png_uri, ticks
from tests.drawn import _decode_png


def test_ramp_hits_each_stop_and_interpolates_linearly_between():
    ramp = Ramp(("#000000", "#ff8000", "#ffffff"), 0.0, 2.0)
    assert ramp.stops == [0.0, 1.0, 2.0]
    got = ramp.rgb(np.array([0.0, 1.0, 2.0, 0.5, 1.5]))
    assert got.tolist() == [[0, 0, 0], [255, 128, 0], [255, 255, 255], [128, 64, 0], [255, 192, 128]]
    assert ramp.rgb(np.array([-5.0, 9.0])).tolist() == [[0, 0, 0], [255, 255, 255]]  # clamped, like the scale
    assert ramp.rgb(np.array([np.nan]))[0].tolist() == [0x9A, 0x9A, 0x9A] and MASKED_COLOUR == "#9a9a9a"


def test_png_uri_holds_one_pixel_per_cell():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10  # [2, 3, 3]
    np.testing.assert_array_equal(_decode_png(png_uri(rgb)), rgb)


def test_ticks_label_every_cell_while_they_fit():
    assert ticks(5) == [0.5, 1.5, 2.5, 3.5, 4.5]
    thinned = ticks(300, most=45)
    assert len(thinned) <= 45 and thinned[0] == 0.5 and thinned[1] - thinned[0] == 7


def test_chart_keeps_its_own_size_and_draws_on_canvas():
    spec = chart({"mark": "rect"})
    assert spec["autosize"]["type"] == "pad"  # Streamlit's default "fit" would squeeze axes into the plot size
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"


def test_only_marks_with_their_own_tooltip_answer_hover():
    spec = chart({"layer": [
        {"mark": "line", "encoding": {"x": {"field": "x"}}},  # would show its first point's row on hover
        {"mark": {"type": "point"}, "encoding": {"x": {"field": "x"}, "tooltip": [{"field": "x"}]}},
    ]})  # fmt: skip
    line, points = spec["layer"]
    assert line["mark"] == {"type": "line", "tooltip": None}
    assert "tooltip" not in points["mark"] and points["encoding"]["tooltip"] == [{"field": "x"}]
