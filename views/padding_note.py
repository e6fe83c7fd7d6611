"""The sidebar's sentence when the padding mask has nothing to block: the text holds no [PAD] token, so the mask
changes no map, and a learner who chose it sees nothing happen. A token spelled like a pad ("<pad>", "[pad]", "PAD")
is an ordinary token to the configured model, which the sentence says too."""

from __future__ import annotations

import re

from explorer.config import PAD_TOKEN

# "<pad>", "[pad]", "{PAD}", "PAD", "<PAD>": a pad by another spelling; the lower-case word "pad" is left alone
LOOKS_LIKE_A_PAD = re.compile(r"^(?:[<\[{(]\s*(?i:pad)\s*[>\]})]|PAD)$")


def padding_note(mask: str, *texts: str) -> str | None:
    """What to tell someone whose mask blocks padding while the texts (the tokens, and a target) hold no pad token;
    None when the mask has something to block, or blocks no padding at all."""
    if "padding" not in mask:
        return None
    tokens = [token for text in texts for token in text.split()]
    if PAD_TOKEN in tokens:
        return None
    look_alikes = sorted({token for token in tokens if LOOKS_LIKE_A_PAD.match(token)})
    note = (
        f"The padding mask blocks {PAD_TOKEN} keys, and the text holds none, so it changes nothing yet: add "
        f"{PAD_TOKEN} tokens, e.g. `the cat sat {PAD_TOKEN} {PAD_TOKEN}`."
    )
    if look_alikes:
        spelled = ", ".join(f"`{token}`" for token in look_alikes)
        note += f" {spelled} {'is an ordinary token' if len(look_alikes) == 1 else 'are ordinary tokens'} here."
    return note
