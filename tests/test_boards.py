"""What a matrix-view panel carries to the browser: values, mask, colours and labels as the matrix has them."""

from __future__ import annotations

import numpy as np
import pytest

from pictures.attention_panels import WEIGHTS
from pictures.boards import (
    board,
    decode_floats,
    encode_floats,
    fewer_legend_ticks,
    legend_ticks,
    matrix_panel,
    pooled_maps,
    sheet_panel,
)
from pictures.style import MASKED_COLOUR
from tests.drawn import panel_matrix, rgb, sheet_maps

GREY = rgb(MASKED_COLOUR)


def panel(values, allowed=None, **more):
    tq, tk = values.shape
    return matrix_panel(
        values, allowed, WEIGHTS, name="m", x_labels=[f"k{i}" for i in range(tk)],
        y_labels=[f"q{i}" for i in range(tq)], x_title="key", y_title="query", value_title="weight", title="t",
        **more,
    )  # fmt: skip


def test_floats_survive_the_trip_exactly():
    values = np.random.default_rng(0).random((5, 7)).astype(np.float32)
    np.testing.assert_array_equal(decode_floats(encode_floats(values), (5, 7)), values)


def test_panel_carries_values_mask_and_the_ramp_colours():
    rng = np.random.default_rng(1)
    values = rng.random((4, 6)).astype(np.float32)
    allowed = rng.random((4, 6)) > 0.3
    drawn = panel_matrix(panel(values, allowed))
    np.testing.assert_array_equal(drawn.masked, ~allowed)
    np.testing.assert_array_equal(drawn.values[allowed], values[allowed])
    assert np.isnan(drawn.values[~allowed]).all()
    np.testing.assert_array_equal(drawn.image[allowed], WEIGHTS.rgb(values[allowed]))  # one pixel per cell
    assert (drawn.image[~allowed] == GREY).all()
    assert drawn.x_labels == [f"k{i}" for i in range(6)] and drawn.y_labels == [f"q{i}" for i in range(4)]


def test_labels_must_match_the_matrix():
    with pytest.raises(ValueError, match="labels"):
        matrix_panel(np.zeros((2, 3)), None, WEIGHTS, name="m", x_labels=["a", "b"], y_labels=["c", "d"],
                     x_title="key", y_title="query", value_title="w", title="t")  # fmt: skip


def test_a_panel_frames_one_cell_or_one_top_left_block_in_red():
    values = np.zeros((4, 6))
    assert panel(values)["frame"] is None
    assert panel(values, outline=(2, 5))["frame"] == [2, 5, 1, 1]  # first row, first column, rows, columns
    assert panel(values, frame=(3, 4))["frame"] == [0, 0, 3, 4]
    with pytest.raises(ValueError, match="not both"):
        panel(values, outline=(0, 0), frame=(1, 1))


def test_big_maps_keep_hover_and_drop_cell_text():
    small, big = panel(np.zeros((16, 16))), panel(np.zeros((300, 400)))
    assert small["text_digits"] == 2 and big["text_digits"] is None
    assert big["cell_px"] >= 1.0  # every cell stays reachable by the pointer
    assert big["x_ticks"][0] == 0 and len(big["x_ticks"]) < 400  # only every n-th token is labelled


def test_a_sheet_cuts_each_map_from_one_picture_row_by_row():
    maps = np.random.default_rng(2).random((5, 3, 4)).astype(np.float32)  # five 3 x 4 maps, two to a row
    allowed = np.ones((3, 4), dtype=bool)
    allowed[0, 3] = False
    titles = [f"m{i}" for i in range(5)]
    sheet = sheet_panel(maps, allowed, WEIGHTS, name="s", titles=titles, columns=2, max_px=40, hovers=titles,
                        picks=[{"i": i} for i in range(5)], picked=3)  # fmt: skip
    picture = sheet_maps(sheet)
    assert list(picture) == titles and sheet["picked"] == 3 and sheet["picks"][4] == {"i": 4}
    for i, title in enumerate(titles):
        shown = np.where(allowed, maps[i], np.nan)
        np.testing.assert_array_equal(picture[title], WEIGHTS.rgb(shown))
    whole = sheet_maps({**sheet, "titles": [*titles, "gap"]})["gap"]  # the sixth place, on the last row, is blank
    assert (whole == 255).all()
    assert sheet["cell_px"] * 4 == 40 and "values" not in sheet  # no cell hover: the values stay home
    with pytest.raises(ValueError, match="4 titles"):
        sheet_panel(maps, None, WEIGHTS, name="s", titles=titles[:4], columns=2, max_px=40, hovers=titles[:4])


