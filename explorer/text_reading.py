"""What a pretrained tokenizer made of a text, where its pieces do not read as the text does: the words its
vocabulary cannot spell (they become [UNK]), and the pieces a byte-level BPE spells byte by byte ("ĠcafÃ©" reads
" café"). Both work on one Encoding of the text (PieceTokenizer.encode), so the text is tokenized once. And what one
such piece reads when it holds only part of a character's bytes, and how an axis labels a byte-level piece."""

from __future__ import annotations

import codecs
import functools
import unicodedata

from explorer.config import ConfigError
from explorer.tokenization import BYTE_LEVEL_BPE, Encoding, PieceTokenizer, byte_alphabet

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


def changed_words(tokenizer: PieceTokenizer, text: str) -> list[tuple[str, str]]:
    """The words of `text` its tokenizer reads with other letters than their own, case aside, each once, in order,
    with what it reads: ("Café", "cafe") for MiniLM, which takes accents off; [] when it changes none."""
    read = {word: "".join(tokenizer.normalized(word).split()) for word in dict.fromkeys(text.split())}
    return [(word, normal) for word, normal in read.items() if _drawn(normal).lower() != _drawn(word).lower()]


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
    read = spelled.decode("utf-8", errors=BYTE_NAMES)
    return "".join(DRAWN_BLANKS.get(c) or (c if c.isprintable() else repr(c)[1:-1]) for c in read)


def _named_bytes(error: UnicodeError) -> tuple[str, int]:
    """A codecs error handler: the bytes UTF-8 cannot decode, each as <0xNN>."""
    assert isinstance(error, UnicodeDecodeError)
    return "".join(f"<0x{byte:02X}>" for byte in error.object[error.start : error.end]), error.end


BYTE_NAMES = "explorer.named_bytes"
codecs.register_error(BYTE_NAMES, _named_bytes)
