"""Axes label a byte-level checkpoint's pieces by what they read (explorer.text_reading.piece_label): SmolLM2's
"ĠcafÃ©" is "␣café", a piece holding part of a character is named by its bytes; every other model's tokens, and
whatever the analyses and downloads read, stay as the vocabulary spells them."""

from __future__ import annotations

import explorer
from explorer.compare import reorder_maps
from explorer.config import ModelConfig
from explorer.export import attention_dict
from explorer.text_reading import DRAWN_BLANKS, part_character_text, piece_bytes, piece_label
from pictures.compare_charts import paired_tokens
from tests.drawn import app_boards, app_matrices
from tests.test_app_pretrained import opened
from tests.test_piece_text import bytes_of

TEXT = "un café 🦀 ok"


def unsigned(label: str) -> str:
    """A label with its drawn blanks (␣ ↵ ⇥) back to the blanks they stand for."""
    for blank, sign in DRAWN_BLANKS.items():
        label = label.replace(sign, blank)
    return label


def test_every_smollm2_piece_is_labelled_by_what_it_reads_in_characters_that_draw(smollm_model):
    tokenizer = smollm_model.tokenizer
    decoded_alike = by_bytes = 0
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.piece(token_id)
        label = piece_label(piece)
        assert label and label.isprintable(), (piece, label)  # nothing blank or invisible on an axis
        decoded = tokenizer.decode([token_id])  # the tokenizers library's own decoder
        if all(c.isprintable() or c in DRAWN_BLANKS for c in decoded) and "\ufffd" not in decoded:
            assert unsigned(label) == decoded, (piece, label, decoded)
            decoded_alike += 1
        elif part_character_text(tokenizer, piece) is not None:
            assert bytes_of(unsigned(label)) == piece_bytes(piece), (piece, label)  # its own bytes, none lost
            by_bytes += 1
    # Almost every piece reads as the library decodes it; the rest hold part of a character (313 in SmolLM2) or
    # read as a character that draws nothing (a no-break space), written as its escape
    assert decoded_alike > 0.95 * tokenizer.vocab_size and by_bytes > 100


def test_a_smollm2_trace_keeps_the_spelling_and_labels_what_the_text_reads(smollm_model):
    trace = explorer.run(smollm_model, TEXT)
    assert trace.tokens == ["un", "ĠcafÃ©", "ĠðŁ", "¦", "Ģ", "Ġok"]  # the vocabulary's own pieces, for the analyses
    assert trace.labels == ["un", "␣café", "␣<0xF0><0x9F>", "<0xA6>", "<0x80>", "␣ok"]
    assert bytes_of(unsigned("".join(trace.labels))) == TEXT.encode("utf-8")  # together they read the text typed
    maps = trace.first.self_attention
    assert maps.query_labels == maps.key_labels == trace.labels == trace.first.labels
    exported = attention_dict(maps, 0, 0)  # the downloads keep the spelling
    assert exported["query_tokens"] == exported["key_tokens"] == trace.tokens


def test_other_models_are_labelled_by_their_tokens_as_they_are(minilm_model):
    bert = explorer.run(minilm_model, "un café tokenization")
    assert bert.labels == bert.tokens and "##ization" in bert.labels  # WordPiece's "##" says the word goes on
    configured = explorer.run(ModelConfig(), "ĠcafÃ© the Ġ")  # typed words that look like byte pieces are words
    assert configured.labels == configured.tokens == ["ĠcafÃ©", "the", "Ġ"]


def test_maps_reordered_or_paired_keep_their_labels(smollm_model):
    maps = explorer.run(smollm_model, TEXT).first.self_attention
    reordered = reorder_maps(maps, [5, 4, 3, 2, 1, 0], None)
    assert reordered.query_labels == maps.query_labels[::-1] and reordered.key_labels == maps.key_labels
    other = explorer.run(smollm_model, "un café 🦀 no").first.self_attention
    paired = paired_tokens(maps, other)  # A − B names both texts' token where they differ
    assert paired.query_labels == ["un", "␣café", "␣<0xF0><0x9F>", "<0xA6>", "<0x80>", "␣ok / ␣no"]


def test_the_attention_page_labels_smollm2s_pieces_as_they_read():
    at = opened({"model": "smollm2-135m", "tokens": TEXT})
    matrix = app_matrices(at)["map"]
    assert matrix.x_labels == matrix.y_labels == ["un", "␣café", "␣<0xF0><0x9F>", "<0xA6>", "<0x80>", "␣ok"]
    [note] = [n.value for n in at.sidebar.caption if "byte by byte" in n.value]
    assert "labelled `␣café`" in note and "(`␣<0xF0><0x9F>` `<0xA6>` `<0x80>`)" in note


def test_smollm2s_token_maps_hover_each_pieces_spelling_beside_its_label():
    """Every map over SmolLM2's tokens writes "␣café (piece ĠcafÃ©)" in its hover, as the downloads spell it."""
    labels = ["un", "␣café", "␣<0xF0><0x9F>", "<0xA6>", "<0x80>", "␣ok"]
    named = ["un", "␣café (piece ĠcafÃ©)", "␣<0xF0><0x9F> (piece ĠðŁ)", "<0xA6> (piece ¦)", "<0x80> (piece Ģ)"]
    named.append("␣ok (piece Ġok)")
    pages = {
        "views/mixing.py": {},
        "views/compare.py": {"compare": "heads"},
        "views/heads.py": {"ablate": "L0H0"},
        "views/activations.py": {"act_open_tokens": "true"},
        "views/positional.py": {"pos_open_order": "true"},  # the typed run's map; the reordered two read backwards
    }
    for page, query in pages.items():
        at = opened({"model": "smollm2-135m", "tokens": TEXT, **query}, page=page)
        maps = [p for board in app_boards(at).values() for p in board["panels"] if p.get("x_labels") == labels]
        assert maps, page
        for panel in maps:
            assert panel["hover_names"][1] == named, (page, panel["name"])
    # Compare's A − B on two texts names both texts' token where they differ, each with its spelling
    at = opened(
        {"model": "smollm2-135m", "tokens": TEXT, "compare": "input", "b_tokens": "un café 🦀 no"}, "views/compare.py"
    )
    [difference] = [p for board in app_boards(at).values() for p in board["panels"] if p["name"] == "difference"]
    assert difference["x_labels"][-1] == "␣ok / ␣no"
    assert difference["hover_names"][1][-1] == "␣ok (piece Ġok) / ␣no (piece Ġno)"
