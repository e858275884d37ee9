"""JSON to the generated dataclasses and back.

Decoding follows each class's annotations, so a field typed `Task | None` becomes a
`Task`; fields the server adds later are ignored (a newer server never breaks an older
client). Each class's decoder is worked out once, from its annotations, and kept: a
field that is plain JSON (a string, a number, a list of strings) costs nothing to decode.
Encoding leaves out `None`, which the REST API reads as "not given".
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

Convert = Callable[[Any], Any]

_DECODERS: dict[type[Any], Callable[[Mapping[str, Any]], Any]] = {}


def decode(cls: type[T], data: Any) -> T:
    """`data` (parsed JSON) as an instance of the dataclass `cls`."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
    decoder = _DECODERS.get(cls)
    if decoder is None:
        decoder = _decoder(cls)
        _DECODERS[cls] = decoder
    return typing.cast(T, decoder(data))


def _decoder(cls: type[Any]) -> Callable[[Mapping[str, Any]], Any]:
    hints = typing.get_type_hints(cls)
    plain: list[tuple[str, str]] = []
    converted: list[tuple[str, str, Convert]] = []
    for f in dataclasses.fields(cls):
        key = str(f.metadata.get("json", f.name))
        convert = _converter(hints[f.name])
        if convert is None:
            plain.append((f.name, key))
        else:
            converted.append((f.name, key, convert))

    def decode_one(data: Mapping[str, Any]) -> Any:
        values = {name: data.get(key) for name, key in plain}
        for name, key, convert in converted:
            value = data.get(key)
            values[name] = None if value is None else convert(value)
        return cls(**values)

    return decode_one


def _converter(hint: Any) -> Convert | None:
    """How to turn a JSON value into `hint`'s type; `None` when it already is one."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        models = [a for a in options if dataclasses.is_dataclass(a)]
        containers = [c for c in (_converter(a) for a in options if a not in models) if c]
        if models:
            model = typing.cast(type[Any], models[0])
            return lambda v: decode(model, v) if isinstance(v, Mapping) else v
        return containers[0] if containers else None
    if origin is list:
        maybe = _converter(typing.get_args(hint)[0])
        if maybe is None:
            return None
        each: Convert = maybe
        return lambda v: [None if x is None else each(x) for x in v] if isinstance(v, list) else v
    if origin is dict:
        maybe = _converter(typing.get_args(hint)[1])
        if maybe is None:
            return None
        value: Convert = maybe
        return lambda v: (
            {k: None if x is None else value(x) for k, x in v.items()}
            if isinstance(v, Mapping)
            else v
        )
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        model = hint
        return lambda v: decode(model, v) if isinstance(v, Mapping) else v
    return None


def encode(value: Any) -> Any:
    """`value` as JSON-ready data: dataclasses as objects without their `None` fields."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            str(f.metadata.get("json", f.name)): encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, bytes):
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
