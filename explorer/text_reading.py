"""What a pretrained tokenizer made of a text, where its pieces do not read as the text does: the words its
vocabulary cannot spell (they become [UNK]), and the pieces a byte-level BPE spells byte by byte ("ĠcafÃ©" reads
" café"). Both work on one Encoding of the text (PieceTokenizer.encode), so the text is tokenized once. And what one
such piece reads when it holds only part of a character's bytes, and how an axis labels a byte-level piece."""

from __future__ import annotations

import codecs
import functools
import unicodedata

from explorer.config import ConfigError
from explorer.tokenization import BYTE_LEVEL_BPE, WORDPIECE, Encoding, PieceTokenizer, byte_alphabet

BYTE_OF_CHAR = {char: byte for byte, char in byte_alphabet().items()}  # a byte-level piece's letter -> its byte
DRAWN_BLANKS = {" ": "␣", "\n": "↵", "\t": "⇥"}  # blanks an axis label draws as a sign: " the" and "the" differ
MARKS = {"Mn", "Me"}  # Unicode categories of marks that draw on the character before them (accents, U+FE0F)


def unknown_words(tokenizer: PieceTokenizer, encoding: Encoding, text: str) -> list[tuple[str, str]]:
    """The words of `text` (whose encoding this is) that become the unknown piece ([UNK]) as a whole, each once, in
    order, with the characters in each that the vocabulary has no piece for: ("cat🦀", "🦀") for MiniLM; "" when
    the word has none and is only too long for the tokenizer. [] for a tokenizer without an unknown piece."""
    unknown = tokenizer.special_ids.get("unk")
    if unknown is None:
        return []
    spans = [text[start:end] for i, (start, end) in zip(encoding.ids, encoding.offsets, strict=True) if i == unknown]
    words = dict.fromkeys(span for span in spans if span != tokenizer.piece(unknown))  # a typed "[UNK]" is none
    return [(word, "".join(dict.fromkeys(c for c in word if reads_as_unknown(tokenizer, c)))) for word in words]


def changed_words(tokenizer: PieceTokenizer, encoding: Encoding, text: str) -> list[tuple[str, str]]:
    """The words of `text` (whose encoding this is) that the maps show with other letters than typed, case aside,
    each once, in order, with what they show: ("Café", "cafe") for MiniLM, which takes accents off. A word is a run of
    WordPiece pieces ("cafe", "##s"), what the maps read its pieces joined; a word that becomes [UNK] is
    unknown_words', and the characters the tokenizer drops that draw nothing (dropped_characters) change no letter.
    [] for another kind of tokenizer, which reads every letter as typed."""
    if tokenizer.kind != WORDPIECE:
        return []
    dropped = set(dropped_characters(tokenizer, text))
    unknown = tokenizer.special_ids.get("unk")
    changed: dict[str, str] = {}
    for ids, typed, read in _wordpiece_words(encoding, text):
        kept = "".join(c for c in typed if c not in dropped)
        if unknown not in ids and _seen(read) != _seen(kept):
            changed.setdefault(typed, read)
    return list(changed.items())


def _wordpiece_words(encoding: Encoding, text: str) -> list[tuple[list[int], str, str]]:
    """(ids, typed, read) for each word of a WordPiece encoding: its pieces' ids, the characters of the text it came
    from, and its pieces joined without "##". The special tokens the tokenizer adds ([CLS], [SEP]: no characters)
    are no word."""
    words: list[tuple[list[int], int, int, str]] = []  # ids, start, end, read
    for token_id, piece, (start, end) in zip(encoding.ids, encoding.labels, encoding.offsets, strict=True):
        if end <= start:
            continue
        if words and piece.startswith("##"):  # MiniLM's jamo of one Hangul syllable share its one character
            ids, first, last, read = words[-1]
            words[-1] = ([*ids, token_id], first, max(last, end), read + piece.removeprefix("##"))
        else:
            words.append(([token_id], start, end, piece))
    return [(ids, text[start : _past_marks(text, end)], read) for ids, start, end, read in words]


