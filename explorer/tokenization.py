"""Real pretrained tokenizers built offline with `tokenizers`: BERT WordPiece, byte-level BPE from a GGUF or a folder.

Every piece is labelled the way its vocabulary spells it ("##ing", "Ġthe"), so the attention views show the model's own
tokens. Nothing here touches the network or a model hub.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE, WordPiece

from explorer.config import ConfigError

WORDPIECE = "wordpiece"
BYTE_LEVEL_BPE = "byte-level BPE"

# llama.cpp's token types (tokenizer.ggml.token_type): 3 is CONTROL (special, e.g. <|im_end|>), 4 is USER_DEFINED.
_CONTROL = 3
_USER_DEFINED = 4

# The BERT special tokens every WordPiece tokenizer here must have, by the name tokenizer_config.json gives them.
_BERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "unk": "[UNK]"}
_BPE_SPECIAL_NAMES = ("bos", "eos", "pad", "unk")
_GGUF_SPECIAL_KEYS = {
    name: f"tokenizer.ggml.{key}_token_id"
    for name, key in zip(_BPE_SPECIAL_NAMES, ("bos", "eos", "padding", "unknown"), strict=True)
}

# Split patterns of llama.cpp pre-tokenizer types (`tokenizer.ggml.pre`) that isolate words before the byte mapping.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# GPT-2's own pattern ('s|'t|...| ?\p{L}+| ?\p{N}+|...), which ByteLevel(use_regex=True) applies by itself.
_GPT2_PRES = frozenset({"default", "gpt2", "mpt", "olmo", "jais"})
# StarCoder's vocabulary (SmolLM's too): every digit is its own piece, then the GPT-2 pattern.
_DIGIT_PRES = frozenset({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"})
_SPLIT_PRES = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), _QWEN2_SPLIT),
}
SUPPORTED_PRES = tuple(sorted(_GPT2_PRES | _DIGIT_PRES | set(_SPLIT_PRES)))


@dataclass(frozen=True)
class Encoding:
    """Token ids with the special tokens the model expects, each id's piece as the vocabulary spells it, and the
    characters of the text each came from ([start, end); (0, 0) for a special token the tokenizer added)."""

    ids: list[int]
    labels: list[str]
    offsets: list[tuple[int, int]]


class PieceTokenizer:
    """A pretrained tokenizer: text -> ids and vocabulary pieces, ids -> readable text; never mutated after init."""

    def __init__(self, tokenizer: Tokenizer, kind: str, special_ids: dict[str, int], size: int | None = None) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        # A vocabulary file may list a piece twice (the later line's id wins, as in transformers), leaving a gap:
        # the highest id, not the number of distinct pieces, bounds the ids. `size` is that bound when the caller
        # knows it (a GGUF's token list numbers its pieces 0..n-1): asking the tokenizer copies its whole vocabulary.
        if size is None:
            size = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        self._size = size
        self.kind = kind
        self.special_ids = dict(special_ids)

    def __repr__(self) -> str:
        return f"PieceTokenizer(kind={self.kind!r}, vocab_size={self.vocab_size}, special_ids={self.special_ids})"

    @property
    def special_pieces(self) -> frozenset[str]:
        """The pieces of the special tokens, not words of a text: the named ones (special_ids) and every other token the
        tokenizer reads whole as special ("[MASK]" for MiniLM; "<repo_name>" and 13 more control tokens for SmolLM2)."""
        added = self._tokenizer.get_added_tokens_decoder().values()  # {id: AddedToken}
        named = {self.piece(token_id) for token_id in self.special_ids.values()}
        return frozenset(named | {token.content for token in added if token.special})

    @property
    def vocab_size(self) -> int:
        """One more than the highest id this tokenizer can produce, added special tokens included."""
        return self._size

    def encode(self, text: str) -> Encoding:
        """The ids of `text` (special tokens the model expects included) and their vocabulary pieces."""
        _check_text(text)
        encoded = self._tokenizer.encode(text)
        if all(sequence is None for sequence in encoded.sequence_ids):
            raise ConfigError(
                f"The text {text!r} has nothing this tokenizer keeps (only invisible or control characters): "
                "type some words."
            )
        ids = list(encoded.ids)
        return Encoding(ids=ids, labels=[self.piece(token_id) for token_id in ids], offsets=list(encoded.offsets))

    def decode(self, ids: Sequence[int]) -> str:
        """Readable text for `ids`, special tokens written out, e.g. [3422] -> " Paris"."""
        if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
            raise ConfigError(f"decode takes a list of token ids; got a {type(ids).__name__}.")
        checked = [self._checked_id(token_id) for token_id in ids]
        return self._tokenizer.decode(checked, skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        """The vocabulary's spelling of one id, e.g. "##ing" or "Ġthe"."""
        return self._tokenizer.id_to_token(self._checked_id(token_id))

    def token_id(self, piece: str) -> int | None:
        """The id of one vocabulary piece ("##ing", "Ġthe", "[SEP]"), or None when it is not in the vocabulary."""
        if not isinstance(piece, str):
            raise ConfigError(f"A vocabulary piece is a string such as '##ing'; got a {type(piece).__name__}.")
        return self._tokenizer.token_to_id(piece)

    def normalized(self, text: str) -> str:
        """`text` as the tokenizer reads it before splitting it: MiniLM's lower-cased, its accents taken off ("Café"
        -> "cafe"); as it is for a tokenizer that changes nothing (SmolLM2's)."""
        normalizer = self._tokenizer.normalizer
        return text if normalizer is None else normalizer.normalize_str(text)

    @property
    def longest_word(self) -> int | None:
        """The most characters a word may have before WordPiece reads it as [UNK] whole; None for other models."""
        return getattr(self._tokenizer.model, "max_input_chars_per_word", None)

    def _checked_id(self, token_id: Any) -> int:
        try:
            index = operator.index(token_id)
        except TypeError:
            raise ConfigError(f"A token id must be a whole number; got {token_id!r}.") from None
        if not 0 <= index < self.vocab_size or self._tokenizer.id_to_token(index) is None:
            raise ConfigError(f"Token id {index} is outside this vocabulary of {self.vocab_size:,} ids.")
        return index


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise ConfigError(f"The text to tokenize must be a string; got a {type(text).__name__}.")
    if not text.strip():
        raise ConfigError("The text is empty: type something to tokenize, e.g. 'the cat sat on the mat'.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate, e.g. "\ud800" from a broken decode
        raise ConfigError(
            f"The text holds {text[error.start : error.end]!r} at position {error.start}, half of a character that "
            "UTF-8 cannot write; remove it or decode the text with errors='replace'."
        ) from None


def wordpiece_from_folder(folder: Path) -> PieceTokenizer:
    """A BERT tokenizer from its folder: tokenizer.json if present, else vocab.txt and tokenizer_config.json."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; point to the folder that holds the model's vocab.txt.")
    config = _read_json_object(folder / "tokenizer_config.json", required=False)
    if (folder / "tokenizer.json").is_file():
        tokenizer = _tokenizer_from_json(folder / "tokenizer.json", WordPiece, "a WordPiece (BERT)")
    elif (folder / "vocab.txt").is_file():
        tokenizer = _wordpiece_from_vocab(folder / "vocab.txt", config)
    else:
        raise ConfigError(f"{folder} has no vocab.txt or tokenizer.json: a BERT tokenizer needs one of them.")
    source = folder / ("tokenizer.json" if (folder / "tokenizer.json").is_file() else "vocab.txt")
    special_ids = {
        name: _required_id(tokenizer, _token_name(config.get(f"{name}_token")) or default, source)
        for name, default in _BERT_SPECIALS.items()
    }
    return PieceTokenizer(tokenizer, WORDPIECE, special_ids)


def _wordpiece_from_vocab(path: Path, config: dict[str, Any]) -> Tokenizer:
    vocab = _read_vocab_txt(path)
    names = {name: _token_name(config.get(f"{name}_token")) or default for name, default in _BERT_SPECIALS.items()}
    mask = _token_name(config.get("mask_token")) or "[MASK]"
    for name in ("cls", "sep", "unk"):
        if names[name] not in vocab:
            raise ConfigError(f"{path} has no {names[name]} token; a BERT vocabulary needs it.")
    tokenizer = Tokenizer(WordPiece(vocab, unk_token=names["unk"], max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
        strip_accents=config.get("strip_accents"),
        lowercase=bool(config.get("do_lower_case", True)),
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    specials = [names["pad"], names["unk"], names["cls"], names["sep"], mask]
    tokenizer.add_special_tokens([_special(token) for token in specials if token in vocab])
    cls, sep = names["cls"], names["sep"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])],
    )
    return tokenizer


def _read_vocab_txt(path: Path) -> dict[str, int]:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot read {path}: {error}.") from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {token: index for index, token in enumerate(lines)}
    if not vocab:
        raise ConfigError(f"{path} is empty; a vocab.txt lists one token a line.")
    return vocab


def byte_level_bpe(
    tokens: list[str],
    merges: list[str],
    token_types: list[int],
    special_ids: dict[str, int],
    pre: str,
    *,
    add_bos: bool = False,
) -> PieceTokenizer:
    """A byte-level BPE tokenizer from llama.cpp-style lists, split the way pre-tokenizer type `pre` says."""
    _check_bpe_lists(tokens, merges, token_types, special_ids)
    alphabet = byte_alphabet()
    letters = set(alphabet.values())
    if set("".join(tokens)) <= letters:  # every piece spelled in the byte alphabet, as in real GGUFs: none to respell
        vocab = dict(zip(tokens, range(len(tokens)), strict=True))
    else:
        vocab = {_respell(token, letters, alphabet): index for index, token in enumerate(tokens)}
    pairs = [_merge_pair(merge) for merge in merges]
    tokenizer = Tokenizer(BPE(vocab, pairs, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tokenizer.pre_tokenizer = byte_level_pre_tokenizer(pre)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [_special(t) for t, kind in zip(tokens, token_types, strict=True) if kind == _CONTROL and set(t) <= letters]
    )
    tokenizer.add_tokens(
        [
            _special(t, special=False)
            for t, kind in zip(tokens, token_types, strict=True)
            if kind == _USER_DEFINED and t in vocab
        ]
    )
    bos = special_ids.get("bos") if add_bos else None
    tokenizer.post_processor = _special_template(None if bos is None else (tokens[bos], bos), None)
    # Every id below len(tokens) has a piece, and the added tokens are pieces of the list: len(tokens) bounds the ids.
    return PieceTokenizer(tokenizer, BYTE_LEVEL_BPE, special_ids, size=len(tokens))


def byte_level_pre_tokenizer(pre: str) -> pre_tokenizers.PreTokenizer:
    """The pre-tokenizer for llama.cpp's `tokenizer.ggml.pre` type, e.g. "smollm": digits apart, then GPT-2's split."""
    if pre in _GPT2_PRES:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _DIGIT_PRES:
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    if pre in _SPLIT_PRES:
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_SPLIT_PRES[pre]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    raise ConfigError(f"Pre-tokenizer type {pre!r} is not supported; known types: {', '.join(SUPPORTED_PRES)}.")


def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte: the alphabet a byte-level vocabulary is spelled in."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    stand_ins = iter(range(256, 512))
    return {byte: chr(byte) if byte in printable else chr(next(stand_ins)) for byte in range(256)}


def byte_spelling(text: str, alphabet: dict[int, str]) -> str:
    """`text` as a byte-level vocabulary spells it, byte by byte in `alphabet` (byte_alphabet()): "\\n" -> "Ċ",
    " café" -> "ĠcafÃ©"."""
    return "".join(alphabet[byte] for byte in text.encode("utf-8"))


def _respell(token: str, letters: set[str], alphabet: dict[int, str]) -> str:
    """A token spelled outside the byte alphabet (rare in GGUFs) rewritten byte by byte, as transformers does."""
    return token if set(token) <= letters else byte_spelling(token, alphabet)


def _merge_pair(merge: str) -> tuple[str, str]:
    left, _, right = merge.partition(" ")
    if not left or not right:
        raise ConfigError(f"The merge {merge!r} is not two pieces separated by one space.")
    return left, right


def _check_bpe_lists(tokens: list[str], merges: list[str], token_types: list[int], special_ids: dict[str, int]) -> None:
    if not tokens or not merges:
        raise ConfigError("A byte-level BPE tokenizer needs both a token list and a merge list; one is empty.")
    if len(token_types) != len(tokens):
        raise ConfigError(f"There are {len(tokens):,} tokens but {len(token_types):,} token types; they must pair up.")
    for name, token_id in special_ids.items():
        if not 0 <= token_id < len(tokens):
            raise ConfigError(f"The {name} token id {token_id} is outside the {len(tokens):,} tokens.")


def _special_template(bos: tuple[str, int] | None, eos: tuple[str, int] | None) -> processors.TemplateProcessing:
    """BOS before and EOS after each sequence, either one optional, the way transformers writes the template."""

    def one(sequence: str, type_id: int) -> str:
        marks = [f"{bos[0]}:{type_id}"] if bos else []
        marks.append(f"${sequence}:{type_id}")
        return " ".join(marks + ([f"{eos[0]}:{type_id}"] if eos else []))

    special_tokens = list(dict([mark for mark in (bos, eos) if mark]).items())
    return processors.TemplateProcessing(
        single=one("A", 0), pair=f"{one('A', 0)} {one('B', 1)}", special_tokens=special_tokens
    )


def bpe_from_gguf(path: Path, fields: dict[str, Any] | None = None) -> PieceTokenizer:
    """The byte-level BPE tokenizer described by a GGUF file's tokenizer.ggml.* metadata (`fields`, when the caller
    has already read them with the weights: the file's metadata is then not parsed a second time)."""
    path = Path(path)
    fields = _gguf_fields(path) if fields is None else fields
    model = fields.get("tokenizer.ggml.model")
    if model is None or "tokenizer.ggml.tokens" not in fields:
        raise ConfigError(f"{path.name} has no tokenizer metadata (tokenizer.ggml.model and tokenizer.ggml.tokens).")
    if model != "gpt2":
        raise ConfigError(
            f"{path.name} describes a {model!r} tokenizer; only byte-level BPE vocabularies (tokenizer.ggml.model "
            "'gpt2') are supported."
        )
    if "tokenizer.ggml.merges" not in fields:
        raise ConfigError(f"{path.name} has no tokenizer.ggml.merges; a byte-level BPE vocabulary needs its merges.")
    tokens = fields["tokenizer.ggml.tokens"]
    special_ids = {name: fields[key] for name, key in _GGUF_SPECIAL_KEYS.items() if isinstance(fields.get(key), int)}
    try:
        return byte_level_bpe(
            tokens,
            fields["tokenizer.ggml.merges"],
            fields.get("tokenizer.ggml.token_type") or [1] * len(tokens),
            special_ids,
            fields.get("tokenizer.ggml.pre") or "default",
            add_bos=bool(fields.get("tokenizer.ggml.add_bos_token", False)),
        )
    except ConfigError as error:
        raise ConfigError(f"The tokenizer in {path.name} cannot be built: {error}") from None


def _gguf_fields(path: Path) -> dict[str, Any]:
    """The tokenizer.* metadata of a GGUF as python values."""
    if not path.is_file():
        raise ConfigError(f"There is no GGUF file at {path}.")
    from explorer.gguf_files import gguf_reader  # only needed for GGUF files

    try:
        reader = gguf_reader(path)
        return {name: field.contents() for name, field in reader.fields.items() if name.startswith("tokenizer.ggml.")}
    except Exception as error:  # the reader raises ValueError, struct.error, IndexError... on a damaged file
        raise ConfigError(f"{path.name} is not a readable GGUF file ({type(error).__name__}: {error}).") from None


def bpe_from_folder(folder: Path) -> PieceTokenizer:
    """A byte-level BPE tokenizer from a folder's tokenizer.json + tokenizer_config.json, as save_pretrained writes."""
    folder = Path(folder)
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"{folder} has no tokenizer.json; a byte-level BPE folder needs one.")
    config = _read_json_object(folder / "tokenizer_config.json", required=False)
    names = _read_json_object(folder / "special_tokens_map.json", required=False) | config
    tokenizer = _tokenizer_from_json(path, BPE, "a byte-level BPE", byte_level=True)
    special_ids = {}
    for name in _BPE_SPECIAL_NAMES:
        token = _token_name(names.get(f"{name}_token"))
        if token is not None:
            special_ids[name] = _required_id(tokenizer, token, path)
    if "add_bos_token" in config or "add_eos_token" in config or tokenizer.post_processor is None:
        marks = {
            name: (tokenizer.id_to_token(special_ids[name]), special_ids[name])
            for name in ("bos", "eos")
            if config.get(f"add_{name}_token") and name in special_ids
        }
        tokenizer.post_processor = _special_template(marks.get("bos"), marks.get("eos"))
    return PieceTokenizer(tokenizer, BYTE_LEVEL_BPE, special_ids)


