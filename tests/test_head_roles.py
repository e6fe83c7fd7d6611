"""Head roles (Clark et al. 2019): shares, breadth and labels on hand-built heads whose role is known by design,
hand-computed sentences, and properties checked against a loop-by-loop reading of the documented definitions."""

from __future__ import annotations

import math
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis.head_roles import BROAD, ROLES, head_roles, is_punctuation
from explorer.analysis.stats import row_entropy
from explorer.config import ConfigError

SENTENCE = ["[CLS]", "the", "cat", ",", "sat", ".", "[SEP]"]  # punctuation at keys 3 and 5, the separator at 6
N = len(SENTENCE)
FULL = np.ones((N, N), dtype=bool)

# Token pools for generated sentences: which pool a token comes from says its role, independently of is_punctuation.
WORDS = ["the", "cat", "Ġsat", "##s", "on", "mat", "é"]
PUNCT = [",", ".", "Ġ,", "##.", "...", "—", "!", "«"]
SEPARATORS = ["[SEP]"]
PAD = "[PAD]"

FAST = settings(max_examples=60, deadline=None)


def one_hot(keys: list[int]) -> np.ndarray:
    """[T, T]: query q puts all of its attention on key keys[q]."""
    return np.eye(len(keys))[keys]


def as_weights(*heads: np.ndarray) -> np.ndarray:
    """[1, H, T, T] from H maps [T, T]."""
    return np.stack(heads)[None]


def shares_of(weights: np.ndarray, tokens: list[str], allowed: np.ndarray, **kwargs) -> dict[str, float]:
    """{role: share} of the first head of the first layer."""
    roles = head_roles(weights, tokens, allowed, **kwargs)
    return {role: float(roles.share(role)[0, 0]) for role in ROLES}


def normalised_entropy(p: list[float]) -> float:
    """Entropy of a distribution over len(p) keys divided by log(len(p)); written out here from the definition."""
    return -sum(x * math.log(x) for x in p if x > 0) / math.log(len(p))


# --- is_punctuation -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        ("##.", True),  # WordPiece continuation of "."
        ("Ġ,", True),  # byte-level BPE "," after a space
        ("Ġ", False),  # a lone space marker is a space
        ("ĠĠ", False),  # two spaces: after the marker comes "Ġ", a letter, not punctuation
        ("...", True),
        ("Ġ...", True),
        ("word", False),
        ("##s", False),
        ("Ġthe", False),
        ("—", True),  # em dash, Unicode Pd
        ("«", True),  # Unicode Pi
        ("。", True),  # ideographic full stop, Unicode Po
        ("é", False),
        ("$", True),  # BERT counts every non-alphanumeric ASCII symbol
        ("€", False),  # ...but a non-ASCII symbol (Sc) only if it is in a P* class, and it is not
        ("'s", False),  # mixed: not only punctuation
        ("[SEP]", False),
        ("1", False),
        ("", False),
        ("##", True),  # nothing follows the marker, so these are two literal "#" characters
    ],
)
def test_is_punctuation_follows_berts_rule_after_the_subword_marker(piece, expected):
    assert is_punctuation(piece) is expected


@FAST
@given(body=st.text(alphabet=string.punctuation, min_size=1, max_size=5), prefix=st.sampled_from(["", "##", "Ġ"]))
def test_ascii_punctuation_is_punctuation_with_or_without_a_marker(body, prefix):
    assert is_punctuation(prefix + body)


@FAST
@given(
    before=st.text(alphabet=string.punctuation, max_size=3),
    letter=st.sampled_from(string.ascii_letters + string.digits + "éßж"),
    after=st.text(alphabet=string.punctuation, max_size=3),
    prefix=st.sampled_from(["", "##", "Ġ"]),
)
def test_a_letter_or_digit_anywhere_makes_a_piece_not_punctuation(before, letter, after, prefix):
    assert not is_punctuation(prefix + before + letter + after)


# --- hand-computed sentences --------------------------------------------------------------------------------------


