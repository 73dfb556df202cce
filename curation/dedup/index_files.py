"""Where the dedup index of a large pool keeps its files between loads: the protocol curation is
handed (the service's is `embedding.index_files.IndexFolder`, a folder on this host). Without one,
every load builds the index in memory.

Two kinds of files are kept, each named by a stem that says what it was made for (the database,
the model or the MinHash recipe, the layout): the approximate search's graph with its arrays, and
the sketch table's arrays. Each is written whole and replaces the earlier one atomically (a
process that has the earlier one open keeps reading it), opened memory-mapped, and opened only
when its record holds every fact the caller expects. Building one happens under the stem's lock,
so one process builds while the others wait and then open it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

Arrays = dict[str, NDArray[Any]]
StoredGraph = tuple[Any, NDArray[np.uint8], Arrays, dict[str, Any]]
"""A graph read back: the faiss index, its refinement codes, its other arrays and its record."""
StoredTable = tuple[Arrays, dict[str, Any]]
"""A sketch table read back: its arrays by name and its record."""


class IndexFiles(Protocol):
    """The files of a large pool's dedup index (see the module docstring)."""

    def locked(self, stem: str) -> AbstractContextManager[None]:
        """Hold the exclusive lock of the files named `stem` (other processes wait for it)."""
        ...

    def save_graph(self, stem: str, graph: Any, refine: NDArray[np.uint8], arrays: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        """Write faiss index `graph`, its refinement codes and `arrays` with record `info` as `stem`."""
        ...

    def open_graph(self, stem: str, expected: Mapping[str, Any]) -> StoredGraph | None:
        """The graph saved as `stem`, memory-mapped, when its record holds `expected`; None when it
        is missing, made for something else, or unreadable."""
        ...

    def save_table(self, stem: str, arrays: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        """Write a sketch table's `arrays` with record `info` as `stem`."""
        ...

    def open_table(self, stem: str, names: Sequence[str], expected: Mapping[str, Any]) -> StoredTable | None:
        """The arrays `names` of the sketch table saved as `stem`, memory-mapped, when its record
        holds `expected`; None when it is missing, made for something else, or unreadable."""
        ...
