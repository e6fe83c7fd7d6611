"""views/matrix_view.packed: a board goes to the browser as bytes, each picture and array whole, nothing else lost."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from pictures.attention_panels import WEIGHTS
from pictures.boards import board, matrix_panel, sheet_panel
from tests.drawn import board_as_sent, panel_matrix, sheet_maps
from views.matrix_view import packed, unpacked


def a_board() -> dict:
    """A matrix with a mask and two extra hover rows, and a sheet of three maps: every kind of bytes field."""
    rng = np.random.default_rng(4)
    values = rng.random((5, 6)).astype(np.float32)
    allowed = rng.random((5, 6)) > 0.3
    matrix = matrix_panel(
        values, allowed, WEIGHTS, name="m", x_labels=[f"k{i}" for i in range(6)],
        y_labels=[f"q{i}" for i in range(5)], x_title="key", y_title="query", value_title="weight", title="t",
        extra={"A": values * 2, "rank": (values * 3, 0)},
    )  # fmt: skip
    maps = rng.random((3, 4, 4)).astype(np.float32)
    titles = ["a", "b", "c"]
    sheet = sheet_panel(maps, None, WEIGHTS, name="s", titles=titles, columns=2, max_px=40, hovers=titles)
    return board([matrix], [sheet])


def test_a_packed_board_unpacks_to_the_same_board():
    original = a_board()
    assert unpacked(packed(original)) == original
    assert board_as_sent(packed(original)) == original  # the tests' own reader agrees


def test_the_bytes_hold_each_blob_raw_and_the_json_none_of_them():
    original = a_board()
    data = packed(original)
    length = int.from_bytes(data[:4], "little")
    header = json.loads(data[4 : 4 + length])
    matrix = original["panels"][0]
    spans = [header["blobs"][header["panels"][0][name]["blob"]] for name in ("png", "values", "masked")]
    for (offset, size), name in zip(spans, ("png", "values", "masked"), strict=True):
        assert data[4 + length + offset : 4 + length + offset + size] == matrix[name]
    assert len(matrix["values"]) == 5 * 6 * 4 and len(matrix["masked"]) == 5 * 6  # float32 and one byte a cell
    fields = [matrix["png"], matrix["values"], matrix["masked"], original["panels"][1]["png"]]
    fields += [more["values"] for more in matrix["extra"]]
    assert len(data) == 4 + length + sum(map(len, fields))  # each once, nothing more
    assert b"PNG" not in data[4 : 4 + length]  # no picture left inside the JSON


def test_what_a_panel_draws_survives_the_packing():
    original = a_board()
    sent = board_as_sent(packed(original))
    before, after = panel_matrix(original["panels"][0]), panel_matrix(sent["panels"][0])
    np.testing.assert_array_equal(after.values, before.values)
    np.testing.assert_array_equal(after.masked, before.masked)
    np.testing.assert_array_equal(after.image, before.image)
    for title, picture in sheet_maps(original["panels"][1]).items():
        np.testing.assert_array_equal(sheet_maps(sent["panels"][1])[title], picture)


def test_a_picture_that_is_not_a_png_is_refused():
    broken = a_board()
    broken["panels"][0]["png"] = b"\xff\xd8\xff\xe0 a JPEG"
    with pytest.raises(ValueError, match="PNG"):
        packed(broken)


def test_a_field_left_as_text_is_refused():
    broken = a_board()
    broken["panels"][0]["values"] = base64.b64encode(broken["panels"][0]["values"]).decode("ascii")
    with pytest.raises(TypeError, match="bytes"):
        packed(broken)
