"""What the sidebar says of text a learner types that is not plain words, found by a review of typed text: special
tokens typed in the text, characters MiniLM drops that draw nothing, and accents. Each sentence is checked against
what the checkpoint's tokenizer and the maps do with the text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer import text_reading
from explorer.analysis.position_analysis import offset_token
from views.text_notes import checkpoint_notes

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def notes(model, text: str) -> list[str]:
    """The sidebar's notes on `text` for the checkpoint `model` (its mask aside)."""
    return checkpoint_notes(model.tokenizer, "MiniLM", text, 512)


def test_special_pieces_are_every_special_token_the_tokenizer_reads_whole(minilm_model, smollm_model):
    """Was: only the named ones (cls, sep, pad, unk; bos, eos, pad, unk), so "[MASK]" and SmolLM2's "<repo_name>" and
    13 more control tokens passed for words: the Positional page's offset demonstration repeated a typed [MASK]."""
    assert "[MASK]" in minilm_model.tokenizer.special_pieces
    assert {"<repo_name>", "<file_sep>", "<|im_start|>"} <= smollm_model.tokenizer.special_pieces
    typed = explorer.run(minilm_model, "[MASK] cat").tokens
    assert typed == ["[CLS]", "[MASK]", "cat", "[SEP]"]
    assert offset_token(typed, minilm_model.tokenizer.special_pieces) == "cat"


def test_a_typed_special_token_is_said_to_be_read_as_that_token(minilm_model, smollm_model):
    text = "the [CLS] cat [SEP] sat [MASK] on the [UNK] mat"
    [note] = notes(minilm_model, text)
    assert note.startswith("MiniLM reads `[CLS]`, `[SEP]`, `[MASK]`, `[UNK]` in the text as its special tokens")
    assert "blocks" not in note  # no [PAD] typed: nothing blocked
    encoding = minilm_model.tokenizer.encode(text)
    assert encoding.ids.count(102) == 2 and encoding.ids.count(101) == 2  # one typed, one added, of each
    typed_special_pieces = text_reading.typed_special_pieces
    assert typed_special_pieces(minilm_model.tokenizer, encoding, text) == ["[CLS]", "[SEP]", "[MASK]", "[UNK]"]
    chat = "hi <|im_start|>user x<|im_end|> [PAD]"
    smollm = smollm_model.tokenizer
    assert typed_special_pieces(smollm, smollm.encode(chat), chat) == ["<|im_start|>", "<|im_end|>"]
    assert typed_special_pieces(smollm, smollm.encode("the cat"), "the cat") == []
    assert typed_special_pieces(minilm_model.tokenizer, minilm_model.tokenizer.encode("🦀"), "🦀") == []  # [UNK]


def test_a_typed_pad_is_said_to_be_blocked_by_minilms_padding_mask(minilm_model):
    """MiniLM's padding mask blocks a typed [PAD] key, where Hugging Face's tokenizer marks it attention_mask 1."""
    text = "the cat [PAD] sat"
    trace = explorer.run(minilm_model, text)
    pad = trace.tokens.index("[PAD]")
    assert np.all(trace.attention[:, :, :, pad] == 0)  # every layer, head and query: blocked
    [note] = checkpoint_notes(minilm_model.tokenizer, "MiniLM", text, 512, mask=minilm_model.config.mask)
    assert "Its padding mask blocks the typed `[PAD]` as a key" in note and "attention_mask 1" in note
    [without_padding] = checkpoint_notes(minilm_model.tokenizer, "MiniLM", text, 512, mask="none")
    assert "blocks" not in without_padding


def test_the_sidebar_says_minilm_blocks_a_typed_pad():
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"model": "minilm-l6", "tokens": "the cat [PAD] sat"})
    at.run()
    assert not at.exception
    assert any("blocks the typed `[PAD]`" in c.value for c in at.sidebar.caption)


@pytest.mark.parametrize(
    "text, dropped",
    [("a\u200bb", "\u200b"), ("\u200b\u200b x", "\u200b"), ("x \u200e\u00ady", "\u200e\u00ad"), ("\u0301a", "\u0301")],
)
def test_a_character_minilm_drops_is_named_not_called_an_accent(minilm_model, text, dropped):
    """Was: "MiniLM takes accents off …: `a​b` as `ab`" for a zero-width space, a code span showing nothing to read
    ("`​​` as ``"); now the character is named."""
    [note] = notes(minilm_model, text)
    assert "accents" not in note and "U+" in note and "no piece on the maps holds" in note
    assert "``" not in note
    tokenizer = minilm_model.tokenizer
    assert text_reading.dropped_characters(tokenizer, text) == list(dropped)
    assert text_reading.changed_words(tokenizer, tokenizer.encode(text), text) == []


def test_a_word_that_becomes_unk_is_not_said_to_be_shown_without_its_accents(minilm_model):
    """Was: "`Café🦀` as `cafe🦀`" and "`👨‍👩‍👧` as `👨👩👧`", words the maps show as [UNK]."""
    text = "Café🦀 👨\u200d👩\u200d👧 naïve,🦀"
    assert explorer.run(minilm_model, text).tokens == ["[CLS]", "[UNK]", "[UNK]", "naive", ",", "[UNK]", "[SEP]"]
    [unknown, accents, dropped] = notes(minilm_model, text)
    assert "`Café🦀`" in unknown and accents.endswith("these words as it reads them: `naïve` as `naive`.")
    assert "U+200D ZERO WIDTH JOINER" in dropped
    encoding = minilm_model.tokenizer.encode(text)
    assert text_reading.changed_words(minilm_model.tokenizer, encoding, text) == [("naïve", "naive")]


def test_changed_words_are_what_the_maps_show(minilm_model):
    """A decomposed accent (e + U+0301) is taken off too, and Hangul, which MiniLM splits into jamo that draw as the
    same syllables, is no change."""
    text = "e\u0301 cafe\u0301s 한국어 Ünïcödé-wörds"
    [note] = notes(minilm_model, text)
    assert note.endswith("`e\u0301` as `e`, `cafe\u0301s` as `cafes`, `Ünïcödé` as `unicode`, `wörds` as `words`.")
    encoding = minilm_model.tokenizer.encode(text)
    assert text_reading.changed_words(minilm_model.tokenizer, encoding, text) == [
        ("e\u0301", "e"),
        ("cafe\u0301s", "cafes"),
        ("Ünïcödé", "unicode"),
        ("wörds", "words"),
    ]
    read = "".join(piece.removeprefix("##") for piece in encoding.labels)
    assert all(word in read for word in ("cafes", "unicode", "words"))


def test_a_configured_token_of_characters_that_draw_nothing_is_labelled_by_their_escapes():
    """Whitespace splitting keeps a typed zero-width space (U+200B is not a blank) as a token of its own: its axis
    label drew nothing, and "a\u200bb" read as "ab", a different token with the same label."""
    model = explorer.build_model(explorer.ModelConfig(n_layers=1, n_heads=1, d_model=8, d_ff=16))
    maps = explorer.run(model, ["the", "\u200b", "a\u200bb", "ab"]).first.self_attention
    assert maps.query_labels == ["the", "\\u200b", "a\\u200bb", "ab"]
    assert maps.key_labels == maps.query_labels
    assert all(label.isprintable() for label in maps.query_labels)