def test_a_four_token_sentence_matches_shares_worked_out_by_hand():
    tokens = ["[CLS]", "hi", "!", "[SEP]"]
    w = np.array(
        [
            [0.4, 0.3, 0.2, 0.1],
            [0.1, 0.2, 0.3, 0.4],
            [0.25, 0.25, 0.25, 0.25],
            [0.7, 0.1, 0.1, 0.1],
        ]
    )
    roles = head_roles(as_weights(w), tokens, np.ones((4, 4), dtype=bool))
    got = {role: float(roles.share(role)[0, 0]) for role in ROLES}
    expected = {
        "first": (0.4 + 0.1 + 0.25 + 0.7) / 4,  # column 0
        "sep": (0.1 + 0.4 + 0.25 + 0.1) / 4,  # column 3
        "punct": (0.2 + 0.3 + 0.25 + 0.1) / 4,  # column 2, "!"
        "previous": (0.1 + 0.25 + 0.1) / 3,  # w[q, q-1] for q = 1..3: query 0 has no previous token
        "next": (0.3 + 0.3 + 0.25) / 3,  # w[q, q+1] for q = 0..2: the last query has no next token
        "self": (0.4 + 0.2 + 0.25 + 0.1) / 4,  # the diagonal
    }
    assert got == pytest.approx(expected, rel=1e-12)
    rows = [normalised_entropy(list(row)) for row in w]
    assert roles.breadth[0, 0] == pytest.approx(np.mean(rows), rel=1e-12)
    # the largest share (first, 0.36) is under one half and the breadth (about 0.88) under 0.9: mixed
    assert roles.breadth[0, 0] < 0.9
    assert roles.labels[0, 0] == ""


def test_a_causal_sentence_averages_each_role_over_the_queries_that_can_see_its_target():
    tokens = ["[CLS]", "hi", "!", "[SEP]"]
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    w = np.array(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.5, 0.5, 0.0, 0.0],
            [0.2, 0.3, 0.5, 0.0],
            [0.1, 0.2, 0.3, 0.4],
        ]
    )
    got = shares_of(as_weights(w), tokens, allowed)
    assert math.isnan(got.pop("next"))  # no causal query can see the next token
    expected = {  # query 0 sees only itself, so its weight 1 there counts for no role
        "first": (0.5 + 0.2 + 0.1) / 3,
        "sep": 0.4,  # only the last query can see [SEP]
        "punct": (0.5 + 0.3) / 2,  # "!" is visible to queries 2 and 3
        "previous": (0.5 + 0.3 + 0.3) / 3,
        "self": (0.5 + 0.5 + 0.4) / 3,
    }
    assert got == pytest.approx(expected, rel=1e-12)
    roles = head_roles(as_weights(w), tokens, allowed)
    # query 0 has one key and no choice: left out, like a query without a role's target
    expected_breadth = np.mean([normalised_entropy(list(row[: q + 1])) for q, row in enumerate(w) if q > 0])
    assert roles.breadth[0, 0] == pytest.approx(expected_breadth, rel=1e-12)
    assert roles.breadth[0, 0] > 0.95  # 1, 0.94 and 0.92: rows 1 to 3 are close to uniform
    # self 0.47 is under the threshold, so no role is clear: broad
    assert roles.labels[0, 0] == BROAD


def test_weight_on_blocked_keys_is_ignored_even_when_it_is_nan():
    tokens = ["[CLS]", "hi", "!", "[SEP]"]
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    rng = np.random.default_rng(0)
    clean = np.where(allowed, rng.random((2, 3, 4, 4)), 0.0)
    clean /= clean.sum(axis=-1, keepdims=True)
    junk = np.where(allowed, clean, np.nan)  # what a softmax over -inf scores can leave behind
    junk[0, 0, 0, 3] = 5.0
    a, b = head_roles(clean, tokens, allowed), head_roles(junk, tokens, allowed)
    np.testing.assert_array_equal(a.shares, b.shares)
    np.testing.assert_array_equal(a.breadth, b.breadth)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_the_unweighted_shares_of_disjoint_roles_can_add_up_to_more_than_one():
    # query 0 looks at the next token, query 1 at the previous: each role's only qualifying query gives it all
    w = one_hot([1, 0])
    got = shares_of(as_weights(w), ["a", "b"], np.ones((2, 2), dtype=bool))
    assert got["previous"] == 1.0 and got["next"] == 1.0 and got["self"] == 0.0


