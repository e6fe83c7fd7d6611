"""The sidebar's sentences about how the typed text becomes tokens, where the maps alone would puzzle a learner.

- The padding mask has nothing to block when the text holds no [PAD] token, so it changes no map. A token spelled
  like a pad ("<pad>", "[pad]", "PAD") is an ordinary token to the configured model, which the sentence says too.
- A checkpoint reads a special token typed in the text ("[SEP]" for MiniLM, "<|im_end|>" for SmolLM2) as that token,
  as its tokenizer in transformers does; MiniLM's padding mask then blocks a typed [PAD], which that tokenizer's
  attention_mask would not.
- A checkpoint's vocabulary may have no piece for a character (MiniLM and an emoji): the maps show [UNK] in its
  place, and several such characters look like one token. MiniLM also reads "Café" as "cafe": the maps show it so;
  and it drops characters that draw nothing (a zero-width space), which the note names.
- A byte-level checkpoint's vocabulary (SmolLM2's) spells "café" or "🦀" byte by byte ("ĠcafÃ©", "ĠðŁ" "¦" "Ģ"): the
  maps label those pieces by what they read ("␣café"), and the downloads keep the spelling, which the note links.

And PART_CHARACTER, for the pages that list next pieces: what a <0xF0> in such a piece's text means.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from explorer.config import PAD_TOKEN, ConfigError
from explorer.text_reading import (
    MARKS,
    byte_spellings,
    changed_words,
    dropped_characters,
    part_character_text,
    piece_label,
    typed_special_pieces,
    unknown_words,
)
from explorer.tokenization import PieceTokenizer
from views.widgets import markdown_literal

MAX_NAMED = 5  # unknown words the sentence names; the rest it counts
# Unicode categories of characters that draw nothing of their own: controls, format characters, separators, marks
INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"} | MARKS
# Said after a list of next pieces when one holds only part of a character (explorer.text_reading.part_character_text)
PART_CHARACTER = (
    " A piece that holds only part of a character's bytes reads as those bytes, each named as Llama's vocabularies "
    "name a byte (`<0xF0>`): the character takes more than one piece."
)
SHOWN_CHARS = 20  # characters of a long unknown word the sentence shows
# "<pad>", "[pad]", "{PAD}", "PAD", "<PAD>": a pad by another spelling; the lower-case word "pad" is left alone
LOOKS_LIKE_A_PAD = re.compile(r"^(?:[<\[{(]\s*(?i:pad)\s*[>\]})]|PAD)$")


def padding_note(mask: str, *texts: str) -> str | None:
    """What to tell someone whose mask blocks padding while the texts (the tokens, and a target) hold no pad token;
    None when the mask has something to block, or blocks no padding at all."""
    if "padding" not in mask:
        return None
    tokens = [token for text in texts for token in text.split()]
    if PAD_TOKEN in tokens:
        return None
    look_alikes = sorted({token for token in tokens if LOOKS_LIKE_A_PAD.match(token)})
    note = (
        f"The padding mask blocks {PAD_TOKEN} keys, and the text holds none, so it changes nothing yet: add "
        f"{PAD_TOKEN} tokens, e.g. `the cat sat {PAD_TOKEN} {PAD_TOKEN}`."
    )
    if look_alikes:
        spelled = ", ".join(code(token) for token in look_alikes)
        note += f" {spelled} {'is an ordinary token' if len(look_alikes) == 1 else 'are ordinary tokens'} here."
    return note


def checkpoint_notes(
    tokenizer: PieceTokenizer, model_title: str, text: str, max_pieces: int, mask: str = "none"
) -> list[str]:
    """The sentences about how a checkpoint's tokenizer reads the text: the special tokens typed in it (and, when the
    checkpoint's `mask` blocks padding, that a typed [PAD] is blocked), what it cannot spell, what it changes or drops,
    then what its byte-by-byte pieces read; none for text the page refuses, empty or over `max_pieces` (it says why,
    once)."""
    try:
        encoding = tokenizer.encode(text)
    except ConfigError:
        return []
    if len(encoding.ids) > max_pieces:
        return []
    unknown, spelled = unknown_words(tokenizer, encoding, text), byte_spellings(tokenizer, encoding)
    unk = tokenizer.piece(tokenizer.special_ids["unk"]) if unknown else ""
    notes = (
        special_note(model_title, typed_special_pieces(tokenizer, encoding, text), mask),
        unknown_note(model_title, unknown, unk, tokenizer.longest_word),
        changed_note(model_title, changed_words(tokenizer, encoding, text)),
        dropped_note(model_title, dropped_characters(tokenizer, text)),
        byte_spelling_note(model_title, spelled),
    )
    return [note for note in notes if note is not None]


def special_note(model_title: str, typed: list[str], mask: str) -> str | None:
    """That the special tokens typed in the text (text_reading.typed_special_pieces) are read as those tokens, not as
    their letters, as the checkpoint's own tokenizer reads them; and, when `mask` blocks padding, that a typed [PAD]
    is blocked as padding is, where that tokenizer's attention_mask would let every token see it. None for none."""
    if not typed:
        return None
    one = len(typed) == 1
    note = (
        f"{model_title} reads {', '.join(code(piece) for piece in typed)} in the text as "
        f"{'its special token, one piece' if one else 'its special tokens, one piece each'}, not as letters, as its "
        "tokenizer in Hugging Face transformers does."
    )
    if PAD_TOKEN in typed and "padding" in mask:
        note += (
            f" Its padding mask blocks the typed {code(PAD_TOKEN)} as a key, as it blocks the padding of a batch; "
            "Hugging Face's tokenizer, given this text, would mark it as a token to attend to (attention_mask 1)."
        )
    return note


