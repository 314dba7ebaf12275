"""How :class:`~finalfusion.Embeddings` pickle and copy.

Embeddings mapped from a path pickle as a reference to their file (a few
hundred bytes) and are mapped again on unpickling, after checking that the
file is the same (:mod:`finalfusion._fileref`); those loaded from a URL with
``mmap=True`` (rows left at the server) pickle as the URL and its checks and
open it again; if their metadata changed
since, or they were never mapped, they pickle by value. The query index is
a cache of one object: never pickled or copied. The approximate-neighbour
index of ``set_index`` is pickled with the embeddings, as its own type
decides (a saved :class:`finalfusion.ann.AnnIndex`: a reference to its
directory), and checked against the unpickled embeddings on their first
query. ``copy.copy`` and ``copy.deepcopy`` never touch the file.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from finalfusion._fileref import FileRef, UrlRef
from finalfusion._load import remap_parts

if TYPE_CHECKING:
    from typing_extensions import Self

    from finalfusion.metadata import Metadata

__all__ = ["PicklingMixin", "from_file_ref"]

_M = TypeVar("_M", bound="PicklingMixin")


class PicklingMixin:
    """Pickling and copies for a base class of :class:`~finalfusion.Embeddings`."""

    #: The mapped (or remote) file the object was read from, if it pickles by reference.
    _file_ref: FileRef | UrlRef | None
    _metadata: Metadata | None

    if TYPE_CHECKING:  # provided by Embeddings

        def _reset_query_index(self) -> None: ...

    def _by_reference(self) -> FileRef | UrlRef | None:
        """The file reference to pickle, unless the embeddings differ from the mapped file."""
        ref = self.__dict__.get("_file_ref")
        if ref is None:
            return None
        meta = self._metadata
        if meta is not None:
            source = getattr(meta, "_source", None)
            if source is None or source[1] != meta.data:
                return None
        return ref  # type: ignore[no-any-return]

    def __reduce_ex__(self, protocol: Any) -> Any:
        ref = self._by_reference()
        if ref is not None:
            ann = self.__dict__.get("_ann")
            return (from_file_ref, (type(self), ref)) if ann is None else (from_file_ref, (type(self), ref), {"_ann": ann})
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_file_ref"] = None
        # The query index is a cache of this object: never pickled or copied.
        state.pop("_query", None)
        state.pop("_query_lock", None)
        state.pop("_ann_checked", None)  # which indexes were checked: per object, weak
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset_query_index()

    def __copy__(self) -> Self:
        new = type(self).__new__(type(self))
        new.__setstate__({**self.__getstate__(), "_file_ref": self.__dict__.get("_file_ref")})
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new


def from_file_ref(make: Callable[..., _M], ref: FileRef | UrlRef) -> _M:
    """Unpickle mapped (or remote) embeddings of class ``make``: map (open) the referenced file again after checking it is the same."""
    emb = make(*remap_parts(ref))
    emb._file_ref = ref
    return emb
