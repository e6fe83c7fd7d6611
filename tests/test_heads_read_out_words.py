"""What heads do names what a read-out guesses: a trained encoder (reverse) gives each position its own output, a
decoder the next piece. The page said "the next piece" and "what the model predicts" for both (found by a review),
titled MiniLM's embedding board "Which heads make this prediction", and listed SmolLM2's pieces as ĠMary."""

from __future__ import annotations

import pytest

import explorer
from explorer.analysis.logit_lens import logit_lens
from explorer.tasks import make_task
from explorer.training import train
from pictures.output_charts import lens_grid_figure
from tests.test_app_trained_pages import open_with
from tests.test_heads_page import opened
from views.state import TrainedModel


@pytest.fixture(scope="module")
def trained_encoder():
    task = make_task("reverse", 8)
    result = train(explorer.ModelConfig(positional="learned"), task, steps=30)
    return TrainedModel(result.model, task, "reverse, 30 steps")


def test_a_trained_encoders_lens_guesses_each_positions_output_not_the_next_piece(trained_encoder):
    at = open_with(trained_encoder, "views/heads.py")
    captions = " ".join(c.value for c in at.caption)
    assert "that position's output" in captions and "next piece at that position" not in captions
    assert "the output at the last position" in captions
    assert "not the next piece" in at.selectbox(key="heads_piece").help


def test_the_lens_subtitle_says_what_a_cell_guesses():
    lens = logit_lens(*trained_pair())
    tokens = ["A", "B", "C", "D", "E", "F", "G", "H"]
    assert "top next piece" in lens_grid_figure(lens, tokens).layout.title.subtitle.text
    encoder = lens_grid_figure(lens, tokens, next_piece=False).layout.title.subtitle.text
    assert "each position's top output" in encoder and "next" not in encoder


def trained_pair():
    task = make_task("reverse", 8)
    model = train(explorer.ModelConfig(positional="learned"), task, steps=2).model
    return model, explorer.run(model, "A B C D E F G H")


def test_minilms_board_is_titled_by_the_embedding_not_a_prediction():
    at = opened(model="minilm-l6", tokens="the cat sat on the mat")
    titles = [h.value for h in at.subheader]
    assert "Which heads shape the embedding" in titles and "Which heads make this prediction" not in titles


def test_the_notebook_lens_of_a_post_norm_encoder_says_what_the_page_says():
    """explorer.logit_lens_figure drew every model's lens as a decoder's read through a final norm; a post-norm
    encoder (the Train page's default) has neither a next piece to guess nor a final norm."""
    model, trace = trained_pair()
    assert model.config.norm == "post" and model.decoder is None
    subtitle = explorer.logit_lens_figure(model, trace).layout.title.subtitle.text.replace("<br>", " ")  # as read
    assert "each position's top output" in subtitle and "no final norm" in subtitle
