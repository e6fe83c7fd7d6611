"""pictures.style: colour ramps interpolate linearly in RGB, PNGs hold one pixel per cell, Plotly layouts keep text
as typed and make room for their titles."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from pictures import style
from pictures.style import (
    MASKED_COLOUR,
    PNG_SIGNATURE,
    SUBTITLE_CHARS,
    Ramp,
    axis,
    figure_layout,
    label_text,
    plotly_scale,
    png_bytes,
    subtitle_lines,
    ticks,
)
from tests.drawn import _decode_png


def test_ramp_hits_each_stop_and_interpolates_linearly_between():
    ramp = Ramp(("#000000", "#ff8000", "#ffffff"), 0.0, 2.0)
    assert ramp.stops == [0.0, 1.0, 2.0]
    got = ramp.rgb(np.array([0.0, 1.0, 2.0, 0.5, 1.5]))
    assert got.tolist() == [[0, 0, 0], [255, 128, 0], [255, 255, 255], [128, 64, 0], [255, 192, 128]]
    assert ramp.rgb(np.array([-5.0, 9.0])).tolist() == [[0, 0, 0], [255, 255, 255]]  # clamped, like the scale
    assert ramp.rgb(np.array([np.nan]))[0].tolist() == [0x9A, 0x9A, 0x9A] and MASKED_COLOUR == "#9a9a9a"


@pytest.mark.parametrize("chunk", [7, style.RGB_CHUNK])
def test_ramp_colours_every_chunk_as_the_whole_array(monkeypatch, chunk):
    """Ramp.rgb works in chunks: each value, masked or not, on either side of a chunk's edge, gets the colour a
    linear interpolation over the whole array gives it, and the shape comes back [..., 3]."""
    monkeypatch.setattr(style, "RGB_CHUNK", chunk)
    ramp = Ramp(("#000000", "#ff8000", "#3366ff", "#ffffff"), -1.0, 2.0)
    values = np.random.default_rng(0).uniform(-1.5, 2.5, size=(3, 5, 7001)).astype(np.float32)  # clamped at both ends
    values.reshape(-1)[::chunk] = np.nan  # the first value of every chunk is masked
    whole = values.astype(np.float64)
    expected = np.stack(
        [np.interp(np.nan_to_num(whole, nan=-1.0), ramp.stops, [c[i] for c in ((0, 0, 0), (255, 128, 0),
         (51, 102, 255), (255, 255, 255))]) for i in range(3)],
        axis=-1,
    )  # fmt: skip
    expected = np.rint(expected).astype(np.uint8)
    expected[np.isnan(whole)] = (0x9A, 0x9A, 0x9A)
    got = ramp.rgb(values)
    assert got.shape == (3, 5, 7001, 3) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, expected)


def test_png_bytes_hold_one_pixel_per_cell():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10  # [2, 3, 3]
    np.testing.assert_array_equal(_decode_png(png_bytes(rgb)), rgb)


@pytest.mark.parametrize("shape", [(1, 1, 3), (257, 131, 3), (3, 600, 3)])
def test_png_bytes_are_a_png_pillow_reads_back_exactly(shape):
    """png_bytes writes the PNG itself: Pillow, another encoder's reader, finds a valid 8-bit RGB PNG with every
    pixel of a random picture (odd sizes: each row's filter byte must sit in the right place)."""
    rgb = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    png = png_bytes(rgb)
    assert png.startswith(PNG_SIGNATURE)
    image = Image.open(io.BytesIO(png))
    image.verify()  # checks every chunk's CRC
    image = Image.open(io.BytesIO(png))
    assert image.mode == "RGB" and image.size == (shape[1], shape[0])
    np.testing.assert_array_equal(np.asarray(image), rgb)


@pytest.mark.parametrize(
    "bad", [np.zeros((0, 4, 3), np.uint8), np.zeros((2, 2, 4), np.uint8), np.zeros((2, 2, 3), np.float32)]
)
def test_png_bytes_refuse_what_is_not_a_picture(bad):
    with pytest.raises(ValueError, match="non-empty"):
        png_bytes(bad)


def test_ticks_label_every_cell_while_they_fit():
    assert ticks(5) == [0.5, 1.5, 2.5, 3.5, 4.5]
    thinned = ticks(300, most=45)
    assert len(thinned) <= 45 and thinned[0] == 0.5 and thinned[1] - thinned[0] == 7


def test_a_ramp_becomes_a_plotly_colour_scale_with_the_same_colours_evenly_spread():
    scale = plotly_scale(("#000000", "#808080", "#ffffff"))
    assert scale == [[0.0, "#000000"], [0.5, "#808080"], [1.0, "#ffffff"]]


def test_user_text_reaches_plotly_escaped_so_it_shows_as_typed():
    assert label_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert label_text(3) == "3"


def test_a_long_subtitle_is_wrapped_escaped_and_given_room_above_the_plot():
    short = figure_layout("Title", height=300)
    subtitle = " ".join(["word"] * 100) + " <i>"  # 505 characters: several lines
    long = figure_layout("A <b> title", subtitle, height=300, showlegend=False)
    lines = long["title"]["subtitle"]["text"].split("<br>")
    assert len(lines) > 1 and all(len(line) <= SUBTITLE_CHARS for line in lines)
    assert lines[-1].endswith("&lt;i&gt;") and long["title"]["text"] == "A &lt;b&gt; title"
    extra = long["height"] - short["height"]  # the plot keeps its 300 px; the title's lines come on top
    assert extra == long["margin"]["t"] - short["margin"]["t"] and extra >= 15 * len(lines)
    assert long["showlegend"] is False  # any other layout setting passes through


def test_an_axis_writes_numbers_without_e_notation_unless_told_otherwise():
    assert axis("loss")["tickformat"] == ".4~r" and axis("loss")["title"] == {"text": "loss"}
    assert axis(None, ".0%", range=[0, 1]) == axis(None, ".0%") | {"range": [0, 1]}


def test_a_subtitle_breaks_at_its_separators_so_no_line_starts_with_one():
    parts = ["pair i repeats every so many positions " * 2, "pairs above the dashed line do not complete a period"]
    lines = subtitle_lines(" · ".join(parts), most=100)
    assert lines == [parts[0].strip(), parts[1]]  # not "... positions · pairs" cut mid-way, then "above the ..."
    assert subtitle_lines("a · b · c", most=100) == ["a · b · c"]  # short enough: one line
    assert subtitle_lines("") == []
