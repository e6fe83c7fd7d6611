"""The phrases a configuration's one-line summary is made of (explorer.config_words)."""

from explorer.config import ModelConfig
from explorer.config_words import count, mask_text, positions_text


def test_count_puts_the_noun_in_the_plural_unless_there_is_one():
    assert count(1, "layer") == "1 layer"
    assert count(4, "head") == "4 heads"
    assert count(0, "token") == "0 tokens"


def test_positions_text_names_the_encoding_or_says_there_is_none():
    assert positions_text("rope") == "rope positions"
    assert positions_text("none") == "no positions"


def test_mask_text_says_the_mask_each_stack_applies():
    assert mask_text(ModelConfig(mask="padding")) == "mask padding"
    assert mask_text(ModelConfig(arch="decoder", mask="causal")) == "mask causal"
    assert mask_text(ModelConfig(arch="decoder")) == "mask causal (a decoder is always causal)"
    assert mask_text(ModelConfig(arch="decoder", mask="padding")) == "mask causal+padding (a decoder is always causal)"
    assert mask_text(ModelConfig(arch="encoder-decoder")) == "encoder mask none · decoder mask causal"
