"""The peak of Python's own allocations (numpy's arrays included) inside a block, for tests that bound memory."""

from __future__ import annotations

import tracemalloc
from types import TracebackType


class TracedPeak:
    """`with TracedPeak() as traced:` traces allocations in the block; `traced.peak` is then their peak in bytes."""

    peak: int = 0

    def __enter__(self) -> TracedPeak:
        tracemalloc.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
