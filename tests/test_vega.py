"""explorer.vega: colour ramps match Vega's linear RGB interpolation, images hold the cells, specs compose."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer.vega import (
    BLUES,
    MASKED_COLOUR,
    MAX_CELLS,
    Ramp,
    chart,
    concat,
    matrix_spec,
    matrix_table,
    png_uri,
    ticks,
)
from tests.drawn import _decode_png, matrices


def test_ramp_hits_each_stop_and_interpolates_linearly_between():
    ramp = Ramp(("#000000", "#ff8000", "#ffffff"), 0.0, 2.0)
    assert ramp.stops == [0.0, 1.0, 2.0]
    got = ramp.rgb(np.array([0.0, 1.0, 2.0, 0.5, 1.5]))
    assert got.tolist() == [[0, 0, 0], [255, 128, 0], [255, 255, 255], [128, 64, 0], [255, 192, 128]]
    assert ramp.rgb(np.array([-5.0, 9.0])).tolist() == [[0, 0, 0], [255, 255, 255]]  # clamped, like the scale
    assert ramp.rgb(np.array([np.nan]))[0].tolist() == [0x9A, 0x9A, 0x9A] and MASKED_COLOUR == "#9a9a9a"
    scale = ramp.scale()
    assert scale == {
        "type": "linear",
        "domain": [0.0, 1.0, 2.0],
        "range": ["#000000", "#ff8000", "#ffffff"],
        "interpolate": "rgb",
        "clamp": True,
    }


@pytest.mark.parametrize(
    ("dark", "white_at"),
    [("high", (False, False, True)), ("low", (True, False, False)), ("ends", (True, False, True))],
)
def test_dark_end_gets_white_text(dark, white_at):
    test = Ramp(BLUES, -1.0, 1.0, dark=dark).dark_test()  # a Vega expression that is Python too
    assert tuple(eval(test.replace("datum.value", str(v))) for v in (-0.95, 0.0, 0.95)) == white_at  # noqa: S307


def test_png_uri_scales_by_a_whole_factor_and_keeps_every_cell():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10  # [2, 3, 3]
    image = _decode_png(png_uri(rgb, min_side=10))
    assert image.shape == (8, 12, 3)  # factor 4: the longer side 3 -> 12 >= 10
    np.testing.assert_array_equal(image[::4, ::4], rgb)
    np.testing.assert_array_equal(image[3::4, 3::4], rgb)  # nearest neighbour: no blending at cell edges
    assert _decode_png(png_uri(rgb, min_side=1)).shape == (2, 3, 3)


def test_ticks_label_every_cell_while_they_fit():
    assert ticks(5) == [0.5, 1.5, 2.5, 3.5, 4.5]
    thinned = ticks(300, most=45)
    assert len(thinned) <= 45 and thinned[0] == 0.5 and thinned[1] - thinned[0] == 7


def test_matrix_table_has_one_row_per_cell():
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    allowed = np.array([[True, False, True], [True, True, False]])
    table = matrix_table(values, allowed)
    assert table[["q", "k"]].values.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert table["value"].tolist() == [0, 1, 2, 3, 4, 5] and table["value"].dtype == np.float32
    assert table["masked"].tolist() == [False, True, False, False, False, True]


def small_spec(name: str, values: np.ndarray, **kw) -> dict:
    tq, tk = values.shape
    return matrix_spec(
        values,
        None,
        Ramp(BLUES, 0.0, 1.0),
        name=name,
        x_labels=[f"k{i}" for i in range(tk)],
        y_labels=[f"q{i}" for i in range(tq)],
        x_title="key",
        y_title="query",
        value_title="weight",
        title=f"map {name}",
        **kw,
    )


def test_matrices_switch_to_an_image_above_max_cells():
    side = int(np.sqrt(MAX_CELLS))
    rng = np.random.default_rng(0)
    at_limit = small_spec("a", rng.random((side, side)))
    above = small_spec("b", rng.random((side + 1, side + 1)))
    assert at_limit["layer"][0]["mark"]["type"] == "rect" and len(at_limit["datasets"]["a_cells"]) == side * side
    assert above["layer"][0]["mark"]["type"] == "image" and "datasets" not in above
    assert above["layer"][1]["encoding"]["color"]["legend"]["title"] == "weight"  # the legend stays


def test_concat_hoists_params_and_datasets_and_shares_the_colour_scale():
    left = small_spec("a", np.full((2, 2), 0.25))
    right = small_spec("b", np.full((3, 2), 0.75))
    spec = concat([left, right])
    assert [p["name"] for p in spec["params"]] == ["a_keys", "a_queries", "b_keys", "b_queries"]
    assert set(spec["datasets"]) == {"a_cells", "b_cells"}
    assert all("params" not in v and "datasets" not in v for v in spec["hconcat"])
    assert spec["resolve"] == {"scale": {"color": "shared"}}
    drawn = matrices(spec)
    assert set(drawn) == {"a", "b"} and drawn["b"].values.shape == (3, 2) and (drawn["b"].values == 0.75).all()
    assert drawn["b"].y_labels == ["q0", "q1", "q2"]
    json.dumps({k: v for k, v in spec.items() if k != "datasets"})  # everything else is plain JSON


def test_chart_keeps_its_own_size_and_draws_on_canvas():
    spec = chart({"mark": "rect"})
    assert spec["autosize"]["type"] == "pad"  # Streamlit's default "fit" would squeeze axes into the plot size
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"


def test_only_marks_with_their_own_tooltip_answer_hover():
    rng = np.random.default_rng(0)
    big = chart(small_spec("b", rng.random((200, 200))))  # an image and an invisible legend layer
    assert [layer["mark"].get("tooltip", "unset") for layer in big["layer"]] == [None, None]  # never the PNG
    small = chart(small_spec("a", rng.random((3, 3))))  # cells and their numbers both show the cell
    assert [layer["mark"].get("tooltip", "unset") for layer in small["layer"]] == ["unset", "unset"]
    assert all("tooltip" in layer["encoding"] for layer in small["layer"])


def test_cell_numbers_share_the_cells_axes():
    spec = small_spec("a", np.full((7, 6), 0.5))
    cells, numbers = spec["layer"]
    for channel in ("x", "y"):
        assert numbers["encoding"][channel]["axis"] == cells["encoding"][channel]["axis"]
        assert numbers["encoding"][channel]["scale"] == cells["encoding"][channel]["scale"]
    assert cells["encoding"]["x"]["axis"]["values"] == [i + 0.5 for i in range(6)]  # every key labelled