def _past_marks(text: str, end: int) -> int:
    """`end` moved past the marks that follow it: MiniLM's offsets of "e" + U+0301 end before the accent it drops."""
    while end < len(text) and unicodedata.category(text[end]) in MARKS:
        end += 1
    return end


def _seen(word: str) -> str:
    """`word` as it looks, case aside: composed (MiniLM's NFD splits "한" into jamo that draw as "한"), without the
    variation selectors (_drawn), lower-cased."""
    return _drawn(unicodedata.normalize("NFC", word)).lower()


def dropped_characters(tokenizer: PieceTokenizer, text: str) -> list[str]:
    """The characters of `text` the tokenizer drops before it splits the text, each once, in order: MiniLM's
    zero-width space, zero-width joiner and other characters that draw nothing (U+200B, U+200D, U+200F...), and an
    accent with no letter to sit on (at the start, or after a space). An accent taken off its letter is
    changed_words'. [] for a tokenizer that keeps every character (SmolLM2's)."""
    lone = [i == 0 or text[i - 1].isspace() or unicodedata.category(c) not in MARKS for i, c in enumerate(text)]
    found = (c for c, alone in zip(text, lone, strict=True) if alone and not c.isspace())
    return [char for char in dict.fromkeys(found) if tokenizer.normalized(char) == ""]


def typed_special_pieces(tokenizer: PieceTokenizer, encoding: Encoding, text: str) -> list[str]:
    """The special tokens typed in `text` (whose encoding this is) that the tokenizer reads as those tokens, each
    once, in order: "[SEP]" typed for MiniLM is its separator, id 102, as its tokenizer in transformers reads it too;
    "<|im_end|>" for SmolLM2. Not the ones the tokenizer adds ([CLS] and [SEP] around MiniLM's text), nor an [UNK]
    that stands for a word."""
    special = tokenizer.special_pieces
    spans = zip(encoding.labels, encoding.offsets, strict=True)
    typed = [piece for piece, (start, end) in spans if piece in special and text[start:end] == piece]
    return list(dict.fromkeys(typed))


def _drawn(word: str) -> str:
    """`word` without its variation selectors (U+FE0F after "❤"): they choose how a character is drawn, not which
    one it is, and MiniLM's taking them off changes no letter."""
    return "".join(c for c in word if not ("\ufe00" <= c <= "\ufe0f" or "\U000e0100" <= c <= "\U000e01ef"))


def reads_as_unknown(tokenizer: PieceTokenizer, char: str) -> bool:
    """True when the tokenizer reads `char` alone as its unknown piece (one it drops, such as U+FE0F, is not)."""
    unknown = tokenizer.special_ids["unk"]
    try:
        ids = tokenizer.encode(char).ids
    except ConfigError:  # nothing left of it: dropped, not unknown
        return False
    added = set(tokenizer.special_ids.values()) - {unknown}  # [CLS] and [SEP] around it
    return [i for i in ids if i not in added] == [unknown]


def byte_spellings(tokenizer: PieceTokenizer, encoding: Encoding) -> list[tuple[tuple[str, ...], str]]:
    """Where byte-level BPE spells a text byte by byte: (pieces, what they read) for each piece that holds a
    character outside ASCII ("ĠcafÃ©" reads " café"), and for each run of pieces that share one character (an
    emoji's four bytes over "ĠðŁ", "¦", "Ģ" read " 🦀"), in the text's order; [] for any other tokenizer."""
    if tokenizer.kind != BYTE_LEVEL_BPE:
        return []
    found: list[tuple[tuple[str, ...], str]] = []
    pieces: list[str] = []  # pieces that end inside a character, then the piece that completes it
    spelled = b""  # their bytes
    for piece in encoding.labels:
        held = piece_bytes(piece)
        if held is None:  # an added token, spelled as itself: no bytes
            pieces, spelled = [], b""
            continue
        pieces.append(piece)
        spelled += held
        try:
            read = spelled.decode("utf-8")
        except UnicodeDecodeError as error:
            if error.reason == "unexpected end of data":
                continue  # the character goes on in the next piece
            read = spelled.decode("utf-8", errors="replace")
        if not read.isascii():
            found.append((tuple(pieces), read))
        pieces, spelled = [], b""
    if pieces:  # the text's last character left unfinished (never from typed text)
        found.append((tuple(pieces), spelled.decode("utf-8", errors="replace")))
    return found


