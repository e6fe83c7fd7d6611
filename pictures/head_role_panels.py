"""Head roles drawn as Clark et al. 2019 draw them: one layers x heads matrix per role, and the clear roles listed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.analysis.head_roles import BROAD, ROLES, HeadRoles
from pictures.attention_panels import weight_ramp
from pictures.boards import matrix_panel

ROLE_NAMES = {  # what each role's share is, for a title and a legend; "first" depends on the model
    "first": "the first token",
    "sep": "[SEP]",
    "punct": "punctuation",
    "previous": "the previous token",
    "next": "the next token",
    "self": "itself",
    BROAD: "broad attention",
}
BREADTH = "breadth"  # the matrix of breadth rather than of a role's share


def role_name(role: str, first_token: str) -> str:
    """The role in words; "first" names the model's first token ([CLS], or a causal model's first piece)."""
    if role == "first":
        return f"the first token ({first_token})"
    return ROLE_NAMES.get(role, role)


def role_matrix(roles: HeadRoles, role: str) -> np.ndarray:
    """[L, H] the share of attention on `role` (one of ROLES), or the breadth (BREADTH)."""
    return roles.breadth if role == BREADTH else roles.share(role)


def roles_panel(
    roles: HeadRoles, role: str, first_token: str, picked: tuple[int, int] | None = None, norms: bool = False
) -> dict:
    """Layers (rows) x heads (columns), coloured by `role`'s share (0 to 1); a head without a defined share is
    grey. A click sends back {"row": layer, "col": head}. With `norms` the roles were measured on the shares of
    what each head adds (norm_shares), and the titles say so."""
    values = role_matrix(roles, role)  # [L, H]
    n_layers, n_heads = values.shape
    defined = ~np.isnan(values)  # [L, H]
    spread = "what it adds" if norms else "its attention"
    share = "share of ‖α·f(x)‖" if norms else "share"
    what = f"how broad {spread} is (1 = uniform)" if role == BREADTH else f"{share} on {role_name(role, first_token)}"
    legend = share if norms and role != BREADTH else what  # the whole of `what` would be cut at the legend's edge
    return matrix_panel(
        np.nan_to_num(values),
        defined,
        weight_ramp(None),
        name="roles",
        x_labels=[f"H{h}" for h in range(n_heads)],
        y_labels=[f"L{layer}" for layer in range(n_layers)],
        x_title="head",
        y_title="layer",
        value_title=legend,
        title=f"Every head's {what}",
        subtitle="Mean over the queries that may see such a key and another one. Click a head to open its map below.",
        masked_text="not defined for this sentence (no query has such a key)",
        value_digits=3,
        text_digits=2,
        max_px=520,
        pick="cell",
        outline=picked,
    )


def clear_roles(roles: HeadRoles, first_token: str) -> pd.DataFrame:
    """role, heads, count: the heads that clearly have each role (head_roles' label), most common role first."""
    rows = []
    for role in (*ROLES, BROAD):
        layers, heads = np.nonzero(roles.labels == role)
        if len(layers):
            names = ", ".join(f"L{layer} H{head}" for layer, head in zip(layers, heads, strict=True))
            rows.append({"role": role_name(role, first_token), "count": len(layers), "heads": names})
    table = pd.DataFrame(rows, columns=["role", "count", "heads"])
    return table.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)
