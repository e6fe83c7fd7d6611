"""explorer.prediction.piece_text: what one piece of a real vocabulary reads. A byte-level piece that holds only part
of a character decodes to " �", the same for every such piece; it reads as its bytes instead (" <0xF0><0x9F>").
And explorer.text_reading.quoted, how the pages quote a piece's text."""

from __future__ import annotations

import re

import explorer
from explorer.prediction import piece_text
from explorer.text_reading import BYTE_OF_CHAR, part_character_text, quoted

NAMED_BYTE = re.compile(r"(<0x[0-9A-F]{2}>)")


def bytes_of(text: str) -> bytes:
    """A text with bytes named <0xNN> back to bytes: those bytes as they are, the rest in UTF-8."""
    parts = NAMED_BYTE.split(text)
    return b"".join(bytes([int(p[3:5], 16)]) if NAMED_BYTE.fullmatch(p) else p.encode("utf-8") for p in parts)


def test_every_smollm2_piece_reads_as_the_library_decodes_it_or_as_its_bytes(smollm_model):
    tokenizer = smollm_model.tokenizer
    as_bytes = 0
    for token_id in range(tokenizer.vocab_size):
        decoded = tokenizer.decode([token_id])  # the tokenizers library's own decoder
        text = piece_text(smollm_model, token_id)
        if "\ufffd" not in decoded:
            assert text == decoded
            continue
        piece = tokenizer.piece(token_id)
        spelled = bytes(BYTE_OF_CHAR[char] for char in piece)
        if spelled.decode("utf-8", errors="replace") == decoded and "\ufffd" not in spelled.decode("utf-8", "ignore"):
            as_bytes += 1
            assert "\ufffd" not in text, (piece, text)
            assert bytes_of(text) == spelled, (piece, text)  # the piece's own bytes, none lost
        else:  # a piece that spells U+FFFD itself reads as it
            assert text == decoded, (piece, text)
    assert as_bytes > 100  # SmolLM2 has 313: the first bytes of emoji, of CJK and of letters, and lone later bytes


def test_smollm2s_ten_likeliest_pieces_after_emoji_read_as_ten_texts(smollm_model):
    """After "😀 😃 😄" most of the likeliest pieces start the next emoji: five of them had all read " �" or "�"."""
    guesses = explorer.next_token(smollm_model, explorer.run(smollm_model, "Emoji: 😀 😃 😄"), 10)
    assert guesses["text"].nunique() == 10, guesses[["piece", "text"]]
    assert " <0xF0><0x9F>" in guesses["text"].tolist()  # "ĠðŁ": a space and an emoji's first two bytes


def test_only_a_byte_level_piece_of_part_of_a_character_reads_as_bytes(smollm_model, minilm_model):
    assert part_character_text(smollm_model.tokenizer, "ĠðŁ") == " <0xF0><0x9F>"
    assert part_character_text(smollm_model.tokenizer, "Ģ") == "<0x80>"  # a byte that only continues a character
    assert part_character_text(smollm_model.tokenizer, "ĠcafÃ©") is None  # " café": whole characters
    assert part_character_text(smollm_model.tokenizer, "<|im_start|>") is None  # an added token, not bytes
    assert part_character_text(minilm_model.tokenizer, "##ing") is None  # WordPiece spells characters
    assert piece_text(minilm_model, minilm_model.tokenizer.token_id("[UNK]")) == "[UNK]"


def test_a_quoted_piece_reads_as_repr_writes_it_but_a_mark_with_nothing_to_draw_on():
    for text in (" Paris", "\n\t", "\u00a0", " \\", "it's", "a\"b'c", "e\u0301", "\U000e0041", " <0xF0>"):
        assert quoted(text) == repr(text)  # spaces, breaks and backslashes shown as Python shows them
    # SmolLM2's likeliest piece after "I love you ❤" is U+FE0F alone: repr's "'️'" draws as empty quotes
    assert quoted("\ufe0f") == "'\\ufe0f'"
    assert quoted(" \u0301") == "' \\u0301'"  # an accent after a space would sit on it
