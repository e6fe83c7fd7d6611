"""The explorer's own model runs the shipped checkpoints as the reference implementation does, layer by layer.

The reference is Hugging Face transformers (a test-only dependency): BertModel on the same files for MiniLM, and for
SmolLM2 both transformers' own reading of the GGUF (its dequantisation and un-permutation, independent of ours) and a
LlamaModel given the very tensors the explorer read. Attention weights lie in [0, 1] and must agree to 1e-5; hidden
states grow to hundreds in a pre-norm stream, so they must agree to 1e-5 of the layer's largest magnitude (float32
rounding over a few hundred sums is about 1e-6 of it).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.checkpoint_files import read_checkpoint
from explorer.pretrained import INSTALLED, installed_path
from tests.gguf_parsed_once import gguf_parsed_once

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

ATTENTION_TOLERANCE = 1e-5
RELATIVE_TOLERANCE = 1e-5
SENTENCES = [
    "the cat sat on the mat because it was tired",
    "The QUICK brown fox, naïvely jumping over 3 lazy dogs!",
    "Supercalifragilistic words are unknown to most vocabularies.",
    "a",
]

pytestmark = pytest.mark.slow


def relative_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |ours - theirs| over the reference's largest magnitude."""
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


def layer_outputs(layers: torch.nn.ModuleList) -> tuple[list[torch.Tensor], list]:
    """Forward hooks that keep every reference layer's output (the reference model is the test's own)."""
    outputs: list[torch.Tensor] = []

    def keep(module, args, output):
        outputs.append((output[0] if isinstance(output, tuple) else output).detach())

    return outputs, [layer.register_forward_hook(keep) for layer in layers]


@pytest.fixture(scope="module")
def minilm(minilm_model):
    return minilm_model


@pytest.fixture(scope="module")
def bert_reference():
    folder = installed_path(INSTALLED["minilm-l6"])
    model = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    return model, tokenizer


def test_minilm_is_the_documented_architecture(minilm):
    cfg = minilm.config
    assert (cfg.family, cfg.norm, cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_ff) == (
        "bert",
        "post",
        6,
        12,
        384,
        1536,
    )
    total = sum(p.numel() for p in minilm.parameters())
    pooler = 384 * 384 + 384  # BertModel's pooler serves sentence classification; the explorer does not load it
    assert total + pooler == 22_713_216  # all-MiniLM-L6-v2's published count


@pytest.mark.parametrize("sentence", SENTENCES)
def test_minilm_matches_bert_on_every_layer(minilm, bert_reference, sentence):
    reference, tokenizer = bert_reference
    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        out = reference(**encoded, output_attentions=True, output_hidden_states=True)
    trace = explorer.run(minilm, sentence)
    assert trace.tokens == tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    for layer in range(6):
        theirs = out.attentions[layer][0].numpy()  # [H, T, T]
        assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE, f"layer {layer}"
    for depth in range(7):  # the embeddings' LayerNorm output, then each block's
        assert relative_gap(trace.residual[depth], out.hidden_states[depth][0].numpy()) <= RELATIVE_TOLERANCE
    assert relative_gap(trace.output, out.last_hidden_state[0].numpy()) <= RELATIVE_TOLERANCE


def test_minilm_matches_bert_on_a_padded_batch(minilm, bert_reference):
    """A batch pads the shorter sentences with [PAD]; the explorer, given the same pieces, blocks [PAD] keys with its
    padding mask and must give the reference's numbers at every position, padded ones included."""
    reference, tokenizer = bert_reference
    encoded = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    assert (encoded["attention_mask"] == 0).any()
    with torch.no_grad():
        out = reference(**encoded, output_attentions=True, output_hidden_states=True)
    for row, ids in enumerate(encoded["input_ids"]):
        pieces = tokenizer.convert_ids_to_tokens(ids)
        trace = explorer.run(minilm, pieces)
        for layer in range(6):
            theirs = out.attentions[layer][row].numpy()
            assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE
        assert relative_gap(trace.output, out.last_hidden_state[row].numpy()) <= RELATIVE_TOLERANCE


@pytest.fixture(scope="module")
def smollm(smollm_model):
    return smollm_model


