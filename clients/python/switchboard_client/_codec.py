"""JSON to the generated dataclasses and back.

Decoding follows each class's annotations, so a field typed `Task | None` becomes a
`Task`; fields the server adds later are ignored (a newer server never breaks an older
client). Encoding leaves out `None`, which the REST API reads as "not given".
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


_FIELDS: dict[type[Any], tuple[tuple[str, str, Any], ...]] = {}


def _fields(cls: type[Any]) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, JSON name, annotation) per field, resolved once per class."""
    known = _FIELDS.get(cls)
    if known is None:
        hints = typing.get_type_hints(cls)
        known = tuple(
            (f.name, str(f.metadata.get("json", f.name)), hints[f.name])
            for f in dataclasses.fields(cls)
        )
        _FIELDS[cls] = known
    return known


def decode(cls: type[T], data: Any) -> T:
    """`data` (parsed JSON) as an instance of the dataclass `cls`."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
    values = {name: _convert(hint, data.get(key)) for name, key, hint in _fields(cls)}
    return cls(**values)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is type(None):
                continue
            if dataclasses.is_dataclass(arg) and isinstance(value, Mapping):
                return decode(typing.cast(type[Any], arg), value)
            if typing.get_origin(arg) in (list, dict):
                return _convert(arg, value)
        return value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(hint)
        return [_convert(item, v) for v in value]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(hint)
        return {k: _convert(item, v) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return decode(hint, value)
    return value


def encode(value: Any) -> Any:
    """`value` as JSON-ready data: dataclasses as objects without their `None` fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            str(f.metadata.get("json", f.name)): encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Sequence):
        return [encode(v) for v in value]
    return value


def body(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A request body from a method's keyword arguments: `None` means not given."""
    return {k: encode(v) for k, v in fields.items() if v is not None}


def query(fields: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters: booleans as the server reads them, `None` left out."""
    out: dict[str, str] = {}
    for key, value in fields.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out