# --- heads with one role by construction --------------------------------------------------------------------------

ROLE_HEADS = {
    # name: (weights [T, T], expected shares {role: value}, label); shares worked out from SENTENCE's positions
    "previous": (
        one_hot([0, 0, 1, 2, 3, 4, 5]),  # query 0 has no previous token and looks at itself
        {"first": 2 / 7, "sep": 0, "punct": 2 / 7, "previous": 1, "next": 0, "self": 1 / 7},  # q4 -> ",", q6 -> "."
        "previous",
    ),
    "next": (
        one_hot([1, 2, 3, 4, 5, 6, 6]),  # the last query has no next token and looks at itself
        {"first": 0, "sep": 2 / 7, "punct": 2 / 7, "previous": 0, "next": 1, "self": 1 / 7},
        "next",
    ),
    "self": (
        one_hot(list(range(N))),
        {"first": 1 / 7, "sep": 1 / 7, "punct": 2 / 7, "previous": 0, "next": 0, "self": 1},
        "self",
    ),
    "first": (
        one_hot([0] * N),
        {"first": 1, "sep": 0, "punct": 0, "previous": 1 / 6, "next": 0, "self": 1 / 7},  # q1's previous is [CLS]
        "first",
    ),
    "sep": (
        one_hot([6] * N),
        {"first": 0, "sep": 1, "punct": 0, "previous": 0, "next": 1 / 6, "self": 1 / 7},
        "sep",
    ),
    "punct": (
        one_hot([3] * N),  # all on ","
        {"first": 0, "sep": 0, "punct": 1, "previous": 1 / 6, "next": 1 / 6, "self": 1 / 7},
        "punct",
    ),
    "uniform": (
        np.full((N, N), 1 / N),
        {"first": 1 / 7, "sep": 1 / 7, "punct": 2 / 7, "previous": 1 / 7, "next": 1 / 7, "self": 1 / 7},
        BROAD,
    ),
}


@pytest.mark.parametrize("name", list(ROLE_HEADS))
def test_a_head_built_for_one_role_gets_its_shares_and_label(name):
    w, expected, label = ROLE_HEADS[name]
    roles = head_roles(as_weights(w), SENTENCE, FULL)
    assert {role: float(roles.share(role)[0, 0]) for role in ROLES} == pytest.approx(expected, abs=1e-12)
    assert roles.labels[0, 0] == label
    assert roles.breadth[0, 0] == pytest.approx(1.0 if name == "uniform" else 0.0, abs=1e-12)


def test_all_role_heads_in_one_layer_keep_their_own_columns():
    names = list(ROLE_HEADS)
    roles = head_roles(as_weights(*(ROLE_HEADS[name][0] for name in names)), SENTENCE, FULL)
    assert roles.labels.tolist() == [[ROLE_HEADS[name][2] for name in names]]
    table = roles.table()
    assert list(table.columns) == ["layer", "head", *ROLES, "breadth", "label"]
    assert table["head"].tolist() == list(range(len(names))) and (table["layer"] == 0).all()
    for head, name in enumerate(names):
        row = table.iloc[head]
        assert {role: row[role] for role in ROLES} == pytest.approx(ROLE_HEADS[name][1], abs=1e-12)
        assert row["label"] == ROLE_HEADS[name][2]


def split_head(first: float) -> np.ndarray:
    """Every query puts `first` on [CLS] and the rest on [SEP]."""
    w = np.zeros((N, N))
    w[:, 0], w[:, 6] = first, 1 - first
    return w


def test_a_head_split_55_45_between_two_roles_is_mixed_not_labelled():
    got = shares_of(as_weights(split_head(0.55)), SENTENCE, FULL)
    assert got["first"] == pytest.approx(0.55) and got["sep"] == pytest.approx(0.45)
    roles = head_roles(as_weights(split_head(0.55)), SENTENCE, FULL)
    assert roles.breadth[0, 0] == pytest.approx(normalised_entropy([0.55, 0.45, 0, 0, 0, 0, 0]))  # about 0.35
    assert roles.labels[0, 0] == ""