@pytest.mark.parametrize("max_px", [40, 2])  # every cell its own pixel; 2 x 2 cells pooled into one
def test_a_sheets_whole_maps_draw_the_cells_the_mask_greys_in_the_others(max_px):
    maps = np.random.default_rng(3).random((3, 4, 4)).astype(np.float32)  # [3, 4, 4]
    allowed = np.tril(np.ones((4, 4), dtype=bool))  # causal
    titles = ["kept", "mean", "kept too"]
    sheet = sheet_panel(maps, allowed, WEIGHTS, name="s", titles=titles, columns=3, max_px=max_px, hovers=titles,
                        whole=[1])  # fmt: skip
    picture = sheet_maps(sheet)
    factor = 4 // sheet["rows"]
    pooled = maps[1].reshape(4 // factor, factor, 4 // factor, factor).max(axis=(1, 3))  # [4 / f, 4 / f]
    np.testing.assert_array_equal(picture["mean"], WEIGHTS.rgb(pooled))
    grey = np.array(rgb(MASKED_COLOUR))
    assert (picture["kept"][0, -1] == grey).all() and (picture["kept too"][0, -1] == grey).all()


def test_extra_rows_carry_their_own_values():
    a, b = np.full((2, 2), 0.75, np.float32), np.full((2, 2), 0.25, np.float32)
    extra = panel(a - b, extra={"A": a, "B": b})["extra"]
    assert [e["title"] for e in extra] == ["A", "B"]
    np.testing.assert_array_equal(decode_floats(extra[1]["values"], (2, 2)), b)
    assert [e["digits"] for e in extra] == [4, 4]  # the panel's value_digits unless a row brings its own
    ranked = panel(a - b, extra={"A": a, "rank": (b, 0)})["extra"]
    assert [e["digits"] for e in ranked] == [4, 0]
    np.testing.assert_array_equal(decode_floats(ranked[1]["values"], (2, 2)), b)


def test_narrow_maps_label_only_tokens_that_fit_apart_and_drop_cramped_text():
    narrow = panel(np.zeros((64, 64)), max_px=120, tick_px=18)  # under 2 px a cell
    gaps = np.diff(narrow["x_ticks"]) * narrow["cell_px"]
    assert len(narrow["x_ticks"]) >= 2 and (gaps >= 18).all() and narrow["y_ticks"] == narrow["x_ticks"]
    small = np.zeros((4, 4))
    assert panel(small, max_px=80, text_px=22)["text_digits"] is None  # 20 px cells: too narrow for "0.25"
    assert panel(small, max_px=120, text_px=22)["text_digits"] == 2
    # Without a text_px of its own a panel still writes no number its cells cannot hold: the Positional page's
    # 13-token reordering maps, 190 px a side (14.6 px a cell), wrote "0.27" over its neighbours
    assert panel(np.zeros((13, 13)), max_px=190)["text_digits"] is None
    assert panel(np.zeros((13, 13)), max_px=13 * 30)["text_digits"] == 2


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.0, 1.0, [0.2, 0.4, 0.6, 0.8]),  # attention weights
        (-0.0871, 0.0871, [-0.05, 0.0, 0.05]),  # an A - B map: zero is marked
        (0.0, 0.0012, [0.0005, 0.001]),
        (0.0, 360.0, [100.0, 200.0, 300.0]),  # rotary angles
        (0.5, 0.6, [0.52, 0.54, 0.56, 0.58]),
        (0.0, 0.0, []),  # nothing between equal ends
        (0.3805, 0.3814, []),  # every mark would read 0.381, as the ends do
    ],
)
def test_legend_marks_round_values_between_its_ends(low, high, expected):
    assert legend_ticks(low, high) == pytest.approx(expected, abs=1e-12)
    assert all(low < t < high for t in legend_ticks(low, high))


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.0, 1.0, [[0.5]]),  # a short bar's "1, 0.5, 0", not "1, 0.6, 0.4, 0"
        (-0.0871, 0.0871, [[0.0]]),
        (0.0, 360.0, [[200.0]]),
        (0.5, 0.6, [[0.55]]),
        (0.3805, 0.3814, []),  # no marks at all: none fewer
    ],
)
def test_a_short_legend_falls_back_to_fewer_round_values(low, high, expected):
    assert fewer_legend_ticks(low, high) == [pytest.approx(ticks, abs=1e-12) for ticks in expected]


