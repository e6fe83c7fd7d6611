"""OLMo 2 folders: a folder saved by transformers' Olmo2ForCausalLM runs in the explorer with the reference's numbers.

The reference is Hugging Face transformers (a test-only dependency): tiny random models with every RMSNorm weight
randomised (q_norm, k_norm, post_attention_layernorm, post_feedforward_layernorm, the final norm), so a norm read into
the wrong place, or not read at all, changes the numbers. One folder has grouped-query attention and its own lm_head,
the other one key/value head per query head, a read-out tied to the embeddings and sharded safetensors. Next to the
weights sits a byte-level BPE tokenizer.json split as OLMo 2's is (the cl100k pattern, then bytes), with vocab.json and
merges.txt as the real folder has them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import explorer
from explorer.compare import model_for_b
from explorer.config import ConfigError

os.environ["HF_HUB_OFFLINE"] = "1"  # the reference reads the test's own folders; nothing is downloaded
transformers = pytest.importorskip("transformers")

# Attention weights lie in [0, 1]: float32 rounding of a softmax over at most 16 keys is about 1e-7.
ATTENTION_TOLERANCE = 1e-5
# Hidden states and logits, relative to the largest magnitude of the reference's tensor: float32 sums of 64 to 128
# products round to about 1e-7 of it, and each layer adds a few such roundings.
RELATIVE_TOLERANCE = 1e-5
LAYERS = 3
HEADS = 4
# OLMo 2's tokenizer.json splits text with OpenAI's cl100k pattern (digits in threes), then maps bytes to letters.
CL100K = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CORPUS = ["the cat sat on the mat", "the dog ran to the cat's mat in 2024", "dogs and cats sat quietly, 12345"] * 10
SENTENCES = ["the cat sat on the mat.", "The dogs RAN 12345 times, didn't they?\n\n  Yes!", "a"]
SPECIALS = ["<|endoftext|>", "<|pad|>"]  # OLMo 2's end of text (also its bos and unk) and padding


def relative_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |ours - theirs| over the reference's largest magnitude."""
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