@pytest.mark.parametrize(
    ("first", "kwargs", "label"),
    [
        (0.7, {}, "first"),  # 0.7 against 0.3: above one half and 0.4 ahead
        (0.6, {}, "first"),  # exactly the 0.2 margin
        (0.7, {"margin": 0.4}, "first"),  # the shares' difference comes out as 0.39999999999999997: still 0.4
        (0.55, {"margin": 0.1}, "first"),  # ...and 0.09999999999999987 here
        (0.55, {"margin": 0.05}, "first"),  # a smaller margin accepts 55/45
        (0.55, {"threshold": 0.6, "margin": 0.05}, ""),  # ...but not a threshold above 0.55
        (0.7, {"threshold": 0.9}, ""),
        (0.7, {"margin": 0.5}, ""),
    ],
)
def test_threshold_and_margin_decide_the_label(first, kwargs, label):
    roles = head_roles(as_weights(split_head(first)), SENTENCE, FULL, **kwargs)
    assert roles.labels[0, 0] == label


@pytest.mark.parametrize(("heavy", "label"), [(0.38, BROAD), (0.40, "")])
def test_a_head_is_broad_from_a_breadth_of_0_9(heavy, label):
    # every query puts `heavy` on the key three places on (no role's position) and spreads the rest evenly;
    # one row [0.38, 0.62 / 6 x 6] has normalised entropy 0.912, [0.40, 0.1 x 6] 0.898
    w = np.full((N, N), (1 - heavy) / (N - 1))
    w[np.arange(N), (np.arange(N) + 3) % N] = heavy
    roles = head_roles(as_weights(w), SENTENCE, FULL)
    assert roles.breadth[0, 0] == pytest.approx(normalised_entropy([heavy] + [(1 - heavy) / (N - 1)] * (N - 1)))
    assert np.nanmax(roles.shares) < 0.5  # no role is clear, so breadth decides
    assert roles.labels[0, 0] == label


@pytest.mark.parametrize("n", [3, 5, 6, 9])
def test_uniform_causal_attention_on_a_short_sentence_is_broad(n):
    # query 0 sees one key and has no choice; every other row is exactly uniform over what it can see
    allowed = np.tril(np.ones((n, n), dtype=bool))
    w = allowed / allowed.sum(axis=-1, keepdims=True)
    roles = head_roles(as_weights(w), [f"t{i}" for i in range(n)], allowed)
    assert roles.breadth[0, 0] == pytest.approx(1.0)
    assert roles.labels[0, 0] == BROAD


def test_a_causal_previous_token_head_is_a_previous_token_head():
    n = 6
    allowed = np.tril(np.ones((n, n), dtype=bool))
    roles = head_roles(as_weights(one_hot([0, 0, 1, 2, 3, 4])), [f"t{i}" for i in range(n)], allowed)
    assert roles.share("previous")[0, 0] == 1.0
    # query 1 lands on token 0; query 0 does too, but it may see nothing else, so it does not count
    assert roles.share("first")[0, 0] == pytest.approx(1 / 5)
    assert roles.breadth[0, 0] == 0.0
    assert roles.labels[0, 0] == "previous"


# --- padding, separators and NaN ---------------------------------------------------------------------------------


def test_padding_changes_nothing():
    rng = np.random.default_rng(1)
    real = rng.random((2, 3, N, N)) ** 4  # peaked rows, so some heads get labels
    real /= real.sum(axis=-1, keepdims=True)
    n_pad = 3
    tokens = SENTENCE + [PAD] * n_pad
    allowed = np.zeros((N + n_pad, N + n_pad), dtype=bool)
    allowed[:N, :N] = True  # padding queries see nothing, and nobody sees padding
    padded = np.full((2, 3, N + n_pad, N + n_pad), np.nan)  # padding rows: a softmax over nothing
    padded[:, :, :N, :] = 0.0
    padded[:, :, :N, :N] = real
    a, b = head_roles(real, SENTENCE, FULL), head_roles(padded, tokens, allowed)
    np.testing.assert_allclose(b.shares, a.shares, rtol=1e-12)
    np.testing.assert_allclose(b.breadth, a.breadth, rtol=1e-12)
    np.testing.assert_array_equal(b.labels, a.labels)


