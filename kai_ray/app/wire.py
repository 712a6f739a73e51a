"""What crosses between kai-ray's Ray processes: each call's arguments and its answer as one
``bytes`` object, pickled here by the standard library's C pickler.

Ray pickles what it is given with cloudpickle, whose pickler asks a Python hook about every
object it writes; a cycle's batches are thousands of small records (deltas, placement rounds,
answers), so that hook was most of the cost of a call. Ray passes ``bytes`` through as they are.
Everything sent is a plain record or numpy array of the model and the shard protocol: nothing
needs cloudpickle's code-by-value pickling, and a record that did would fail here, loudly.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def read_only(value: dict[Any, Any]) -> Mapping[Any, Any]:
    """A read-only view again (the class itself cannot be named in a pickle)."""
    return MappingProxyType(value)


def _read_only_map(value: Mapping[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return read_only, (dict(value),)


class _Pickler(pickle.Pickler):
    # The model's frozen maps (labels, scalar resources) are read-only views of a dict, which the
    # standard pickler refuses; they travel as their dict and come back as a view of it. A
    # dispatch table of its own, not copyreg's global one, so nothing else's pickling changes.
    dispatch_table = {**copyreg.dispatch_table, MappingProxyType: _read_only_map}


def pack(value: Any) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


def unpack(data: bytes) -> Any:
    return pickle.loads(data)  # only ever what another kai-ray process of ours packed