@pytest.fixture(scope="module")
def llama_from_gguf():
    """transformers' own reading of the GGUF: its dequantisation and its undoing of llama.cpp's permutation."""
    pytest.importorskip("accelerate")
    path = installed_path(INSTALLED["smollm2-135m"])
    with gguf_parsed_once():  # the file parsed once, not three times: 15 s of CPU down to 5
        model = transformers.LlamaForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager", torch_dtype=torch.float32
        ).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return model, tokenizer


@pytest.fixture(scope="module")
def llama_on_our_tensors():
    """A reference LlamaModel loaded with the very tensors explorer.checkpoint_files read."""
    checkpoint = read_checkpoint(installed_path(INSTALLED["smollm2-135m"]))
    h = checkpoint.hparams
    config = transformers.LlamaConfig(
        hidden_size=h.d_model,
        intermediate_size=h.d_ff,
        num_hidden_layers=h.n_layers,
        num_attention_heads=h.n_heads,
        num_key_value_heads=h.n_kv_heads,
        vocab_size=h.vocab_size,
        rms_norm_eps=h.norm_eps,
        rope_theta=h.rope_base,
        max_position_embeddings=h.max_positions,
        tie_word_embeddings=h.tie_embeddings,
        attn_implementation="eager",
    )
    with torch.device("meta"):  # no random weights drawn only to be overwritten (about 5 s for 135 M parameters)
        model = transformers.LlamaModel(config)
    state = {k: v for k, v in checkpoint.tensors.items() if k != "lm_head.weight"}
    model.load_state_dict(state, strict=True, assign=True)
    model.rotary_emb = type(model.rotary_emb)(config)  # its inverse frequencies, off the meta device
    model.eval()
    return model


def test_smollm_is_the_documented_architecture(smollm):
    cfg = smollm.config
    assert (cfg.family, cfg.norm, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_model) == (
        "llama",
        "pre",
        30,
        9,
        3,
        576,
    )
    assert cfg.rope_base == 100_000.0
    assert "4-bit" in cfg.weights_note


def compare_llama(trace, attentions, layer_out, final) -> None:
    for layer in range(30):
        assert np.abs(trace.attention[layer] - attentions[layer]).max() <= ATTENTION_TOLERANCE, f"layer {layer}"
        assert relative_gap(trace.residual[layer + 1], layer_out[layer]) <= RELATIVE_TOLERANCE, f"layer {layer}"
    assert relative_gap(trace.output, final) <= RELATIVE_TOLERANCE