def changed_note(model_title: str, changed: list[tuple[str, str]]) -> str | None:
    """Which words the maps show with other letters than typed (text_reading.changed_words): the accents the
    tokenizer takes off; None for none."""
    if not changed:
        return None
    shown = first_few([f"{code(word)} as {code(read)}" for word, read in changed])
    return (
        f"{model_title} takes accents off before it splits the text, so the maps show these words as it reads them: "
        f"{shown}."
    )


def dropped_note(model_title: str, dropped: list[str]) -> str | None:
    """Which characters that draw nothing the tokenizer drops (text_reading.dropped_characters), each named, since
    a code span of one shows nothing; None for none."""
    if not dropped:
        return None
    pronoun = "it" if len(dropped) == 1 else "them"
    named_chars = first_few([character_name(char) for char in dropped])
    return f"{model_title} drops {named_chars} before it splits the text: no piece on the maps holds {pronoun}."


def character_name(char: str) -> str:
    """A character by its code point and name: "U+200B ZERO WIDTH SPACE"."""
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"


def unknown_note(model_title: str, unknown: list[tuple[str, str]], unk: str, longest: int | None) -> str | None:
    """What becomes the piece `unk` (text_reading.unknown_words: each word with its characters the vocabulary has no
    piece for), and why; None for nothing."""
    if not unknown:
        return None
    chars = list(dict.fromkeys(char for _, missing in unknown for char in missing))
    whole = [word for word, missing in unknown if missing and word != missing]  # "cat🦀": more than its emoji lost
    long = [word for word, missing in unknown if not missing]  # nothing missing: too long for the tokenizer
    said = []
    if chars:
        what = (
            f"a word holding one becomes {code(unk)} as a whole ({named(whole)})"
            if whole
            else f"{'it' if len(chars) == 1 else 'each'} becomes {code(unk)}"
        )
        said.append(f"The vocabulary of {model_title} has no piece for {named(chars)}: {what}")
    if long:
        limit = f"longer than {longest} characters" if longest is not None else "too long for its tokenizer"
        who = "a word" if said else f"In {model_title}, a word"
        said.append(f"{who} {limit} becomes {code(unk)} ({named(long)})")
    return "; ".join(said) + ", which the maps show instead."


def named(words: list[str]) -> str:
    """Words as inline code, each cut to SHOWN_CHARS, at most MAX_NAMED of them and a count of the rest."""
    return first_few([code(word if len(word) <= SHOWN_CHARS else word[:SHOWN_CHARS] + "…") for word in words])


def first_few(shown: list[str]) -> str:
    """The first MAX_NAMED of `shown`, comma-separated, then a count of the rest: "a, b, c, d, e and 2 more"."""
    rest = len(shown) - MAX_NAMED
    return ", ".join(shown[:MAX_NAMED]) + (f" and {rest} more" if rest > 0 else "")


def byte_spelling_note(model_title: str, spelled: list[tuple[tuple[str, ...], str]]) -> str | None:
    """What pieces that spell characters outside ASCII byte by byte read (text_reading.byte_spellings): the first such
    piece, and the first character spread over several pieces; None for none."""
    in_view = sorted(spelled, key=lambda found: not visible(found[1]))  # a read one can see first, else in order
    one_piece = next((f for f in in_view if len(f[0]) == 1), None)
    several = next((f for f in in_view if len(f[0]) > 1), None)
    examples = []
    if one_piece is not None:
        piece = one_piece[0][0]
        examples.append(f"{code(piece)} reads {shown_read(one_piece[1])}, labelled {code(piece_label(piece))}")
    if several is not None:
        pieces = " ".join(code(piece) for piece in several[0])
        labels = " ".join(code(piece_label(piece)) for piece in several[0])
        examples.append(f"{pieces} together read {shown_read(several[1])}, each labelled by its bytes ({labels})")
    if not examples:
        return None
    return (
        f"{model_title}'s vocabulary spells a character outside ASCII byte by byte; the maps label each piece by "
        f"what it reads, a space as ␣: {'; '.join(examples)}. The downloads keep the vocabulary's spelling."
    )


def shown_read(read: str) -> str:
    """What pieces read, in quotes, with each character that draws nothing of its own named instead (a no-break
    space, a zero-width space, a combining accent): “ café”, “U+200B ZERO WIDTH SPACE”."""
    if visible(read):
        return f"“{markdown_literal(read)}”"
    return ", ".join(f"“{markdown_literal(char)}”" if visible(char) else character_name(char) for char in read)


def visible(read: str) -> bool:
    """True when every character of `read` draws something, or is the plain space a piece's Ġ stands for."""
    return all(char == " " or unicodedata.category(char) not in INVISIBLE for char in read)


def code(piece: str) -> str:
    """A piece as inline code, whatever backticks it holds."""
    return f"`` {piece} ``" if "`" in piece else f"`{piece}`"


def part_character_note(tokenizer: PieceTokenizer | None, pieces: Iterable[str]) -> str:
    """PART_CHARACTER when one of the pieces holds only part of a character, else "": for a caption's end."""
    if tokenizer is None or not any(part_character_text(tokenizer, piece) for piece in pieces):
        return ""
    return PART_CHARACTER
