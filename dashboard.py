"""Attention Explorer: the shared sidebar (every control lives in the URL), then the selected page.

Each run leaves a views.state.AppState for the page: the config, model and trace of the typed tokens (None when the
settings are impossible), the sidebar's own config, and the model the Train page sent, if any. The sidebar's first
choice is the model: "configured" (random weights from the controls, drawn from views/fields.py's table) or an
installed real checkpoint, whose CheckpointConfig then is the config and whose tokenizer reads the typed text.
"""

from __future__ import annotations

import views.idle_threads  # noqa: F401  first: before torch loads, its threads must learn to sleep (the module says why)

# isort: split
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import streamlit as st

import explorer
from explorer.config import FIELDS, PAD_TOKEN, CheckpointConfig, ConfigError, ModelConfig
from explorer.limits import MAX_PIECES, check_app_size
from explorer.malloc import give_back
from explorer.pretrained import pretrained_title
from views.ablation_controls import Removal, ablation_sidebar, removal_banner
from views.caches import (
    NO_REMOVAL,
    cached_checkpoint_run,
    cached_model,
    cached_run,
    installed_checkpoints,
    pretrained_model,
)
from views.ended_sessions import release_ended_sessions
from views.fields import FIELD, MODEL_FIELDS, field_control
from views.nodelay import disable_nagle_once
from views.query_params import NOTES_KEY, guard_number_urls_once, screen_sidebar_params, show_url_notes
from views.state import CONFIGURED, AppState, app_state, new_run
from views.text_notes import checkpoint_notes, padding_note
from views.trained_links import TRAINED_PARAM, trained_banner, trained_link_note
from views.widgets import write_clamped_to_url

TRAIN_PAGE = st.Page("views/train.py", title="Train")
PAGES = [  # no icons: a :material/ one can become the favicon, fetched from the internet; emoji need a font
    st.Page("views/attention.py", title="Attention", default=True, url_path=""),  # /attention: FIRST_PAGE_BY_NAME
    st.Page("views/mixing.py", title="Mixing (rollout and flow)"),
    st.Page("views/heads.py", title="What heads do"),
    st.Page("views/compare.py", title="Compare"),
    st.Page("views/positional.py", title="Positional encodings"),
    st.Page("views/activations.py", title="Activations"),
    st.Page("views/anatomy.py", title="Anatomy"),
    TRAIN_PAGE,
]


def open_first_page() -> None:
    """Switch to the first page at the root, its query kept."""
    st.switch_page(PAGES[0], query_params={key: st.query_params.get_all(key) for key in st.query_params})


# Every other page lives at its name, so a teacher may type /attention: Streamlit serves the default page at the root
# alone, and showed its "Page not found" dialog over the page there. This hidden page sends that link to the root.
FIRST_PAGE_BY_NAME = st.Page(open_first_page, title="Attention", url_path="attention", visibility="hidden")
# Pages that never show the sidebar's tokens (Train has its own input): an error about the tokens is noise there.
PAGES_WITHOUT_TOKENS = {TRAIN_PAGE.url_path}

DEFAULTS = ModelConfig()
DEFAULT_TOKENS = "the cat sat on the mat"
DEFAULT_TARGET = "le chat est assis sur le tapis"
TEXT_DEFAULTS = {"tokens": DEFAULT_TOKENS, "target": DEFAULT_TARGET}
MODEL_HELP = (
    "configured (the default): random weights built from the controls below. The others are real pretrained "
    "checkpoints that ship with the app (nothing is downloaded): their own tokenizer splits the text into sub-word "
    "pieces, and they fix the architecture."
)
FIXED_FIELDS = [f for f in MODEL_FIELDS if f.name != "seed"]  # what a checkpoint fixes, shown greyed out


def model_options() -> list[str]:
    return [CONFIGURED, *installed_checkpoints()]


