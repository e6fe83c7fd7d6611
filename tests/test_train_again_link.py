"""A student's link made while a trained model was shown opens the random model with a note; the note's link to the
Train page must set it to train the teacher's weights again: the teacher's sidebar, the placement the teacher showed
and the Train page's settings, all read back from the link."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.test_app_train import APP, PAGE, assert_ok, open_train_page, train_on_page
from views.training_run import train_again_params


def test_the_students_note_links_to_the_train_page_set_to_train_the_teachers_model_again():
    """The teacher sets the sidebar's seed and heads, trains post and pre on sort at lr 0.01, warmup 0, batch 32,
    and shows the pre-norm model (the sidebar still says post). The student's note said "train it on the Train page
    with the same task, settings and seed" and left the student to set seven values by hand, the placement among them;
    its button now opens Train set to them, over settings the student had tried there, and training gives the
    teacher's weights."""
    teacher = AppTest.from_file(APP, default_timeout=180)
    teacher.query_params.update({"seed": "3", "n_heads": "2"})
    open_train_page(teacher)
    teacher.select_slider(key="train_lr").set_value(0.01)
    teacher.number_input(key="train_warmup").set_value(0)
    teacher.select_slider(key="train_batch").set_value(32)
    train_on_page(teacher, task="sort", length=6, steps=20, norms="post and pre")
    run_id = teacher.session_state["_train"].run_id
    teacher.radio(key=f"train_model_{run_id}").set_value("pre").run()
    teacher.button(key="train_use").click().run()
    teacher.switch_page("views/attention.py").run()
    assert_ok(teacher)
    shown = teacher.session_state["_train"].results["pre"].model
    link = {key: teacher.query_params.get(key) for key in teacher.query_params}

    student = AppTest.from_file(APP, default_timeout=180)
    student.query_params.update(link)
    open_train_page(student)  # the student tried Train first: the session now holds settings of its own
    student.select_slider(key="train_lr").set_value(0.0003).run()
    student.switch_page("views/attention.py").run()
    assert_ok(student)
    assert any("Trained weights do not travel" in w.value for w in student.warning)
    [box] = [box for box in student.sidebar.expander if box.label == "Share this view"]
    [shared] = [m.value for m in box.markdown]  # the student's own link says what the view was made with, as theirs
    assert parse_qs(urlsplit(shared.strip("`")).query)["trained"] == [link["trained"]], shared
    student.button(key="train_again").click().run()
    assert_ok(student)
    assert "trained" not in student.query_params
    assert [t.value for t in student.title] == ["Train"]
    assert student.session_state["norm"] == "pre" and student.session_state["train_lr"] == 0.01
    student.switch_page(PAGE)  # AppTest's own page follows the script's switch, as the browser's address bar does
    student.button(key="train_start").click().run()
    assert_ok(student)
    again = student.session_state["_train"].results
    assert list(again) == ["pre"], list(again)  # the placement shown, trained alone, from the same start
    for name, tensor in shown.state_dict().items():
        assert torch.equal(tensor, again["pre"].model.state_dict()[name]), name


@pytest.mark.parametrize(
    "label",
    [
        "reverse (length 8) · post-norm · loaded from files",  # no recipe: nothing says how it trained
        "sort (length 6) · post-norm · 20 steps",  # a link made before labels named lr, warmup and batch
        "sort (length 6) · post-norm · 3 steps at lr 0.003, warmup 20, batch 64",  # stopped before Train's least
        "sort (length 6) · mid-norm · 20 steps at lr 0.003, warmup 20, batch 64",  # no such placement
        "sort (length 6) · post-norm · 20 steps at lr 0.005, warmup 20, batch 64",  # not a rate the slider has
        "sort (length 99) · post-norm · 20 steps at lr 0.003, warmup 20, batch 64",  # longer than Train takes
    ],
)
def test_a_label_the_train_page_cannot_reproduce_gives_no_link(label):
    """A link whose label the Train page could not take would open it at other settings with a note about each:
    better no link than one that trains other weights."""
    assert train_again_params(label) is None