def olmo2_tokenizer() -> Tokenizer:
    """A byte-level BPE trained on a few sentences (deterministic), built the way OLMo 2's tokenizer.json is."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(CL100K), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.add_special_tokens(SPECIALS)
    return tokenizer


def save_olmo2(
    folder: Path, n_kv_heads: int, tie: bool, seed: int, max_shard_size: str | None = None
) -> torch.nn.Module:
    """An OLMo 2 folder as save_pretrained writes it, with every norm weight random, and the tokenizer's files."""
    tokenizer = olmo2_tokenizer()
    pieces = tokenizer.get_vocab_size()
    config = transformers.Olmo2Config(
        vocab_size=pieces + 6,  # a padded embedding table, as OLMo 2's 100,352 rows for 100,278 pieces
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=n_kv_heads,
        max_position_embeddings=64,
        rope_theta=500.0,  # far from the default 10000, so a reader that ignores it fails
        rms_norm_eps=1e-6,  # OLMo 2's own, not Olmo2Config's default 1e-5
        tie_word_embeddings=tie,
        initializer_range=0.1,  # larger than 0.02, so the sub-layers change the stream visibly
        bos_token_id=None,
        eos_token_id=tokenizer.token_to_id("<|endoftext|>"),
        pad_token_id=tokenizer.token_to_id("<|pad|>"),
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = transformers.Olmo2ForCausalLM(config).eval()
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__ == "Olmo2RMSNorm":
                module.weight.normal_(1.0, 0.5)
    extra = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(folder, **extra)
    tokenizer.save(str(folder / "tokenizer.json"))
    tokenizer.model.save(str(folder))  # vocab.json and merges.txt, which transformers' GPT2Tokenizer also reads
    specials = {"bos_token": SPECIALS[0], "eos_token": SPECIALS[0], "unk_token": SPECIALS[0], "pad_token": SPECIALS[1]}
    tokenizer_config = specials | {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return model


@pytest.fixture(scope="module")
def gqa(tmp_path_factory) -> tuple[Path, torch.nn.Module, object, explorer.Transformer]:
    """(folder, reference, reference tokenizer, our model): 4 query heads on 2 key/value heads, its own lm_head."""
    folder = tmp_path_factory.mktemp("olmo2-gqa")
    reference = save_olmo2(folder, n_kv_heads=2, tie=False, seed=0)
    return folder, reference, transformers.AutoTokenizer.from_pretrained(str(folder)), explorer.load_pretrained(folder)


@pytest.fixture(scope="module")
def mha(tmp_path_factory) -> tuple[Path, torch.nn.Module, object, explorer.Transformer]:
    """(folder, reference, reference tokenizer, our model): a key/value head per query head, tied read-out, shards."""
    folder = tmp_path_factory.mktemp("olmo2-mha")
    reference = save_olmo2(folder, n_kv_heads=HEADS, tie=True, seed=1, max_shard_size="40KB")
    return folder, reference, transformers.AutoTokenizer.from_pretrained(str(folder)), explorer.load_pretrained(folder)


@pytest.fixture(params=["gqa", "mha"])
def olmo2(request) -> tuple[Path, torch.nn.Module, object, explorer.Transformer]:
    return request.getfixturevalue(request.param)


def copy_of(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "copy"))


def test_an_olmo2_folder_is_read_as_res_post_norm(gqa, mha):
    for model, kv_heads, tie in ((gqa[3], 2, False), (mha[3], HEADS, True)):
        cfg = model.config
        assert (cfg.family, cfg.norm, cfg.positional, cfg.mask, cfg.activation) == (
            "olmo2",
            "res-post",
            "rope",
            "causal",
            "swiglu",
        )
        assert (cfg.n_heads, cfg.n_kv_heads, cfg.rope_base, cfg.norm_eps, cfg.tie_embeddings) == (
            HEADS,
            kv_heads,
            500.0,
            1e-6,
            tie,
        )
        block = model.decoder.layers[0]
        assert block.placement == "res-post" and not hasattr(block, "norm1")
        for norm in (block.out_norm1, block.out_norm2, block.self_attn.q_norm, block.self_attn.k_norm):
            assert not torch.all(norm.weight == 1)  # the folder's random weights, not a fresh norm's ones
    assert (mha[0] / "model.safetensors.index.json").is_file()  # the tied model came in shards


def logits_of(model: explorer.Transformer, trace: explorer.Trace) -> np.ndarray:
    """[T, V] next-token logits of every position, from the trace's final (normalised) stream."""
    with torch.no_grad():
        return model.head(torch.from_numpy(trace.output)).numpy()


@pytest.mark.parametrize("sentence", SENTENCES)
def test_an_olmo2_folder_runs_as_the_reference_does(olmo2, sentence):
    _, reference, tokenizer, model = olmo2
    ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
    last: list[torch.Tensor] = []
    hook = reference.model.layers[-1].register_forward_hook(lambda module, args, output: last.append(output))
    try:
        with torch.no_grad():
            out = reference(input_ids=ids, output_attentions=True, output_hidden_states=True)
    finally:
        hook.remove()
    trace = explorer.run(model, sentence)
    assert trace.tokens == tokenizer.convert_ids_to_tokens(ids[0])
    assert trace.attention.shape == (LAYERS, HEADS, len(trace.tokens), len(trace.tokens))  # [L, H, T, T]
    for layer in range(LAYERS):
        theirs = out.attentions[layer][0].numpy()  # [H, T, T]
        assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE, f"layer {layer}"
    # transformers' hidden_states: the embeddings, the output of every block but the last, then the final norm's
    # output. Our residual [L + 1, T, D] is the embeddings and every block's output, the last one before the final
    # norm (the hook's), and trace.output is after it.
    for layer in range(LAYERS):
        assert relative_gap(trace.residual[layer], out.hidden_states[layer][0].numpy()) <= RELATIVE_TOLERANCE, layer
    assert relative_gap(trace.residual[LAYERS], last[0][0].numpy()) <= RELATIVE_TOLERANCE
    assert relative_gap(trace.output, out.hidden_states[LAYERS][0].numpy()) <= RELATIVE_TOLERANCE
    assert relative_gap(logits_of(model, trace), out.logits[0].numpy()) <= RELATIVE_TOLERANCE


def test_the_tokenizer_splits_as_transformers_does(gqa):
    """OLMo 2's tokenizer.json is read as it is: digits in threes, contractions apart, spaces before a newline kept."""
    _, _, tokenizer, model = gqa
    texts = [*SENTENCES, "In 2024, 1234567 cats'd  \t  run.\r\nOK", "<|endoftext|>the cat", "naïve café — ok"]
    for text in texts:
        assert model.tokenizer.encode(text).ids == tokenizer(text)["input_ids"], text
    assert "".join(model.tokenizer.encode("1234567").labels) == "1234567"
    assert max(len(piece) for piece in model.tokenizer.encode("1234567").labels) <= 3  # never a 4-digit piece
    end, pad = tokenizer.convert_tokens_to_ids(SPECIALS)
    assert model.tokenizer.special_ids == {"bos": end, "eos": end, "pad": pad, "unk": end}


def test_the_next_token_table_names_the_embedding_rows_past_the_tokenizer(gqa):
    """OLMo 2 pads its embedding table past its tokenizer (100,352 rows for 100,278 pieces), and so does this folder:
    asked for every row, the table lists the padding rows as such instead of failing on them."""
    model = gqa[3]
    rows, pieces = model.head.weight.shape[0], model.tokenizer.vocab_size
    assert rows > pieces
    table = explorer.next_token(model, explorer.run(model, SENTENCES[0]), k=rows)
    padded = table[table["piece"].str.startswith("(padding row")]
    assert len(padded) == rows - pieces
    assert (padded["text"] == padded["piece"]).all()
    assert table["probability"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize("placement", ["pre", "post", "peri"])
def test_a_flip_of_placement_and_back_gives_the_original_logits_exactly(gqa, placement):
    model = gqa[3]
    sentence = SENTENCES[1]
    original = logits_of(model, explorer.run(model, sentence))
    flipped = model_for_b(model, model.config.replace(norm=placement))
    assert flipped.config.norm == placement
    assert not np.allclose(logits_of(flipped, explorer.run(flipped, sentence)), original)  # the flip changes things
    back = model_for_b(flipped, model.config)
    assert np.array_equal(logits_of(back, explorer.run(back, sentence)), original)


def test_a_loaded_model_keeps_its_weights_when_the_file_is_rewritten(gqa, tmp_path):
    """The weights are copied out of the file: safetensors maps it, and a model left on the mapping would follow the
    file's new bytes (or die of SIGBUS when it is cut) after save_pretrained into the same folder."""
    folder = copy_of(gqa[0], tmp_path)
    model = explorer.load_pretrained(folder)
    before = logits_of(model, explorer.run(model, SENTENCES[0]))
    weights = folder / "model.safetensors"
    with weights.open("r+b") as file:  # in place: the same file, every tensor's bytes now zero
        header = 8 + int.from_bytes(file.read(8), "little")
        file.seek(header)
        file.write(bytes(weights.stat().st_size - header))
    assert np.array_equal(logits_of(model, explorer.run(model, SENTENCES[0])), before)


# ---------------------------------------------------------------------------------------------------- refusals


def refusal(path: Path) -> str:
    """The ConfigError message of loading `path`: one sentence, no traceback."""
    with pytest.raises(ConfigError) as caught:
        explorer.load_pretrained(path)
    message = str(caught.value)
    assert "Traceback" not in message and "\n" not in message and message.endswith((".", ")")), message
    return message


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"model_type": "olmo"}, ["model_type 'olmo'", "'olmo2'"]),
        ({"model_type": "olmo3"}, ["model_type 'olmo3'", "'olmo2'"]),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}}, ["'linear'"]),
        ({"rope_parameters": None, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, ["rope_scaling"]),
        ({"attention_bias": True}, ["attention_bias", "OLMo 2"]),
        ({"hidden_act": "gelu"}, ["hidden_act 'gelu'", "OLMo 2"]),
        ({"num_key_value_heads": 3}, ["4 query heads", "3 key/value heads"]),
        ({"head_dim": 8}, ["head width of 8"]),
    ],
    ids=["olmo1", "olmo3", "rope-linear", "rope-scaling", "bias", "activation", "kv-heads", "head-dim"],
)
def test_an_olmo2_config_the_engine_cannot_build_is_refused(gqa, tmp_path, changes, words):
    folder = copy_of(gqa[0], tmp_path)
    edit_config(folder, **changes)
    message = refusal(folder)
    for word in ["config.json", *words]:
        assert word in message


def test_a_folder_without_the_query_norm_is_refused(gqa, tmp_path):
    """A Llama's tensors under model_type 'olmo2' would lack q_norm and k_norm: named, not silently left at 1."""
    folder = copy_of(gqa[0], tmp_path)
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.0.self_attn.q_norm.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    assert "'layers.0.self_attn.q_norm.weight'" in refusal(folder)