def sidebar() -> dict[str, Any]:
    """Every control, each bound to the URL parameter of the same name; returns the raw values."""
    sb = st.sidebar
    values: dict[str, Any] = {}
    # No format_func: a bound selectbox puts the formatted label in the URL, and "model=minilm-l6" should stay short.
    values["model"] = sb.selectbox("Model", model_options(), key="model", bind="query-params", help=MODEL_HELP)
    if values["model"] != CONFIGURED:
        sb.caption(f"Real pretrained weights: **{pretrained_title(values['model'])}**.")
    values["tokens"] = sb.text_input(
        "Tokens",
        value=DEFAULT_TOKENS,
        key="tokens",
        bind="query-params",
        help=f"Words separated by spaces; {PAD_TOKEN} is the padding token. A real checkpoint reads any text "
        "with its own tokenizer.",
    )
    says_how_text_reads = app_state().trained is None  # a trained model reads its own whole tokens, no mask
    if values["model"] != CONFIGURED:
        model = pretrained_model(values["model"])
        if says_how_text_reads:  # a text over the cap gets its error alone
            cap = piece_cap(model.config)
            title, text = pretrained_title(values["model"]), values["tokens"]
            for note in checkpoint_notes(model.tokenizer, title, text, cap, mask=model.config.mask):
                sb.caption(note)
        fixed_controls(model.config)
        return values
    values["arch"] = control("arch")
    if values["arch"] == "encoder-decoder":
        values["target"] = sb.text_input(
            "Target (decoder input)",
            value=DEFAULT_TARGET,
            key="target",
            bind="query-params",
            help="The sentence the decoder reads; its cross-attention looks at the tokens above.",
        )
    values["norm"] = control("norm")
    cols = sb.columns(2)
    for i, name in enumerate(("n_layers", "n_heads", "d_model", "d_ff")):
        values[name] = control(name, cols[i % 2])
    values["positional"] = control("positional")
    values["mask"] = control("mask")
    if values["arch"] == "decoder" and "causal" not in values["mask"]:
        sb.caption("A decoder is always causal: each token sees only itself and earlier tokens.")
    texts = (values["tokens"], values.get("target", ""))
    if says_how_text_reads and (note := padding_note(values["mask"], *texts)) is not None:
        sb.caption(note)
    values["activation"] = control("activation")
    values["seed"] = control("seed")
    return values


def control(name: str, where: Any = None) -> Any:
    """The sidebar's control of a model field (into `where`, a column of the sidebar, or the sidebar)."""
    return field_control(FIELD[name], where or st.sidebar, getattr(DEFAULTS, name))


def fixed_controls(cfg: CheckpointConfig) -> None:
    """A checkpoint's architecture in place of the controls: its values, greyed out, and why."""
    sb = st.sidebar
    sb.caption(
        f"{pretrained_title(cfg.checkpoint)} fixes these: its weights were trained for exactly this shape, so they "
        "cannot change here (Compare flips its norm placement on the same weights). No seed: the weights are real."
    )
    cols = sb.columns(2)
    for i, field in enumerate(FIXED_FIELDS):
        value = getattr(cfg, field.name)
        where = cols[i % 2] if isinstance(value, int) else sb
        if isinstance(value, int):
            where.number_input(field.label, value=value, disabled=True, key=f"fixed_{field.name}")
        else:
            where.selectbox(field.label, [value], disabled=True, key=f"fixed_{field.name}")
    if cfg.n_kv_heads != cfg.n_heads:
        sb.caption(f"{cfg.n_heads} query heads share {cfg.n_kv_heads} key/value heads (grouped-query attention).")
    sb.caption(cfg.weights_note)


def removable_shape(values: dict[str, Any]) -> tuple[int, int]:
    """(layers, heads) of the stack whose heads the sidebar can remove: the trained model's, the checkpoint's or
    the configured model's (an encoder-decoder's encoder has the sidebar's n_layers too)."""
    trained = app_state().trained
    if trained is not None:
        cfg = trained.model.config
    elif values["model"] != CONFIGURED:
        cfg = pretrained_model(values["model"]).config
    else:
        return values["n_layers"], values["n_heads"]
    return cfg.n_layers, cfg.n_heads


def share_hint(values: dict[str, Any]) -> None:
    """The URL holds every control that differs from its default: show it ready to copy."""
    defaults = {"model": CONFIGURED, **TEXT_DEFAULTS}
    changed = {k: v for k, v in values.items() if v != getattr(DEFAULTS, k, defaults.get(k))}
    named = st.query_params.get(TRAINED_PARAM)  # the session's trained model, or the one its link came with
    if named:  # as the address bar names it: a student's page then says what the view was made with
        changed[TRAINED_PARAM] = named
    base = st.context.url or ""
    if base and not urlsplit(base).path:
        base += "/"
    query = urlencode({k: str(v) for k, v in changed.items()}, safe=",", quote_via=quote)  # ablate=L0H1,L2H3
    with st.sidebar.expander("Share this view", icon=":material/link:"):
        st.caption(
            "The address bar holds this whole view: copy it to share exactly what you see. This link holds the "
            "model (a trained one by its name: its weights cannot travel), the text and the removed heads alone, and "
            "opens this page without its own choices (layer and head, colours, Show, opened sections, Compare's B, "
            "Train's settings):"
        )
        link = base + ("?" + query if query else "")
        st.markdown(f"`{link}`")