def test_a_panel_legend_carries_its_marks():
    legend = panel(np.full((2, 2), 0.5, np.float32))["legend"]
    assert (legend["low"], legend["high"], legend["ticks"]) == (0.0, 1.0, legend_ticks(0.0, 1.0))
    assert legend["fewer_ticks"] == fewer_legend_ticks(0.0, 1.0)


def test_each_row_of_a_board_starts_on_a_new_line():
    one, two, three = ({"name": n} for n in "abc")
    assert board([one]) == {"panels": [one], "breaks": []}
    assert board([one, two], [three]) == {"panels": [one, two, three], "breaks": [2]}
    assert board([one], [two], [three])["breaks"] == [1, 2]


def test_pooled_maps_keep_each_blocks_largest_allowed_value_and_grey_only_fully_masked_blocks():
    rng = np.random.default_rng(0)
    maps = rng.random((5, 7, 8), dtype=np.float32)  # [n, Tq, Tk]: neither side a multiple of 3
    masked = np.triu(np.ones((7, 8), dtype=bool), k=1)  # causal-like: key > query masked
    pooled = pooled_maps(maps, masked, 3)
    assert pooled.shape == (5, 3, 3)
    for i in range(5):
        for r in range(3):
            for c in range(3):
                block = maps[i, 3 * r : 3 * r + 3, 3 * c : 3 * c + 3]
                allowed = ~masked[3 * r : 3 * r + 3, 3 * c : 3 * c + 3]
                if allowed.any():
                    assert pooled[i, r, c] == block[allowed].max()
                else:
                    assert np.isnan(pooled[i, r, c])
    np.testing.assert_array_equal(pooled_maps(maps, masked, 1), np.where(masked, np.nan, maps))


@pytest.mark.parametrize("masked", [False, True])
def test_pooled_maps_are_the_same_in_chunks_of_any_size_and_leave_the_maps_as_they_were(masked):
    maps = np.random.default_rng(2).random((6, 9, 9), dtype=np.float32)  # [n, Tq, Tk]
    before = maps.copy()
    mask = np.triu(np.ones((9, 9), dtype=bool), k=1) & masked  # [Tq, Tk]
    whole = pooled_maps(maps, mask, 2)  # one chunk: six maps of 324 bytes are far under the default chunk
    for maps_per_chunk in (1, 4):  # chunks of one map, and a last chunk shorter than the others
        np.testing.assert_array_equal(pooled_maps(maps, mask, 2, chunk_bytes=maps_per_chunk * 4 * 81), whole)
    np.testing.assert_array_equal(maps, before)  # -inf was added to a copy, not to the caller's maps


def test_a_sheet_of_maps_larger_than_their_drawn_size_is_sent_pooled():
    maps = np.random.default_rng(1).random((4, 100, 100), dtype=np.float32)
    sheet = sheet_panel(maps, None, WEIGHTS, name="g", titles=list("abcd"), columns=2, max_px=40, hovers=list("abcd"))
    assert (sheet["rows"], sheet["cols"]) == (34, 34)  # 100 cells on 40 px: blocks of 3, the last one partial
    assert sheet["cell_px"] * sheet["cols"] <= 40
    np.testing.assert_array_equal(
        sheet_maps(sheet)["c"], WEIGHTS.rgb(pooled_maps(maps[2:3], np.zeros((100, 100), bool), 3)[0])
    )
    assert "100 × 100 cells drawn on 34 × 34 pixels" in sheet["subtitle"]
