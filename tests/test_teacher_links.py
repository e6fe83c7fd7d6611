"""A teacher's link reproduces what the teacher sees: what a page draws from the view in the URL on a student's first
run, and what the address bar and the downloads hold after the teacher's clicks."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.compare import CONFIGURATION
from explorer.compare_link import comparison_query
from tests.drawn import app_boards, app_matrices
from tests.test_app_pretrained import opened  # a student's first run of a link

pytestmark = pytest.mark.slow

SENTENCE = "The teacher explains why the cat sat down."


def roles_frame(at: AppTest) -> list[int] | None:
    """The red frame of the head-roles board: [layer, head, 1, 1], or None."""
    [panel] = app_boards(at)["roles"]["panels"]
    return panel.get("frame")


def test_a_link_to_a_head_frames_it_on_the_head_roles_board(minilm_model):
    # The teacher's board framed L2 H4, the head shown below it; a student's first run had no frame at all, since the
    # board is drawn above the selectors and read their state only.
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "layer": "2", "head": "4"})
    assert roles_frame(at) == [2, 4, 1, 1]
    average = {"model": "minilm-l6", "tokens": SENTENCE, "layer": "2", "head": "average of heads"}
    assert roles_frame(opened(average)) is None


def test_a_link_opens_the_boxes_of_compare_the_teacher_opened():
    # B's controls, the explanation of the gradient norms and the comparison's own link were open on the projector and
    # closed for every student: nothing put them in the address bar.
    at = opened({"b_box": "true", "grads_help": "true", "share_box": "true"}, "views/compare.py")
    open_boxes = {box.proto.query_param_key for box in at.expander if box.proto.expanded}
    assert {"b_box", "grads_help", "share_box"} <= open_boxes


def test_a_link_keeps_the_stack_picked_in_all_four_placements():
    # An encoder-decoder's four placements are drawn for one stack at a time; the decoder picked there opened as the
    # encoder from the address bar.
    query = {"arch": "encoder-decoder", "placements": "true", "placements_stack": "decoder"}
    assert opened(query, "views/compare.py").radio(key="placements_stack").value == "decoder"


def shared_comparison(at: AppTest) -> dict[str, str]:
    """The query of "Share this comparison"'s link, the box opened."""
    at.session_state["share_box"] = True
    at.run()
    [link] = [c.value for c in at.main.code if "tokens=" in c.value]
    return dict(parse_qsl(urlsplit(link).query))


def test_share_this_comparison_on_a_checkpoint_opens_that_checkpoint_and_its_b(minilm_model):
    # On MiniLM with B = "A with res-post-norm" and the maps on norms, the link held the configured model's fields
    # (n_layers=6&n_heads=12&d_model=384&...&b_norm=res-post) and no model=: a student got random weights of MiniLM's
    # shape, weights instead of norms.
    teacher = {"model": "minilm-l6", "tokens": SENTENCE, "b_model": "A with res-post-norm", "measure": "norms"}
    teacher |= {"layer": "2", "head": "3"}
    at = opened(teacher, "views/compare.py")
    shared = shared_comparison(at)
    assert shared == teacher
    student = opened(shared, "views/compare.py")
    assert student.radio(key="b_model").value == "A with res-post-norm"
    for name in ("A", "B"):
        np.testing.assert_array_equal(app_matrices(student)[name].values, app_matrices(at)[name].values)


def test_a_checkpoints_comparison_link_names_the_other_checkpoint(minilm_model, smollm_model):
    a, b = minilm_model.config, smollm_model.config
    assert comparison_query(a, b, "the cat", None, CONFIGURATION, "the cat") == {
        "model": "minilm-l6",
        "tokens": "the cat",
        "b_model": "smollm2-135m",
    }
    assert comparison_query(a, a.replace(norm="peri"), "the cat", None, CONFIGURATION, "the cat")["b_model"] == (
        "A with peri-norm"
    )


def test_reset_b_on_a_checkpoint_leaves_a_value_b_can_take_in_the_address_bar(minilm_model, smollm_model):
    # Reset B wrote the template itself, b_model=A with {norm}-norm, into the address bar.
    at = opened({"model": "minilm-l6", "tokens": "the cat", "b_model": "smollm2-135m"}, "views/compare.py")
    at.button(key="reset_b").click().run()
    assert at.radio(key="b_model").value == "A with pre-norm"
    assert at.query_params.get("b_model", ["A with pre-norm"]) == ["A with pre-norm"]


def test_share_this_view_says_what_its_link_holds_and_leaves_out():
    # It said "The model settings alone:" over a link that also holds the text and the removed heads, and named
    # nothing of what it leaves out.
    at = opened({"ablate": "L0H1", "layer": "1", "stretch": "true", "tokens": "a b c"})
    [box] = [box for box in at.sidebar.expander if box.label == "Share this view"]
    caption = box.caption[0].value
    assert all(word in caption for word in ("text", "removed heads", "layer and head", "colours", "Compare's B"))
    [link] = [m.value for m in box.markdown]
    assert "ablate=L0H1" in link and "tokens=a%20b%20c" in link and "layer=" not in link
