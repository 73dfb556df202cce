"""The dedup index's files in a folder on this host (`GOLDENSET_ANN_FOLDER`): the
`curation.dedup.index_files.IndexFiles` the service hands curation for a large pool.

Per stem (named by curation for the database, model or recipe and layout it was made for):

- `<stem>.lock`: the lock (`fcntl`, exclusive) held while the files are opened or built, so one
  process builds them and the others wait and open them;
- the graph: `<stem>.<token>.faiss` (a faiss index, memory-mapped when opened), its refinement
  codes `<stem>.<token>.refine.npy` (memory-mapped), and `<stem>.npz`, the record naming both with
  the graph's other arrays; a new token per write, the record replaced last;
- the sketch table: a folder `<stem>.<token>.sketches` of one `.npy` per array (memory-mapped),
  and the record `<stem>.sketches.json` naming it.

Every file is written under a `.partial` name and renamed into place (`os.replace`), so a process
that has the earlier one open keeps reading it; the earlier files of the stem are removed after.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray


def _faiss() -> Any:
    import faiss  # imported on first use: small pools never need it

    return faiss


def _holds(info: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    return all(info.get(name) == value for name, value in expected.items())


class IndexFolder:
    """The dedup index's files under `folder` (created when first written); see the module docstring."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def __str__(self) -> str:
        return str(self.folder)

    @contextmanager
    def locked(self, stem: str) -> Iterator[None]:
        """Hold an exclusive lock on `<stem>.lock` (created if missing): one process builds a file, the others wait and open it."""
        path = self.folder / f"{stem}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def save_graph(self, stem: str, graph: Any, refine: NDArray[np.uint8], arrays: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        """Write faiss index `graph`, its refinement codes and `arrays` with record `info` as
        `stem`, replacing any earlier one atomically."""
        faiss = _faiss()
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex[:12]
        graph_name, refine_name = f"{stem}.{token}.faiss", f"{stem}.{token}.refine.npy"
        faiss.write_index(graph, str(folder / f"{graph_name}.partial"))
        os.replace(folder / f"{graph_name}.partial", folder / graph_name)
        with (folder / f"{refine_name}.partial").open("wb") as handle:
            np.save(handle, np.ascontiguousarray(refine))
        os.replace(folder / f"{refine_name}.partial", folder / refine_name)
        meta_partial = folder / f"{stem}.npz.partial"
        with meta_partial.open("wb") as handle:
            record = {**info, "graph": graph_name, "refine": refine_name}
            contents: dict[str, Any] = {**arrays, "info": np.array(json.dumps(record))}
            np.savez(handle, **contents)
        os.replace(meta_partial, folder / f"{stem}.npz")
        for earlier in [*folder.glob(f"{stem}.*.faiss"), *folder.glob(f"{stem}.*.refine.npy")]:
            if earlier.name not in (graph_name, refine_name):
                earlier.unlink(missing_ok=True)

    def open_graph(self, stem: str, expected: Mapping[str, Any]) -> tuple[Any, NDArray[np.uint8], dict[str, NDArray[Any]], dict[str, Any]] | None:
        """The graph saved as `stem` (memory-mapped), its refinement codes (memory-mapped), its
        other arrays and its record, when the record holds `expected`; None when it is missing,
        made for something else, or unreadable."""
        try:
            with np.load(self.folder / f"{stem}.npz", allow_pickle=False) as stored:
                info = json.loads(str(stored["info"]))
                arrays = {name: stored[name] for name in stored.files if name != "info"}
        except (OSError, ValueError, KeyError):
            return None
        if not _holds(info, expected):
            return None
        faiss = _faiss()
        try:
            graph = faiss.read_index(str(self.folder / str(info["graph"])), faiss.IO_FLAG_MMAP_IFC)
            refine = np.load(self.folder / str(info["refine"]), mmap_mode="r", allow_pickle=False)
        except (RuntimeError, OSError, ValueError, KeyError):
            return None
        return graph, refine, arrays, info

    def save_table(self, stem: str, arrays: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        """Write a sketch table's `arrays` (a folder of them) with record `info` as `stem`,
        replacing any earlier one atomically."""
        folder = self.folder
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{stem}.{uuid.uuid4().hex[:12]}.sketches"
        partial = folder / f"{name}.partial"
        partial.mkdir()
        for column, values in arrays.items():
            with (partial / f"{column}.npy").open("wb") as handle:
                np.save(handle, np.ascontiguousarray(values), allow_pickle=False)
        os.replace(partial, folder / name)
        record = folder / f"{stem}.sketches.json.partial"
        record.write_text(json.dumps({**info, "folder": name}))
        os.replace(record, folder / f"{stem}.sketches.json")
        for earlier in folder.glob(f"{stem}.*.sketches"):
            if earlier.name != name:
                shutil.rmtree(earlier, ignore_errors=True)

    def open_table(self, stem: str, names: Sequence[str], expected: Mapping[str, Any]) -> tuple[dict[str, NDArray[Any]], dict[str, Any]] | None:
        """The arrays `names` of the sketch table saved as `stem` (memory-mapped) and its record,
        when the record holds `expected`; None when it is missing, made for something else, or unreadable."""
        try:
            info = json.loads((self.folder / f"{stem}.sketches.json").read_text())
            arrays = {name: np.load(self.folder / str(info["folder"]) / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in names}
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not _holds(info, expected):
            return None
        return arrays, info