def test_separators_are_whatever_the_model_uses():
    tokens = ["<s>", "Ġhi", "Ġ,", "</s>"]
    w = as_weights(one_hot([3, 3, 3, 3]))
    allowed = np.ones((4, 4), dtype=bool)
    assert math.isnan(shares_of(w, tokens, allowed)["sep"])  # the default, [SEP], is not in this sentence
    for separators in (["</s>"], "</s>", ("[SEP]", "</s>")):  # a lone string is one token, not its characters
        roles = head_roles(w, tokens, allowed, separators=separators)
        assert roles.share("sep")[0, 0] == 1.0 and roles.labels[0, 0] == "sep"
    assert shares_of(w, tokens, allowed)["punct"] == 0.0  # "Ġ," is punctuation and gets nothing here


def test_roles_without_a_target_are_nan():
    tokens = ["[CLS]", "a", "b"]  # no separator, no punctuation
    causal = np.tril(np.ones((3, 3), dtype=bool))
    w = as_weights(causal / causal.sum(axis=-1, keepdims=True))
    got = shares_of(w, tokens, causal)
    assert [role for role in ROLES if math.isnan(got[role])] == ["sep", "punct", "next"]


def test_a_sentence_where_nobody_sees_anything_is_nan_and_unlabelled():
    allowed = np.zeros((3, 3), dtype=bool)
    roles = head_roles(np.zeros((1, 2, 3, 3)), ["[CLS]", ",", "[SEP]"], allowed)
    assert np.isnan(roles.shares).all() and np.isnan(roles.breadth).all()
    assert (roles.labels == "").all()


def test_a_one_token_sentence_has_no_choice_so_no_roles_and_no_breadth():
    roles = head_roles(np.ones((1, 1, 1, 1)), ["[CLS]"], np.ones((1, 1), dtype=bool))
    assert np.isnan(roles.shares).all()  # its one weight, 1 on itself, is forced: it says nothing of the head
    assert math.isnan(roles.breadth[0, 0])
    assert roles.labels[0, 0] == ""


def test_a_causal_first_query_counts_for_no_role():
    # SmolLM2 on "The capital of France is": query 0 may see only token 0, so counting it put 225 heads on the first
    # token where the 4 queries with a choice put 213
    allowed = np.tril(np.ones((3, 3), dtype=bool))
    w = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # every query on itself
    roles = head_roles(as_weights(w), ["a", "b", "c"], allowed)
    assert roles.share("self")[0, 0] == 1.0 and roles.share("first")[0, 0] == 0.0  # not (1 + 0 + 0) / 3


def test_a_lone_defined_share_is_compared_with_zero():
    allowed = np.zeros((3, 3), dtype=bool)
    allowed[0, 1:] = True  # query 0 sees keys 1 (its next) and 2, which is no role's; the others see nothing
    w = np.zeros((3, 3))
    w[0, 1] = 1.0
    roles = head_roles(as_weights(w), ["a", "b", "c"], allowed)
    got = {role: float(roles.share(role)[0, 0]) for role in ROLES}
    assert got["next"] == 1.0 and all(math.isnan(got[role]) for role in ROLES if role != "next")
    assert roles.labels[0, 0] == "next"


def test_a_lone_defined_share_must_itself_be_the_margin_above_zero():
    allowed = np.zeros((3, 3), dtype=bool)
    allowed[0, 1:] = True  # query 0 sees keys 1 and 2 (only "next" is defined); the others see nothing
    w = np.zeros((3, 3))
    w[0, 1:] = 0.1, 0.9
    roles = head_roles(as_weights(w), ["a", "b", "c"], allowed, threshold=0.05)
    assert roles.share("next")[0, 0] == pytest.approx(0.1)
    assert roles.labels[0, 0] == ""  # 0.1 passes the threshold but is not 0.2 above nothing; breadth is 0.47


