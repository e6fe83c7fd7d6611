"""explorer.analysis.stats and explorer.export on hand-built attention maps: exact properties, round trips."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from explorer.analysis import stats
from explorer.analysis.stats import attention_frame, attention_matrix, head_average, head_entropy, row_entropy
from explorer.config import ConfigError, ModelConfig
from explorer.export import (
    attention_csv,
    attention_dict,
    attention_json,
    export_name,
    read_attention_csv,
    read_attention_json,
)
from explorer.trace import AttentionMaps

TOKENS = "the cat sat on the mat".split()


def causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def fixed_maps(weights: np.ndarray, allowed: np.ndarray, tokens: list[str] = TOKENS) -> AttentionMaps:
    """Maps with given weights [L, H, T, T] (scores are irrelevant to the stats)."""
    scores = np.where(allowed, 0.0, -np.inf).astype(np.float32) + np.zeros_like(weights)
    return AttentionMaps("self-attention", weights.astype(np.float32), scores, allowed, tokens, tokens)


def uniform(allowed: np.ndarray, n_layers: int = 1, n_heads: int = 2) -> np.ndarray:
    n = allowed.sum(axis=-1, keepdims=True)
    row = np.divide(allowed, n, out=np.zeros(allowed.shape), where=n > 0)  # [T, T]
    return np.broadcast_to(row, (n_layers, n_heads, *allowed.shape)).copy()


def test_uniform_attention_has_entropy_log_n_allowed():
    allowed = causal(6)
    df = head_entropy(fixed_maps(uniform(allowed), allowed))
    expected = np.mean(np.log(np.arange(1, 7)))  # query i may see i + 1 keys
    assert list(df.columns) == ["layer", "head", "entropy", "max_entropy", "peakedness"]
    assert len(df) == 2
    np.testing.assert_allclose(df["entropy"], expected, rtol=1e-6)
    np.testing.assert_allclose(df["max_entropy"], expected, rtol=1e-12)
    np.testing.assert_allclose(df["peakedness"], 0.0, atol=1e-6)


def test_one_hot_attention_has_entropy_zero():
    allowed = np.ones((6, 6), dtype=bool)
    one_hot = np.broadcast_to(np.eye(6)[::-1], (2, 3, 6, 6)).copy()
    df = head_entropy(fixed_maps(one_hot, allowed))
    assert (df["entropy"] == 0.0).all()
    np.testing.assert_allclose(df["max_entropy"], np.log(6))
    np.testing.assert_allclose(df["peakedness"], 1.0)
    assert df[["layer", "head"]].values.tolist() == [[layer, head] for layer in range(2) for head in range(3)]


def test_entropy_skips_empty_rows_and_matches_numpy(make_maps):
    allowed = causal(6) & np.array([False, True, True, True, True, True])  # key 0 is padding: row 0 is empty
    maps = make_maps(n_layers=2, n_heads=3, allowed=allowed)
    assert maps.empty_rows.tolist() == [True] + [False] * 5
    df = head_entropy(maps)
    for layer in range(2):
        for head in range(3):
            p = maps.weights[layer, head, 1:].astype(np.float64)  # rows 1..5 only
            expected = np.mean([-(r[r > 0] * np.log(r[r > 0])).sum() for r in p])
            got = df.query("layer == @layer and head == @head")["entropy"].item()
            assert got == pytest.approx(expected, rel=1e-6)  # float32 logs (about 7 digits), added in float64
    assert df["max_entropy"].iloc[0] == pytest.approx(np.mean(np.log([1, 2, 3, 4, 5])))
    assert np.isfinite(df["entropy"]).all()


def test_entropy_given_by_the_caller_is_the_one_used(make_maps):
    maps = make_maps(n_layers=2, n_heads=3, allowed=causal(6))
    pd.testing.assert_frame_equal(head_entropy(maps, entropy=row_entropy(maps.weights)), head_entropy(maps))
    doubled = head_entropy(maps, entropy=2 * row_entropy(maps.weights))  # read, not recomputed
    np.testing.assert_allclose(doubled["entropy"], 2 * head_entropy(maps)["entropy"])
    with pytest.raises(ValueError, match="entropy has shape"):
        head_entropy(maps, entropy=np.zeros((2, 3, 5)))


def test_entropy_all_rows_empty_is_nan_not_error():
    allowed = np.zeros((3, 3), dtype=bool)
    df = head_entropy(fixed_maps(np.zeros((1, 2, 3, 3)), allowed, ["[PAD]"] * 3))
    assert df["entropy"].isna().all() and df["max_entropy"].isna().all()


def test_row_entropy_zero_weights_contribute_nothing():
    assert row_entropy(np.array([0.5, 0.5, 0.0])) == pytest.approx(np.log(2))
    assert row_entropy(np.zeros(4)) == 0.0


@pytest.mark.parametrize("chunk", [1, 7, 24, 1 << 20])  # a row at a time, chunks that split rows' groups, all
def test_row_entropy_is_the_same_however_the_rows_are_chunked(monkeypatch, chunk):
    monkeypatch.setattr(stats, "CHUNK_FLOATS", chunk)
    rng = np.random.default_rng(3)
    p = rng.random((2, 3, 5, 6)) ** 4  # [L, H, Tq, Tk], a few near-zero weights
    p[..., 4:] = 0.0  # masked keys
    p /= p.sum(axis=-1, keepdims=True)
    expected = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)  # float64, 0 log 0 = 0
    np.testing.assert_allclose(row_entropy(p.astype(np.float32)), expected, rtol=1e-6, atol=1e-7)
    assert row_entropy(np.zeros((2, 0, 6), np.float32)).shape == (2, 0)


def test_head_average_is_numpy_mean(make_maps):
    maps = make_maps(n_layers=3, n_heads=5)
    for layer in range(3):
        avg = head_average(maps, layer)
        assert avg.dtype == np.float32 and avg.shape == (6, 6)
        np.testing.assert_allclose(avg, maps.weights[layer].mean(axis=0), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(avg.sum(axis=-1), 1.0, rtol=1e-5)


def test_bad_layer_or_head_is_a_readable_error(make_maps):
    maps = make_maps(n_layers=2, n_heads=3)
    with pytest.raises(ConfigError, match="layer is a whole number from 0 to 1; got 2"):
        head_average(maps, 2)
    with pytest.raises(ConfigError, match="head is a whole number from 0 to 2; got 3"):
        attention_matrix(maps, 0, 3)
    with pytest.raises(ConfigError, match="got -1"):
        attention_matrix(maps, -1, 0)
    with pytest.raises(ConfigError, match="got 1.0"):  # had been numpy's "only integers, slices ..." IndexError
        attention_csv(maps, 0, 1.0)


def test_attention_frame_is_tidy_and_matches_weights(make_maps):
    allowed = causal(6)
    maps = make_maps(allowed=allowed)
    frame = attention_frame(maps, 1, 2)
    assert list(frame.columns) == ["query_index", "query_token", "key_index", "key_token", "weight", "allowed"]
    assert len(frame) == 36
    matrix = frame.pivot(index="query_index", columns="key_index", values="weight").to_numpy()
    np.testing.assert_array_equal(matrix, maps.weights[1, 2])
    assert (frame.loc[~frame["allowed"], "weight"] == 0).all()
    assert frame.loc[frame["allowed"]].shape[0] == allowed.sum()
    row = frame.iloc[1 * 6 + 4]  # query 1, key 4
    assert (row.query_token, row.key_token, row.allowed) == ("cat", "the", False)


def test_attention_frame_head_none_is_the_average(make_maps):
    maps = make_maps()
    frame = attention_frame(maps, 0, None)
    np.testing.assert_array_equal(frame["weight"].to_numpy().reshape(6, 6), head_average(maps, 0))


def test_cross_attention_frame_uses_both_token_lists(make_maps):
    maps = make_maps(tokens=["le", "chat"], key_tokens=["the", "cat", "sat"])
    frame = attention_frame(maps, 0, 0)
    assert frame["query_token"].tolist() == ["le"] * 3 + ["chat"] * 3
    assert frame["key_token"].tolist() == ["the", "cat", "sat"] * 2


def test_csv_round_trip(make_maps):
    tokens = ["a,b", '"q"', "NA", "1", "nan", "ü"]  # pandas reads NA and nan as missing unless told not to
    maps = make_maps(allowed=causal(6), tokens=tokens)
    for head in (1, None):
        back = read_attention_csv(attention_csv(maps, 1, head))
        np.testing.assert_array_equal(back["weight"].to_numpy().reshape(6, 6), attention_matrix(maps, 1, head))
        assert back["query_token"].tolist()[::6] == tokens
        assert back["key_token"].tolist()[:6] == tokens
        assert back["allowed"].tolist() == causal(6).ravel().tolist()
        assert set(back["head"]) == {1 if head == 1 else "mean"}
        assert set(back["head"]) == {read_attention_json(attention_json(maps, 1, head))["head"]}  # as the JSON says
        assert set(back["layer"]) == {1} and set(back["kind"]) == {"self-attention"}


def test_json_round_trip_with_config(make_maps):
    allowed = causal(6) & np.array([False] + [True] * 5)
    maps = make_maps(allowed=allowed)
    cfg = ModelConfig(mask="causal+padding", n_heads=2)
    back = read_attention_json(attention_json(maps, 0, 2, cfg))
    np.testing.assert_array_equal(back["weights"], maps.weights[0, 2])
    np.testing.assert_array_equal(back["allowed"], allowed)
    assert back["config"] == cfg.to_dict()
    assert ModelConfig(**back["config"]) == cfg
    assert (back["kind"], back["layer"], back["head"]) == ("self-attention", 0, 2)
    assert back["query_tokens"] == TOKENS and back["key_tokens"] == TOKENS
    assert back["empty_rows"] == [0]
    assert back["masked_count"] == int((~allowed).sum())
    assert (back["weights"][~back["allowed"]] == 0).all()


def test_the_readers_take_a_files_path_as_well_as_its_text(make_maps, tmp_path):
    """The README says they read "such a file back": given its path, they had read the path as CSV or JSON."""
    maps = make_maps()
    (tmp_path / "map.csv").write_text(attention_csv(maps, 1, 0), encoding="utf-8")
    (tmp_path / "map.json").write_text(attention_json(maps, 1, 0), encoding="utf-8")
    from_text = read_attention_csv(attention_csv(maps, 1, 0))
    for path in (tmp_path / "map.csv", str(tmp_path / "map.csv")):
        pd.testing.assert_frame_equal(read_attention_csv(path), from_text)
    for path in (tmp_path / "map.json", str(tmp_path / "map.json")):
        np.testing.assert_array_equal(read_attention_json(path)["weights"], maps.weights[1, 0])
    with pytest.raises(ConfigError, match="neither a file nor the text of an attention CSV"):
        read_attention_csv(str(tmp_path / "missing.csv"))
    with pytest.raises(ConfigError, match="neither a file nor the text of an attention JSON"):
        read_attention_json("x" * 300)  # too long a name for a file: not the OSError it raised
    np.testing.assert_array_equal(
        read_attention_json(attention_json(maps, 1, 0).encode())["weights"], maps.weights[1, 0]
    )


def test_json_mean_head_without_config(make_maps):
    maps = make_maps()
    data = json.loads(attention_json(maps, 1, None))
    assert data["config"] is None and data["head"] == "mean"
    np.testing.assert_array_equal(np.asarray(data["weights"], dtype=np.float32), head_average(maps, 1))
    assert attention_dict(maps, 1, None)["head"] == "mean"


def test_export_name():
    assert export_name("cross-attention", 1, None, "csv") == "attention_cross-attention_L1_Hmean.csv"
    assert export_name("encoder self-attention", 0, 3, "json") == "attention_encoder-self-attention_L0_H3.json"
