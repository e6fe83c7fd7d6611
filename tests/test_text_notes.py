"""views/text_notes.py: the sidebar says when the padding mask has no [PAD] to block, and names a pad spelled
another way; dashboard.py shows the sentence under the mask and drops it once a [PAD] is typed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest
from tokenizers import pre_tokenizers
from tokenizers.decoders import ByteLevel

import explorer
from explorer.config import PAD_TOKEN, ModelConfig
from explorer.tasks import make_task
from explorer.text_reading import BYTE_OF_CHAR, byte_spellings, unknown_words
from explorer.training import train
from views.state import STATE_KEY, AppState, TrainedModel
from views.text_notes import MAX_NAMED, SHOWN_CHARS, byte_spelling_note, checkpoint_notes, padding_note, unknown_note

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")


def sidebar_notes(at: AppTest, words: str) -> list[str]:
    """The sidebar's captions holding `words`, after the run `at` just made."""
    assert not at.exception
    return [c.value for c in at.sidebar.caption if words in c.value]


def opened(query: dict[str, str]) -> AppTest:
    """dashboard.py opened at a link, run once."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(query)
    return at.run()


def test_the_note_comes_only_when_a_padding_mask_has_nothing_to_block():
    assert padding_note("none", "the cat") is None
    assert padding_note("causal", "the cat") is None
    assert padding_note("padding", f"the cat {PAD_TOKEN}") is None
    assert padding_note("causal+padding", "le chat", f"the {PAD_TOKEN}") is None  # a [PAD] in the target counts
    note = padding_note("causal+padding", "the cat sat")
    assert note is not None and PAD_TOKEN in note and "changes nothing" in note
    assert padding_note("padding", f"a{PAD_TOKEN}") is not None  # glued to a word, it is another token


def test_the_note_names_the_pads_spelled_another_way_and_leaves_the_word_alone():
    note = padding_note("padding", "the cat <pad> [pad] PAD <pad>")
    assert note is not None
    assert "`<pad>`, `PAD`, `[pad]` are ordinary tokens here" in note
    assert "ordinary" not in padding_note("padding", "a launch pad")
    assert "`{PAD}` is an ordinary token here" in padding_note("padding", "x {PAD}")


def test_the_note_is_right_that_the_mask_changes_nothing_without_a_pad():
    """What the sentence claims, checked on the engine: no [PAD], the same weights with and without the mask."""
    text = "the cat <pad> <pad>"
    with_mask = explorer.run(ModelConfig(mask="padding"), text).attention
    np.testing.assert_array_equal(with_mask, explorer.run(ModelConfig(mask="none"), text).attention)
    padded = explorer.run(ModelConfig(mask="padding"), f"the cat {PAD_TOKEN}").attention
    assert (padded[..., -1] == 0).all()  # with one, its key is blocked for every query


def test_the_sidebar_says_it_under_the_mask_until_a_pad_is_typed():
    at = opened({"mask": "padding", "tokens": "the cat <pad>"})
    [note] = sidebar_notes(at, "changes nothing")
    assert "`<pad>` is an ordinary token" in note
    at.text_input(key="tokens").set_value(f"the cat {PAD_TOKEN}").run()
    assert sidebar_notes(at, "changes nothing") == []


def spelled_in(tokenizer, text: str) -> list[tuple[tuple[str, ...], str]]:
    return byte_spellings(tokenizer, tokenizer.encode(text))


def unknown_in(tokenizer, text: str) -> list[tuple[str, str]]:
    return unknown_words(tokenizer, tokenizer.encode(text), text)


def test_a_byte_level_tokenizer_says_what_its_non_ascii_pieces_read(smollm_model, minilm_model):
    text = "un café, I ❤️ 東京 🦀 and the cat"
    found = spelled_in(smollm_model.tokenizer, text)
    reads = [read for _, read in found]
    assert "".join(reads).replace(" ", "") == "café❤️東京🦀"  # every character outside ASCII, each once, in order
    for pieces, read in found:
        assert ByteLevel().decode(list(pieces)) == read  # what the tokenizers library reads the pieces as
        assert not read.isascii()
    assert (("ĠðŁ", "¦", "Ģ"), " 🦀") in found  # the crab's four bytes over three pieces
    assert spelled_in(smollm_model.tokenizer, "the cat sat") == []
    assert spelled_in(minilm_model.tokenizer, text) == []  # WordPiece reads characters, not bytes
    # A typed replacement character is a whole character of its own, not the start of the next piece's
    assert [read for _, read in spelled_in(smollm_model.tokenizer, "a\ufffd\ufffd b")] == ["\ufffd", "\ufffd"]
    assert spelled_in(smollm_model.tokenizer, "<|im_start|>user café") == [(("ĠcafÃ©",), " café")]


def test_the_byte_level_alphabet_is_the_tokenizers_librarys():
    """Every byte UTF-8 writes (all but C0, C1 and F5-FF), spelled by the library and read back through BYTE_OF_CHAR."""
    spell = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    samples = [chr(c) for c in (*range(0x800), 0x800, 0xFFFF, 0x10000, 0x10FFFF) if not 0xD800 <= c < 0xE000]
    samples += [chr(0x1000 * k) for k in range(1, 16)] + [chr(0x40000 * k) for k in range(1, 5)]  # E1-EF, F1-F4
    written = set()
    for char in samples:
        [(letters, _)] = spell.pre_tokenize_str(char)
        assert bytes(BYTE_OF_CHAR[letter] for letter in letters) == char.encode("utf-8"), char
        written |= set(char.encode("utf-8"))
    assert written == set(range(256)) - {0xC0, 0xC1, *range(0xF5, 0x100)}


def test_no_note_speaks_of_the_text_while_a_trained_model_reads_it():
    """A model from the Train page reads its own whole tokens with no mask: the notes would give wrong advice there
    ("add [PAD] tokens" to a model that knows only A-J), so the sidebar leaves them out until it is sent back."""
    task = make_task("reverse", 8)
    trained = TrainedModel(train(ModelConfig(positional="learned"), task, steps=2).model, task, "reverse, 2 steps")
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    at.query_params.update({"mask": "padding", "tokens": "A B C"})
    at.run()
    assert sidebar_notes(at, "changes nothing") == []
    at.button(key="back_to_random").click().run()
    assert len(sidebar_notes(at, "changes nothing")) == 1


def test_the_sidebar_says_what_smollm2s_byte_pieces_read():
    at = opened({"model": "smollm2-135m", "tokens": "un café 🦀"})
    [note] = sidebar_notes(at, "byte by byte")
    assert "`ĠcafÃ©` reads “ café”" in note and "`ĠðŁ` `¦` `Ģ` together read “ 🦀”" in note
    at.text_input(key="tokens").set_value("the cat sat").run()
    assert sidebar_notes(at, "byte by byte") == []


def test_the_sidebar_says_what_minilm_cannot_spell():
    [note] = sidebar_notes(opened({"model": "minilm-l6", "tokens": "the 🦀 sat"}), "has no piece for")
    assert "`🦀`" in note


def test_the_byte_note_gives_the_examples_the_text_has(smollm_model, minilm_model):
    tokenizer = smollm_model.tokenizer
    [only_whole] = checkpoint_notes(tokenizer, "SmolLM2", "un café", 512)
    assert "`ĠcafÃ©` reads “ café”" in only_whole and "together" not in only_whole
    [only_split] = checkpoint_notes(tokenizer, "SmolLM2", "🦀", 512)
    assert "`ðŁ` `¦` `Ģ` together read “🦀”" in only_split and " reads " not in only_split
    assert checkpoint_notes(tokenizer, "SmolLM2", "   ", 512) == []  # refused text: the page says why, not a note
    assert checkpoint_notes(tokenizer, "SmolLM2", "un café " * 3, 6) == []  # over the page's cap: refused too
    assert checkpoint_notes(tokenizer, "SmolLM2", "un café " * 3, 7) != []  # its 7 pieces, the last a lone "Ġ"
    [accents] = checkpoint_notes(minilm_model.tokenizer, "MiniLM", "un café", 512)  # no bytes, its accent taken off
    assert "byte" not in accents and "`café` as `cafe`" in accents
    # A read that draws nothing is named, not shown as empty quotes; one that can be seen is the example if any is
    [unseen] = checkpoint_notes(tokenizer, "SmolLM2", "a\u200bb", 512)
    assert "together read U+200B ZERO WIDTH SPACE, each labelled" in unseen and "“”" not in unseen
    [seen] = checkpoint_notes(tokenizer, "SmolLM2", "I ❤️ you café", 512)  # ❤️'s selector is a piece of its own
    assert "`ĠcafÃ©` reads “ café”" in seen and "VARIATION SELECTOR" not in seen
    assert byte_spelling_note("SmolLM2", []) is None


def test_minilm_says_which_words_it_has_no_piece_for(minilm_model, smollm_model):
    tokenizer = minilm_model.tokenizer
    text = "I ❤️ the 🦀 and the 🦀 [UNK]"
    assert tokenizer.encode(text).labels.count("[UNK]") == 4  # the heart, the crab twice, and the typed [UNK] itself
    # each once, in order; the heart's variation selector (U+FE0F) goes with the accents, and a typed [UNK] is none
    assert unknown_in(tokenizer, text) == [("❤", "❤"), ("🦀", "🦀")]
    assert unknown_in(tokenizer, "the cat sat") == []
    assert unknown_in(smollm_model.tokenizer, text) == []  # byte-level: every character has its bytes' pieces
    expected = "The vocabulary of MiniLM has no piece for `❤`, `🦀`: each becomes `[UNK]`, which the maps show instead."
    typed = "MiniLM reads `[UNK]` in the text as its special token, one piece, not as letters"  # the typed [UNK]
    [special, unknown] = checkpoint_notes(tokenizer, "MiniLM", text, 512)
    assert special.startswith(typed) and unknown == expected
    assert "`🦀`: it becomes" in unknown_note("MiniLM", [("🦀", "🦀")], "[UNK]", 100)
    many = [(chr(0x1F980 + i),) * 2 for i in range(MAX_NAMED + 2)]  # seven animals
    assert "and 2 more" in unknown_note("MiniLM", many, "[UNK]", 100)
    assert unknown_note("MiniLM", [], "[UNK]", 100) is None


def test_minilm_says_when_a_whole_word_is_lost_and_why(minilm_model):
    """The offsets of an [UNK] cover its whole word: "cat🦀" is lost for its crab alone (MiniLM has "cat"), and a
    word of 101 letters for its length alone, WordPiece's limit per word."""
    tokenizer = minilm_model.tokenizer
    assert tokenizer.token_id("cat") is not None and tokenizer.longest_word == 100
    long = "a" * 101
    assert unknown_in(tokenizer, f"cat🦀 and {long}") == [("cat🦀", "🦀"), (long, "")]
    [note] = checkpoint_notes(tokenizer, "MiniLM", f"cat🦀 and {long}", 512)
    assert "no piece for `🦀`: a word holding one becomes `[UNK]` as a whole (`cat🦀`)" in note
    assert f"a word longer than 100 characters becomes `[UNK]` (`{'a' * SHOWN_CHARS}…`)" in note
    assert long not in note  # cut, not the whole word in the sidebar
    [note] = checkpoint_notes(tokenizer, "MiniLM", "a" * 100 + " " + long, 512)  # 100 letters still have their pieces
    assert note.startswith("In MiniLM, a word longer than 100 characters") and "no piece" not in note


def test_minilm_says_which_words_it_reads_without_their_accents(minilm_model, smollm_model):
    tokenizer = minilm_model.tokenizer
    text = "Un Café à Paris, crème brûlée THE End 中文"
    [note] = checkpoint_notes(tokenizer, "MiniLM", text, 512)
    # lower case alone ("THE") and the spaces put round a CJK character are no change of letters
    assert note.endswith("`Café` as `cafe`, `à` as `a`, `crème` as `creme`, `brûlée` as `brulee`.")
    read = "".join(piece.removeprefix("##") for piece in explorer.run(minilm_model, text).tokens)
    assert all(word in read for word in ("cafe", "creme", "brulee"))  # what the note says is what the maps show
    assert checkpoint_notes(tokenizer, "MiniLM", "the cat sat", 512) == []
    assert not any("accents" in n for n in checkpoint_notes(smollm_model.tokenizer, "SmolLM2", text, 512))
    many = checkpoint_notes(tokenizer, "MiniLM", "é è ê ë à â ä", 512)
    assert len(many) == 1 and many[0].endswith("`ê` as `e`, `ë` as `e`, `à` as `a` and 2 more.")