def test_float32_rounding_never_pushes_a_share_above_one():
    w = np.zeros((N, N), dtype=np.float32)
    w[:, 3], w[:, 5] = 1 / 3, 2 / 3  # the two punctuation marks; as float32 these add up to 1 + 3e-8
    assert float(w[0, 3]) + float(w[0, 5]) > 1  # the premise
    roles = head_roles(as_weights(w), SENTENCE, FULL)
    assert roles.shares.dtype == np.float64
    assert roles.share("punct")[0, 0] == 1.0
    assert roles.labels[0, 0] == "punct"


def test_results_are_read_only():
    roles = head_roles(as_weights(ROLE_HEADS["self"][0]), SENTENCE, FULL)
    for array in (roles.shares, roles.breadth, roles.labels):
        with pytest.raises(ValueError):
            array[(0,) * array.ndim] = 0


# --- bad input ----------------------------------------------------------------------------------------------------


def uniform_weights(shape: tuple[int, ...]) -> np.ndarray:
    return np.full(shape, 1 / shape[-1]) if shape[-1] else np.zeros(shape)


@pytest.mark.parametrize(
    ("shape", "n_tokens", "allowed_shape", "match"),
    [
        ((4, 4), 4, (4, 4), "4 dimensions"),
        ((1, 4, 4), 4, (4, 4), "4 dimensions"),
        ((0, 2, 4, 4), 4, (4, 4), "at least one layer"),
        ((1, 0, 4, 4), 4, (4, 4), "at least one layer"),
        ((1, 1, 4, 5), 5, (4, 5), "self-attention"),
        ((1, 1, 4, 4), 3, (4, 4), "3 tokens"),
        ((1, 1, 4, 4), 5, (4, 4), "5 tokens"),
        ((1, 1, 4, 4), 4, (4, 3), "allowed must be"),
        ((1, 1, 4, 4), 4, (1, 4, 4), "allowed must be"),
    ],
)
def test_mismatched_shapes_are_a_config_error(shape, n_tokens, allowed_shape, match):
    with pytest.raises(ConfigError, match=match):
        head_roles(uniform_weights(shape), [f"t{i}" for i in range(n_tokens)], np.ones(allowed_shape, dtype=bool))


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 1.5}, {"threshold": -0.1}, {"threshold": math.nan}, {"margin": -0.1}, {"margin": math.nan}]
)
def test_impossible_thresholds_are_a_config_error(kwargs):
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        head_roles(as_weights(ROLE_HEADS["self"][0]), SENTENCE, FULL, **kwargs)


def test_asking_for_an_unknown_role_is_a_config_error():
    roles = head_roles(as_weights(ROLE_HEADS["self"][0]), SENTENCE, FULL)
    with pytest.raises(ConfigError, match="previous"):
        roles.share("prev")


# --- properties against the definitions ---------------------------------------------------------------------------


def reference_targets(tokens: list[str], allowed: np.ndarray, q: int) -> dict[str, list[int]]:
    """The keys each role points at for query q, straight from head_roles' docstring, using the token pools."""
    n = len(tokens)
    keys = {
        "first": [0],
        "sep": [k for k in range(n) if tokens[k] in SEPARATORS],
        "punct": [k for k in range(n) if tokens[k] in PUNCT],
        "previous": [q - 1] if q > 0 else [],
        "next": [q + 1] if q + 1 < n else [],
        "self": [q],
    }
    if allowed[q].sum() < 2:  # one key and no choice: its weight 1 there says nothing of the head
        return {role: [] for role in keys}
    return {role: [k for k in ks if allowed[q, k]] for role, ks in keys.items()}


