"""What a pretrained tokenizer made of a text, where its pieces do not read as the text does: the words its
vocabulary cannot spell (they become [UNK]), and the pieces a byte-level BPE spells byte by byte ("ĠcafÃ©" reads
" café"). Both work on one Encoding of the text (PieceTokenizer.encode), so the text is tokenized once. And what one
such piece reads when it holds only part of a character's bytes."""

from __future__ import annotations

from explorer.config import ConfigError
from explorer.tokenization import BYTE_LEVEL_BPE, Encoding, PieceTokenizer, byte_alphabet

BYTE_OF_CHAR = {char: byte for byte, char in byte_alphabet().items()}  # a byte-level piece's letter -> its byte


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
        if any(char not in BYTE_OF_CHAR for char in piece):  # an added token, spelled as itself: no bytes
            pieces, spelled = [], b""
            continue
        pieces.append(piece)
        spelled += bytes(BYTE_OF_CHAR[char] for char in piece)
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


def quoted(text: str) -> str:
    """A piece's text as the pages and sentences show it: in quotes, so that " Paris" shows its space, with a line
    break, a tab or a return written \\n, \\t, \\r and any other character that draws nothing as its code point
    (\\u00a0). Unlike repr, it leaves a backslash single, so part_character_text's bytes (" \\xf0\\x9f") show as
    the caption and the README write them, and a character is never written \\x as repr writes U+00A0."""
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return (
        "'"
        + "".join(
            char
            if char == " " or (char.isprintable() and not char.isspace())
            else escapes.get(char, f"\\u{ord(char):04x}")
            for char in text
        )
        + "'"
    )


def part_character_text(tokenizer: PieceTokenizer, piece: str) -> str | None:
    """What a byte-level piece that holds only part of a character reads, those bytes written as Python writes bytes
    it cannot decode: " \\xf0\\x9f" for "ĠðŁ", the first two of an emoji's four, where decoding gives " �" for
    every such piece alike. None for a piece that reads as whole characters, or from another kind of tokenizer."""
    if tokenizer.kind != BYTE_LEVEL_BPE or any(char not in BYTE_OF_CHAR for char in piece):
        return None
    spelled = bytes(BYTE_OF_CHAR[char] for char in piece)
    try:
        spelled.decode("utf-8")
    except UnicodeDecodeError:
        return spelled.decode("utf-8", errors="backslashreplace")
    return None