def _tokenizer_from_json(path: Path, model: type, what: str, byte_level: bool = False) -> Tokenizer:
    """A Tokenizer from a tokenizer.json, checked to hold the expected model; ConfigError naming the file otherwise."""
    data = _read_json_object(path, required=True)
    try:
        tokenizer = Tokenizer.from_str(json.dumps(data))
    except Exception as error:  # tokenizers raises a bare Exception on a malformed file
        raise ConfigError(f"{path} is not a valid tokenizer.json: {error}.") from None
    if not isinstance(tokenizer.model, model):
        raise ConfigError(f"{path} holds a {type(tokenizer.model).__name__} model, not {what} tokenizer.")
    if byte_level and not _mentions_type(data.get("pre_tokenizer"), "ByteLevel"):
        raise ConfigError(
            f"{path} is a BPE without the byte-level alphabet (e.g. a SentencePiece vocabulary); "
            "only byte-level BPE folders are supported."
        )
    return tokenizer


def _mentions_type(node: object, name: str) -> bool:
    if isinstance(node, dict):
        return node.get("type") == name or any(_mentions_type(value, name) for value in node.values())
    if isinstance(node, list):
        return any(_mentions_type(value, name) for value in node)
    return False


def _read_json_object(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ConfigError(f"There is no {path.name} at {path}.")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path} is not valid JSON ({error}); replace it with an intact copy.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object; it holds a {type(data).__name__}.")
    return data


def _token_name(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken dict with "content"."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _required_id(tokenizer: Tokenizer, token: str, source: Path) -> int:
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ConfigError(f"{source} has no {token} token, which this tokenizer needs.")
    return token_id


def _special(token: str, special: bool = True) -> AddedToken:
    return AddedToken(token, normalized=False, special=special)