def reference(weights: np.ndarray, tokens: list[str], allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shares [L, H, R], breadth [L, H]) by loops over layers, heads and queries."""
    n_layers, n_heads, n, _ = weights.shape
    shares = np.full((n_layers, n_heads, len(ROLES)), np.nan)
    breadth = np.full((n_layers, n_heads), np.nan)
    targets = [reference_targets(tokens, allowed, q) for q in range(n)]
    for layer in range(n_layers):
        for head in range(n_heads):
            w = weights[layer, head].astype(np.float64)
            for r, role in enumerate(ROLES):
                values = [sum(w[q, k] for k in targets[q][role]) for q in range(n) if targets[q][role]]
                if values:
                    shares[layer, head, r] = np.mean(values)
            rows = [normalised_entropy(list(w[q, allowed[q]])) for q in range(n) if allowed[q].sum() > 1]
            if rows:
                breadth[layer, head] = np.mean(rows)
    return shares, breadth


@st.composite
def attention(draw, min_tokens: int = 1, max_tokens: int = 9) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(weights [L, H, T, T], tokens, allowed): random rows that sum to 1 over the allowed keys, junk elsewhere."""
    n = draw(st.integers(min_tokens, max_tokens))
    tokens = draw(st.lists(st.sampled_from([*WORDS, *PUNCT, *SEPARATORS, "[CLS]"]), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["full", "causal", "padded", "random"]))
    if kind == "full":
        allowed = np.ones((n, n), dtype=bool)
    elif kind == "causal":
        allowed = np.tril(np.ones((n, n), dtype=bool))
    elif kind == "padded":
        n_real = draw(st.integers(1, n))
        allowed = np.zeros((n, n), dtype=bool)
        allowed[:n_real, :n_real] = True
        tokens[n_real:] = [PAD] * (n - n_real)
    else:
        cells = draw(st.lists(st.booleans(), min_size=n * n, max_size=n * n))
        allowed = np.array(cells, dtype=bool).reshape(n, n)
    n_layers, n_heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sharpness = draw(st.sampled_from([0.1, 1.0, 5.0, 50.0]))  # from near uniform to near one-hot
    scores = sharpness * rng.standard_normal((n_layers, n_heads, n, n))
    e = np.where(allowed, np.exp(scores - scores.max(axis=-1, keepdims=True)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    weights = np.where(allowed, weights, rng.choice([np.nan, 0.0, 3.0], size=weights.shape))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return weights.astype(dtype), tokens, allowed


@FAST
@given(case=attention())
def test_shares_and_breadth_match_the_definitions_and_stay_in_0_1(case):
    weights, tokens, allowed = case
    roles = head_roles(weights, tokens, allowed)
    shares, breadth = reference(np.where(allowed, weights, 0.0), tokens, allowed)
    # float32 rows may sum to 1 +- 1e-7, which head_roles clips to 1: tolerance of a few float32 ulps
    tol = 1e-6 if weights.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(roles.shares, shares, rtol=tol, atol=tol)
    np.testing.assert_allclose(roles.breadth, breadth, rtol=tol, atol=tol)
    defined = roles.shares[~np.isnan(roles.shares)]
    assert ((defined >= 0) & (defined <= 1)).all()
    spread = roles.breadth[~np.isnan(roles.breadth)]
    assert ((spread >= 0) & (spread <= 1)).all()
    assert set(roles.labels.ravel()) <= {*ROLES, BROAD, ""}


@FAST
@given(case=attention())
def test_disjoint_roles_never_hold_more_than_all_the_attention(case):
    # previous, next and self are different keys for every query; so are first, sep and punct when token 0 is
    # neither a separator nor punctuation. Each role's share is a mean over its own queries, so weight it by
    # their number: summed over disjoint roles that is at most one unit of attention per query.
    weights, tokens, allowed = case
    roles = head_roles(weights, tokens, allowed)
    n = len(tokens)
    groups = [("previous", "next", "self")]
    if tokens[0] not in SEPARATORS + PUNCT:
        groups.append(("first", "sep", "punct"))
    n_queries = int(allowed.any(axis=-1).sum())
    for group in groups:
        counts = {role: sum(bool(reference_targets(tokens, allowed, q)[role]) for q in range(n)) for role in group}
        held = sum(np.nan_to_num(roles.share(role)) * counts[role] for role in group)  # [L, H]
        assert (held <= n_queries * (1 + 1e-6)).all()  # float32 rows may sum to 1 + 1e-7


@FAST
@given(case=attention(), data=st.data())
def test_permuting_heads_and_layers_permutes_the_results(case, data):
    weights, tokens, allowed = case
    n_layers, n_heads = weights.shape[:2]
    layers = np.array(data.draw(st.permutations(range(n_layers))))
    heads = np.array(data.draw(st.permutations(range(n_heads))))
    a = head_roles(weights, tokens, allowed)
    b = head_roles(weights[layers][:, heads], tokens, allowed)
    np.testing.assert_array_equal(b.shares, a.shares[layers][:, heads])
    np.testing.assert_array_equal(b.breadth, a.breadth[layers][:, heads])
    np.testing.assert_array_equal(b.labels, a.labels[layers][:, heads])


@st.composite
def role_heads(draw) -> tuple[str, np.ndarray, list[str], np.ndarray]:
    """(role, weights [1, 1, T, T], tokens, allowed): every query that has the role's target puts all on it.

    The sentence is [CLS], at least four words with one or two punctuation marks among them, [SEP], then up to
    three [PAD]. Bidirectional, with at least 7 real tokens, 2 marks and one separator, no other role gets more
    than 2/6. Causal masks only for first and previous heads: there a role on late keys is averaged over the few
    queries that can see them (a causal self head gets all of its last query's [SEP] share), but a previous head's
    punctuation share stays at most 2/3 (marks at T-3 and T-2) and a first head's other shares at most 1/6. So the
    built-in role always leads by more than the 0.2 margin.
    """
    role = draw(st.sampled_from(ROLES))
    middle = draw(st.lists(st.sampled_from(WORDS), min_size=4, max_size=9))
    for mark in draw(st.lists(st.sampled_from(PUNCT), min_size=1, max_size=2)):
        middle.insert(draw(st.integers(0, len(middle))), mark)
    tokens = ["[CLS]", *middle, "[SEP]"]
    n_real = len(tokens)
    n = n_real + draw(st.integers(0, 3))
    tokens += [PAD] * (n - n_real)
    causal = role in ("first", "previous") and draw(st.booleans())
    allowed = np.zeros((n, n), dtype=bool)
    allowed[:n_real, :n_real] = np.tril(np.ones((n_real, n_real), dtype=bool)) if causal else True
    w = np.zeros((n, n))
    for q in range(n_real):
        targets = reference_targets(tokens, allowed, q)[role]
        key = draw(st.sampled_from(targets)) if targets else q  # no target (e.g. query 0's previous): itself
        w[q, key] = 1.0
    return role, w[None, None], tokens, allowed


@FAST
@given(case=role_heads())
def test_a_one_hot_role_pattern_always_gets_its_label(case):
    role, weights, tokens, allowed = case
    roles = head_roles(weights, tokens, allowed)
    assert roles.share(role)[0, 0] == 1.0
    assert roles.labels[0, 0] == role
    assert roles.breadth[0, 0] == 0.0


@FAST
@given(case=attention())
def test_breadth_read_from_a_given_row_entropy_matches_the_definition(case):
    # The Attention page hands head_roles the row entropy it made for the entropy table (float32 logs, summed in
    # float64), so the breadth agrees with the float64 definition to float32's precision; the shares are untouched.
    weights, tokens, allowed = case
    entropy = row_entropy(np.where(allowed, weights, 0.0))  # [L, H, T]
    given_entropy = head_roles(weights, tokens, allowed, entropy=entropy)
    shares, breadth = reference(np.where(allowed, weights, 0.0), tokens, allowed)
    np.testing.assert_array_equal(given_entropy.shares, head_roles(weights, tokens, allowed).shares)
    np.testing.assert_allclose(given_entropy.breadth, breadth, rtol=1e-6, atol=1e-6)


def test_a_row_entropy_of_the_wrong_shape_is_refused():
    w = as_weights(np.full((4, 4), 0.25))
    with pytest.raises(ConfigError, match="entropy has shape"):
        head_roles(w, ["a", "b", "c", "d"], np.ones((4, 4), dtype=bool), entropy=np.zeros((1, 1, 3)))