def piece_bytes(piece: str) -> bytes | None:
    """The bytes a byte-level piece spells ("ĠðŁ" -> b" \\xf0\\x9f"); None for an added token ("<|im_start|>"),
    spelled as itself."""
    if any(char not in BYTE_OF_CHAR for char in piece):
        return None
    return bytes(BYTE_OF_CHAR[char] for char in piece)


def quoted(text: str) -> str:
    """A piece's text as the pages and sentences show it, as repr writes it ("' Paris'", "'\\n'", "'\\xa0'", a
    backslash doubled), except that a mark that draws on the character before it is written as its code point where
    there is none to draw on (at the start, or after a space): repr's "'️'" for U+FE0F looked like empty quotes."""
    quote = '"' if "'" in text and '"' not in text else "'"
    shown = []
    for i, char in enumerate(text):
        if char in (quote, "\\"):
            shown.append("\\" + char)
        elif not char.isprintable():
            shown.append(repr(char)[1:-1])
        elif unicodedata.category(char) in MARKS and (i == 0 or text[i - 1].isspace()):
            shown.append(f"\\u{ord(char):04x}")
        else:
            shown.append(char)
    return quote + "".join(shown) + quote


def part_character_text(tokenizer: PieceTokenizer, piece: str) -> str | None:
    """What a byte-level piece that holds only part of a character reads, those bytes named as Llama's vocabularies
    and llama.cpp name a byte: " <0xF0><0x9F>" for "ĠðŁ", the first two of an emoji's four, where decoding gives
    " �" for every such piece alike. None for a piece that reads as whole characters, or from another kind of
    tokenizer."""
    spelled = piece_bytes(piece) if tokenizer.kind == BYTE_LEVEL_BPE else None
    if spelled is None:
        return None
    try:
        spelled.decode("utf-8")
    except UnicodeDecodeError:
        return spelled.decode("utf-8", errors=BYTE_NAMES)
    return None


@functools.lru_cache(maxsize=65_536)  # a vocabulary's worth: a page labels the same pieces on every map
def piece_label(piece: str) -> str:
    """How an axis labels a byte-level BPE piece: what it reads, not its vocabulary spelling ("ĠcafÃ©" is "␣café"),
    each blank drawn as a sign (DRAWN_BLANKS) and any other character that draws nothing as its escape ("\\xa0"); a
    piece holding only part of a character as its bytes ("ĠðŁ" is "␣<0xF0><0x9F>", part_character_text); an added
    token ("<|im_start|>") as it is."""
    spelled = piece_bytes(piece)
    if spelled is None:
        return piece
    return "".join(DRAWN_BLANKS.get(c) or drawn_text(c) for c in spelled.decode("utf-8", errors=BYTE_NAMES))


def drawn_text(text: str) -> str:
    """`text` with each character that draws nothing (a space aside) written as its escape, so a configured token
    typed as a lone zero-width space labels an axis as "\\u200b", not as nothing."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _named_bytes(error: UnicodeError) -> tuple[str, int]:
    """A codecs error handler: the bytes UTF-8 cannot decode, each as <0xNN>."""
    assert isinstance(error, UnicodeDecodeError)
    return "".join(f"<0x{byte:02X}>" for byte in error.object[error.start : error.end]), error.end


BYTE_NAMES = "explorer.named_bytes"
codecs.register_error(BYTE_NAMES, _named_bytes)
