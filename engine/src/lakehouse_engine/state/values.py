"""JSON encoding of key values for checkpoints, keeping exact types.

Chunk boundaries are database values (BIGINT UNSIGNED ints, Decimals, collated strings, dates);
they must round-trip exactly, so each is tagged with its type.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any


def encode(value: Any) -> list[Any]:
    if value is None:
        return ["none", None]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]  # str: JSON readers may round big ints through floats
    if isinstance(value, Decimal):
        return ["dec", str(value)]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, (bytes, bytearray)):
        return ["bytes", base64.b64encode(bytes(value)).decode("ascii")]
    if isinstance(value, dt.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, dt.date):
        return ["date", value.isoformat()]
    if isinstance(value, dt.timedelta):
        return ["timedelta", [value.days, value.seconds, value.microseconds]]
    raise TypeError(f"cannot encode key value of type {type(value).__name__}")


def decode(raw: list[Any]) -> Any:
    tag, value = raw
    decoders: dict[str, Callable[[Any], Any]] = {
        "none": lambda v: None,
        "bool": bool,
        "int": int,
        "dec": Decimal,
        "float": float,
        "str": str,
        "bytes": base64.b64decode,
        "datetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    }
    if tag not in decoders:
        raise ValueError(f"unknown key value tag {tag!r}")
    return decoders[tag](value)


def encode_key(key: tuple[Any, ...] | None) -> list[list[Any]] | None:
    return None if key is None else [encode(v) for v in key]


def decode_key(raw: list[list[Any]] | None) -> tuple[Any, ...] | None:
    return None if raw is None else tuple(decode(v) for v in raw)