@pytest.mark.parametrize("sentence", SENTENCES[:3])
def test_smollm_matches_transformers_reading_of_the_gguf(smollm, llama_from_gguf, sentence):
    reference, tokenizer = llama_from_gguf
    ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
    outputs, hooks = layer_outputs(reference.model.layers)
    try:
        with torch.no_grad():
            out = reference.model(input_ids=ids, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    trace = explorer.run(smollm, sentence)
    assert trace.tokens == tokenizer.convert_ids_to_tokens(ids[0])
    attentions = [a[0].numpy() for a in out.attentions]
    compare_llama(trace, attentions, [o[0].numpy() for o in outputs], out.last_hidden_state[0].numpy())


def test_smollm_matches_a_llama_model_given_the_same_tensors(smollm, llama_on_our_tensors):
    sentence = SENTENCES[0]
    trace = explorer.run(smollm, sentence)
    ids = torch.tensor([smollm.tokenizer.encode(sentence).ids])
    outputs, hooks = layer_outputs(llama_on_our_tensors.layers)
    try:
        with torch.no_grad():
            out = llama_on_our_tensors(input_ids=ids, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    attentions = [a[0].numpy() for a in out.attentions]
    compare_llama(trace, attentions, [o[0].numpy() for o in outputs], out.last_hidden_state[0].numpy())


def test_smollm_matches_transformers_on_a_right_padded_batch(smollm, llama_from_gguf):
    """In a batch the shorter sentence is padded after its end; a causal model's real positions never see the pads,
    so they must equal the explorer's run on the sentence alone."""
    reference, tokenizer = llama_from_gguf
    tokenizer.padding_side = "right"
    encoded = tokenizer(SENTENCES[:2], return_tensors="pt", padding=True)
    assert (encoded["attention_mask"] == 0).any()
    with torch.no_grad():
        out = reference.model(**encoded, output_attentions=True)
    for row, sentence in enumerate(SENTENCES[:2]):
        trace = explorer.run(smollm, sentence)
        n = len(trace.tokens)
        assert int(encoded["attention_mask"][row].sum()) == n
        for layer in range(30):
            theirs = out.attentions[layer][row, :, :n, :n].numpy()
            assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE
        assert relative_gap(trace.output, out.last_hidden_state[row, :n].numpy()) <= RELATIVE_TOLERANCE


def test_smollm_says_paris(smollm):
    trace = explorer.run(smollm, "The capital of France is")
    top = explorer.next_token(smollm, trace, k=5)
    assert top["text"].iloc[0] == " Paris"
    assert 0 < top["probability"].iloc[0] <= 1 and top["probability"].is_monotonic_decreasing


def test_smollm_next_token_agrees_with_the_reference_logits(smollm, llama_from_gguf):
    reference, tokenizer = llama_from_gguf
    sentence = "The capital of France is"
    with torch.no_grad():
        logits = reference(**tokenizer(sentence, return_tensors="pt")).logits[0, -1]  # [V]
    expected = torch.softmax(logits.double(), dim=-1).topk(5)
    top = explorer.next_token(smollm, explorer.run(smollm, sentence), k=5)
    assert top["piece"].tolist() == tokenizer.convert_ids_to_tokens(expected.indices)
    assert np.abs(top["probability"].to_numpy() - expected.values.numpy()).max() <= 1e-5


def reference_norms(attentions: torch.Tensor, values: torch.Tensor, w_o: torch.Tensor, n_heads: int) -> np.ndarray:
    """[H, T, T] alpha_ij * ||f_h(x_j)|| from the reference's own pieces: attentions [H, T, T], values [T, G * K] (the
    reference's value projection of the layer's input), w_o [D, H * K] (its attention output projection)."""
    k = w_o.shape[1] // n_heads
    group = n_heads // (values.shape[-1] // k)  # query heads per key/value head
    sizes = torch.stack(
        [
            (values[:, (h // group) * k : (h // group + 1) * k] @ w_o[:, h * k : (h + 1) * k].T).norm(dim=-1)
            for h in range(n_heads)
        ]
    )  # [H, T]
    return (attentions * sizes[:, None, :]).numpy()


def test_minilm_norm_attention_equals_berts_value_and_output_weights(minilm, bert_reference):
    """Kobayashi et al.'s measure computed from Hugging Face's BertModel: its value Linear (with bias) and its
    attention output dense (without the shared bias) applied to each layer's input, times its attention weights."""
    reference, tokenizer = bert_reference
    sentence = "The cat sat on the mat because it was tired."
    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        out = reference(**encoded, output_attentions=True, output_hidden_states=True)
        ours = norm_attention(minilm, explorer.run(minilm, sentence))
        for layer, bert_layer in enumerate(reference.encoder.layer):
            values = bert_layer.attention.self.value(out.hidden_states[layer][0])  # [T, D]
            w_o = bert_layer.attention.output.dense.weight  # [D, D]
            theirs = reference_norms(out.attentions[layer][0], values, w_o, 12)
            assert relative_gap(ours[layer], theirs) <= RELATIVE_TOLERANCE, f"layer {layer}"


def test_smollm_norm_attention_equals_llamas_grouped_values(smollm, llama_from_gguf):
    """The same for SmolLM2 with transformers' Llama: the layer input through its input_layernorm (pre-norm), its
    v_proj (3 key/value heads, no bias) shared by 3 query heads each, and each query head's slice of o_proj."""
    reference, tokenizer = llama_from_gguf
    sentence = "The capital of France is"
    ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = reference.model(input_ids=ids, output_attentions=True, output_hidden_states=True)
        ours = norm_attention(smollm, explorer.run(smollm, sentence))
        for layer, llama_layer in enumerate(reference.model.layers):
            normed = llama_layer.input_layernorm(out.hidden_states[layer][0])  # [T, D]
            values = llama_layer.self_attn.v_proj(normed)  # [T, G * K]
            theirs = reference_norms(out.attentions[layer][0], values, llama_layer.self_attn.o_proj.weight, 9)
            assert relative_gap(ours[layer], theirs) <= RELATIVE_TOLERANCE, f"layer {layer}"