def piece_cap(cfg: CheckpointConfig) -> int:
    """The most pieces of text the app runs a checkpoint on: its position table's rows, or the app's limit."""
    return min(MAX_PIECES, cfg.max_tokens)


def run_checkpoint(state: AppState, name: str, text: str, removal: Removal) -> None:
    """Config, model and trace of an installed checkpoint on the typed text, or a ConfigError saying what to fix."""
    model = pretrained_model(name)
    cfg = model.config
    state.config, state.model = cfg, model
    pieces = len(model.tokenizer.encode(text).ids)
    if pieces > piece_cap(cfg):
        raise ConfigError(
            f"The text is {pieces:,} pieces long for {pretrained_title(name)}'s tokenizer; the app shows at most "
            f"{piece_cap(cfg):,}"
            + (f" (its position table has {cfg.max_tokens:,} rows)" if cfg.max_tokens <= MAX_PIECES else "")
            + ". Shorten the text."
        )
    check_app_size(cfg, pieces)
    state.show(
        partial(cached_checkpoint_run, cfg, text, removal.heads, removal.mode),
        partial(cached_checkpoint_run, cfg, text, *NO_REMOVAL) if removal.heads else None,
    )


def compute(values: dict[str, Any], removal: Removal, shows_tokens: bool) -> None:
    """Config and traces for the pages (with and without the heads `removal` takes out), or the user-facing error
    instead. An error about the typed tokens is shown only on a page that `shows_tokens`; an impossible setting is
    shown on every page."""
    state = new_run()
    state.ablated, state.ablate_with = removal.heads, removal.mode
    trained = state.trained
    if values["model"] != CONFIGURED and trained is None:
        try:
            run_checkpoint(state, values["model"], values["tokens"], removal)
        except ConfigError as e:
            show_error(str(e), shown=shows_tokens)
        return
    try:
        cfg = ModelConfig(**{k: values[k] for k in FIELDS if k in values})
    except ConfigError as e:
        show_error(str(e))
        return
    state.config = state.sidebar_config = cfg
    try:
        if trained is None:
            target = values.get("target") if cfg.reads_target else None
            check_app_size(cfg, len(values["tokens"].split()), None if target is None else len(target.split()))
            state.model = cached_model(cfg)
            inputs = (cfg, values["tokens"], values.get("target"))
            state.show(
                partial(cached_run, *inputs, removal.heads, removal.mode),
                partial(cached_run, *inputs, *NO_REMOVAL) if removal.heads else None,
            )
        else:  # this session's own model: run here, never cached, so no other session can see it
            state.config, state.model = trained.model.config, trained.model
            state.show(
                partial(explorer.run, trained.model, values["tokens"], ablate=removal.heads, ablate_with=removal.mode),
                partial(explorer.run, trained.model, values["tokens"]) if removal.heads else None,
            )
    except ConfigError as e:
        show_error(str(e), shown=shows_tokens)


def show_error(message: str, shown: bool = True) -> None:
    """Show the sentence above the page, unless the page does not show what it is about (`shown` False)."""
    if shown:
        st.error(message, icon=":material/error:")


guard_number_urls_once()  # before any widget reads the URL: see views/query_params.py
disable_nagle_once()  # before anything is sent: see views/nodelay.py (about 40 ms per script chunk otherwise)
# An emoji favicon: a :material/: one makes the browser fetch the icon from the internet.
st.set_page_config(page_title="Attention Explorer", page_icon="🔎", layout="wide")
navigation = st.navigation([*PAGES, FIRST_PAGE_BY_NAME])
if navigation.url_path == FIRST_PAGE_BY_NAME.url_path:  # before any widget binds the query it keeps
    open_first_page()
screen_sidebar_params(model_options())
trained_banner(on_train=navigation.url_path == TRAIN_PAGE.url_path)
controls = sidebar()
trained_link_note(controls)
removal = ablation_sidebar(removable_shape(controls), NOTES_KEY)
share_hint(controls | removal.query)
show_url_notes(NOTES_KEY)
shows_tokens = navigation.url_path not in PAGES_WITHOUT_TOKENS
compute(controls, removal, shows_tokens)
if shows_tokens:  # Train trains the sidebar's model with every head
    removal_banner(removal)
try:
    navigation.run()
    write_clamped_to_url()  # a layer, head or position a link asked for beyond the page's: the one shown
finally:
    app_state().let_go()  # the page is drawn: the shared cache alone holds its trace (views/state.py)
release_ended_sessions()  # closed tabs' download buttons let go of their traces (views/ended_sessions.py)
give_back()  # what the page freed leaves the process (explorer/malloc.py)
