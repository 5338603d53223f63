"""Canonical JSON for payloads and the hash chain.

Sorted keys, no whitespace, UTF-8. JSON has no NaN or infinity, and a NaN in a kernel output is evidence
to record, so non-finite floats are encoded explicitly as `{"$float": "nan" | "inf" | "-inf"}` and decoded
back to floats on read. numpy scalars and arrays are accepted on the way in.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import Any

import orjson

GENESIS_HASH = "0" * 64
_NONFINITE_KEY = "$float"


def _encode(obj: Any) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return {_NONFINITE_KEY: "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if isinstance(obj, dict):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    # numpy scalars/arrays and other number-likes
    if hasattr(obj, "tolist"):
        return _encode(obj.tolist())
    if hasattr(obj, "__float__"):
        return _encode(float(obj))
    raise TypeError(f"cannot encode {type(obj).__name__} in a ledger payload")


def _decode_hook(d: dict) -> Any:
    if len(d) == 1 and _NONFINITE_KEY in d:
        return float(d[_NONFINITE_KEY])
    return d


def _has_nonfinite(obj: Any) -> bool:
    """True if a float anywhere in the payload is NaN or infinite (x - x is 0.0 only for finite x)."""
    for v in obj.values() if type(obj) is dict else obj:
        t = type(v)
        if t is float:
            if v - v != 0.0:
                return True
        elif t is dict or t is list or t is tuple:
            if _has_nonfinite(v):
                return True
    return False


def dumps(payload: Any) -> str:
    """Canonical JSON text of a payload (sorted keys, compact, explicit non-finite floats).

    Fast path: orjson on the payload as it is. Payloads holding non-finite floats (which orjson would
    silently write as null) or values orjson refuses (numpy scalars) take the explicit encoding.
    """
    if type(payload) is dict and not _has_nonfinite(payload):
        try:
            return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            pass
    return orjson.dumps(_encode(payload), option=orjson.OPT_SORT_KEYS).decode()


def loads(text: str) -> Any:
    if _NONFINITE_KEY not in text:
        return orjson.loads(text)
    return json.loads(text, object_hook=_decode_hook)


def chain_hash(
    prev_hash: str, seq: int, stream_id: str, version: int, event_id: str, type_: str, payload: str, recorded_at: str
) -> str:
    """sha256(prev_hash ‖ seq ‖ stream_id ‖ version ‖ event_id ‖ type ‖ payload ‖ recorded_at), fields joined by 0x1F."""
    material = f"{prev_hash}\x1f{seq}\x1f{stream_id}\x1f{version}\x1f{event_id}\x1f{type_}\x1f{payload}\x1f{recorded_at}"
    return _sha256(material.encode()).hexdigest()


_sha256 = hashlib.sha256


def new_event_id() -> str:
    """A random (version 4) UUID, formatted without the uuid module's overhead."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def utc_timestamp() -> str:
    """UTC now as ISO-8601 with microseconds and a Z (the exact text that is hashed)."""
    now = time.time()
    seconds = int(now)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{int((now - seconds) * 1e6):06d}Z"
