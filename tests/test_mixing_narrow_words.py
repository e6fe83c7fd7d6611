"""The Mixing page's words hold at every width: on a phone its maps stack, so a caption cannot place one "beside"
another; it names the map by the title the map is drawn with."""

from __future__ import annotations

import re

import pytest

import explorer
from explorer.config import ModelConfig
from pictures.mixing_boards import layer_board
from views.mixing import block_caption

PLACES = re.compile(r"\b(beside|left|right|middle|above|below|next to)\b", re.IGNORECASE)


@pytest.mark.parametrize("layer", [0, 2])
def test_the_block_caption_names_the_raw_map_by_its_title_not_by_where_it_sits(layer):
    trace = explorer.run(ModelConfig(n_layers=3), "the cat sat on the mat")
    maps = trace.stacks[0].self_attention
    rollout = explorer.attention_rollout(trace)  # [layers, query, input token]
    raw_title = layer_board(maps, rollout, layer, 0.5)["panels"][0]["title"]  # "Raw: layer 2, mean of 4 heads"
    caption = block_caption(layer)
    assert f"titled {raw_title.split(':')[0]}" in caption
    assert PLACES.search(caption) is None, caption
