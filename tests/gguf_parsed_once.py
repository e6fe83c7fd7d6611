"""transformers' reading of a GGUF file, with the file parsed once per test process (test helper).

Loading SmolLM2's model and tokenizer from the GGUF with transformers parsed the whole file three times with gguf's
GGUFReader (for its config, its tensors, then its tokenizer: a 49,152-piece vocabulary and its merges, slice by
slice), and built gguf's tensor name map 397 times (once per submodule of the model): 15 s of CPU, 5 s with each done
once. Both are pure functions of a file that does not change and of (architecture, layers); transformers only reads
what they return. Inside `gguf_parsed_once()`, transformers gets the same objects again instead of new ones: every
number is still transformers' and gguf's own reading of the file, not the explorer's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import gguf
import pytest

_parsed = functools.cache(gguf.GGUFReader)  # (path, mode) -> the reader: a read-only memory map of the file
_name_map = functools.cache(gguf.get_tensor_name_map)  # (arch, n_blocks) -> gguf's table of tensor names


@contextlib.contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """While the block runs, gguf.GGUFReader and gguf.get_tensor_name_map (which transformers imports from gguf at
    each call) return what they returned for the same arguments before, in this process. Only for transformers'
    calls: the explorer's own reader subclasses gguf.GGUFReader, so no explorer code runs inside the block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", _parsed)
        patch.setattr(gguf, "get_tensor_name_map", _name_map)
        yield
