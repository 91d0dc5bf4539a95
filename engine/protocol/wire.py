"""Conversion between frozen dataclasses and their wire forms: JSON bodies and extFields headers.

How this works: wire values are `@dataclass(frozen=True, slots=True)` classes with snake_case
fields.  A field's wire name is its camelCase form (`consumer_group` -> `consumerGroup`)
unless `wire_name("clientID")` says otherwise.  The same per-class field table serves two
encodings:

* bodies (`to_json`/`from_json`): nested dataclasses, lists, sets, dicts whose keys may be
  ints or dataclasses (written as fastjson object keys), enums by name; `None` omitted, and
  JSON null read only where the type is Optional (elsewhere it is a `BodyError`);
* custom headers (`to_ext`/`from_ext`): flat `dict[str, str]` as Java's
  `makeCustomHeaderToNet` writes it, parsed leniently as `decodeCommandCustomHeader` does,
  except that a missing required field (one without a default) raises `HeaderError`.

Integers are Java's: a field typed `Int32` is a Java `int`, any other `int` a Java `long`;
a value outside that range is refused where it is parsed (`HeaderError` / `BodyError`),
so no out-of-range number gets past decoding.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar, Union

import orjson

from engine.protocol.errors import BodyError, HeaderError
from engine.protocol.fastjson import ObjectKey

T = TypeVar("T")

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_JAVA_INT = "Java int"
#: A field holding a Java `int` (plain `int` fields hold a Java `long`).
Int32 = Annotated[int, _JAVA_INT]

_MISSING = dataclasses.MISSING


def wire_name(name: str, default: Any = _MISSING, **kwargs: Any) -> Any:
    """A dataclass field whose wire name is not the camelCase of its Python name."""
    if default is not _MISSING:
        kwargs["default"] = default
    return dataclasses.field(metadata={"wire": name}, **kwargs)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    attr: str
    wire: str
    hint: Any
    required: bool
    default: Any
    #: extFields text -> value, built once per field (headers are decoded on hot paths).
    parse: Callable[[str], Any]
    is_text: bool
    render: Callable[[Any], str]
    #: A list, set or map field not declared Optional: JSON null is refused.
    no_null: bool = False


def _fields(cls: type) -> tuple[_Field, ...]:
    """The wire table of a dataclass, computed once per class."""
    table = _FIELD_TABLES.get(cls)
    if table is None:
        table = _FIELD_TABLES[cls] = _build_fields(cls)
    return table


_FIELD_TABLES: dict[type, tuple[_Field, ...]] = {}
_CONTAINERS = (list, tuple, set, frozenset, dict, Mapping)


def _build_fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    extras = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        required = f.default is _MISSING and f.default_factory is _MISSING
        default = f.default if f.default is not _MISSING else None
        wire = f.metadata.get("wire", camel(f.name))
        base = _strip_optional(hints[f.name])
        java_int = _JAVA_INT in getattr(_strip_optional(extras[f.name]), "__metadata__", ())
        no_null = base is hints[f.name] and (typing.get_origin(base) or base) in _CONTAINERS
        out.append(_Field(f.name, wire, hints[f.name], required, default,
                          _ext_parser(f"{cls.__name__}.{wire}", base, java_int),
                          base is str, _ext_renderer(base), no_null))
    return tuple(out)


def _ext_renderer(hint: Any) -> Callable[[Any], str]:
    """How a field's value is written into extFields (Java's `toString`)."""
    if hint is str:
        return str
    if hint is int:
        return lambda v: v if type(v) is str else str(v)
    return _ext_text


def _ext_parser(where: str, hint: Any, java_int: bool = False) -> Callable[[str], Any]:
    """How one extFields value becomes the field's type, as Java's header decoding reads it."""
    if hint is str:
        return str
    if hint is bool:
        return lambda raw: raw.strip().lower() == "true"  # Boolean.parseBoolean
    if hint is int:
        low, high, kind = (
            (INT32_MIN, INT32_MAX, "int") if java_int else (INT64_MIN, INT64_MAX, "long")
        )

        def parse_int(raw: str) -> int:
            try:
                value = int(raw)
            except ValueError:
                raise HeaderError(f"{where}: {raw[:64]!r} is not a valid {kind}") from None
            if not low <= value <= high:
                raise HeaderError(f"{where}: {raw[:64]} is out of range for a Java {kind}")
            return value
        return parse_int
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        enum_cls = hint

        def parse_enum(raw: str) -> enum.Enum:
            try:
                return _enum(enum_cls, raw, where)
            except BodyError as exc:
                raise HeaderError(str(exc)) from None
        return parse_enum
    return lambda raw: _scalar(hint, raw, where, HeaderError)


def _strip_optional(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


# ---------------------------------------------------------------------------- JSON bodies


def to_json(value: Any) -> Any:
    """Turn a dataclass (or container of them) into plain JSON values for `fastjson.dumps`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in _fields(type(value)):
            v = getattr(value, f.attr)
            if v is not None:
                out[f.wire] = to_json(v)
        return out
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Mapping):
        return {_json_key(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=lambda item: orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
    return value


def _json_key(key: Any) -> Any:
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        return ObjectKey(to_json(key))
    if isinstance(key, enum.Enum):
        return key.name
    return key


def from_json(cls: type[T], value: Any) -> T:
    """Build `cls` from parsed JSON, leniently: unknown keys ignored, missing ones defaulted.

    Raises:
        BodyError: a value has the wrong shape for its field.
    """
    result: T = _convert(cls, value, cls.__name__)
    return result


def _convert(hint: Any, value: Any, where: str) -> Any:
    return _converter(hint)(value, where)


#: Converts one parsed JSON value to a type: ``convert(value, where)``.
_Converter = Callable[[Any, str], Any]
#: Type hint -> its converter, built once: deciding from the hint what a value must be
#: (`typing.get_origin`, `is_dataclass`, ...) for every value of a big body (a broker's
#: 10,000 topic configs) cost more than the conversion itself.
_CONVERTERS: dict[Any, _Converter] = {}


def _converter(hint: Any) -> _Converter:
    try:
        found = _CONVERTERS.get(hint)
    except TypeError:  # an unhashable hint: built each time
        return _build_converter(hint)
    if found is None:
        found = _CONVERTERS[hint] = _build_converter(hint)
    return found


def _build_converter(hint: Any) -> _Converter:
    nullable, base = _nullable(hint), _strip_optional(hint)
    inner = _inner_converter(base)

    def convert(value: Any, where: str) -> Any:
        if value is None:  # only where the type says Optional: no None reaches a typed field
            if nullable:
                return None
            raise BodyError(f"{where}: null where {_expected(base)} is expected")
        return inner(value, where)
    return convert


def _inner_converter(hint: Any) -> _Converter:
    """The converter of a non-None value to `hint` (not Optional)."""
    if hint is Any:
        return lambda value, where: value
    origin = typing.get_origin(hint)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple, set, frozenset):
        return _array_converter(hint, origin)
    if origin is dict or hint is dict or origin is Mapping:
        return _object_converter(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass_converter(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        enum_cls = hint
        return lambda value, where: _enum(enum_cls, value, where)
    return _scalar_converter(hint)


def _array_converter(hint: Any, origin: Any) -> _Converter:
    args = typing.get_args(hint)
    item = args[0] if args else Any
    no_null_item = item is _strip_optional(item) and item is not Any
    container = origin or hint
    item_of = _converter(item)

    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise BodyError(f"{where}: expected a JSON array, got {type(value).__name__}")
        if None in value and no_null_item:
            raise BodyError(f"{where}: null item in a JSON array")
        items = [item_of(v, where) for v in value]
        return container(items) if container is not list else items
    return convert


def _object_converter(hint: Any) -> _Converter:
    args = typing.get_args(hint)
    key_hint, val_hint = args if args else (Any, Any)
    key_of, value_of = _key_converter(key_hint), _converter(val_hint)

    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise BodyError(f"{where}: expected a JSON object, got {type(value).__name__}")
        return {key_of(k, where): value_of(v, where) for k, v in value.items()}
    return convert


def _dataclass_converter(cls: type) -> _Converter:
    # The fields' converters are made on first use: a dataclass may hold itself.
    plan: list[tuple[str, str, _Converter, bool, bool, Any]] = []

    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, Mapping):
            raise BodyError(f"{where}: expected an object for {cls.__name__}")
        if not plan:
            plan.extend((f.wire, f.attr, _converter(f.hint), f.no_null, f.required, f.hint)
                        for f in _fields(cls))
        kwargs = {}
        for wire, attr, field_of, no_null, required, hint in plan:
            if wire in value:
                v = value[wire]
                if v is None and no_null:
                    raise BodyError(f"{where}.{wire}: null where a JSON array or object "
                                    "is expected")
                kwargs[attr] = field_of(v, f"{where}.{wire}")
            elif required:
                kwargs[attr] = _zero(hint)
        return cls(**kwargs)
    return convert


def _scalar_converter(hint: Any) -> _Converter:
    """`_scalar`, with the common case (the value has the type already) first."""
    if hint is str:
        return lambda value, where: (value if type(value) is str
                                     else _scalar(str, value, where, BodyError))
    if hint is int:
        return lambda value, where: (
            value if type(value) is int and INT64_MIN <= value <= INT64_MAX
            else _scalar(int, value, where, BodyError))
    if hint is bool:
        return lambda value, where: (value if type(value) is bool
                                     else _scalar(bool, value, where, BodyError))
    return lambda value, where: _scalar(hint, value, where, BodyError)


def _nullable(hint: Any) -> bool:
    return hint is Any or (typing.get_origin(hint) in (Union, types.UnionType)
                           and type(None) in typing.get_args(hint))


def _expected(hint: Any) -> str:
    origin = typing.get_origin(hint) or hint
    if origin in (list, tuple, set, frozenset):
        return "a JSON array"
    if origin in (dict, Mapping):
        return "a JSON object"
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return f"an object for {hint.__name__}"
    name = str(getattr(hint, "__name__", hint))
    return f"{'an' if name[:1].lower() in 'aeio' else 'a'} {name}"


def _key_converter(hint: Any) -> _Converter:
    """The converter of a map key: a dataclass key may come as its JSON text (standard JSON)
    or as an object (fastjson's object keys)."""
    hint = _strip_optional(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        cls, of = hint, _converter(hint)

        def convert(key: Any, where: str) -> Any:
            if isinstance(key, str):  # standard-JSON form: the key object's JSON, quoted
                try:
                    key = orjson.loads(key)
                except orjson.JSONDecodeError:
                    raise BodyError(f"{where}: map key {key!r} is not a {cls.__name__}"
                                    ) from None
            if type(key) is ObjectKey:
                return of(key.as_dict(), where)
            return of(dict(key) if isinstance(key, Mapping) else key, where)
        return convert
    return _converter(hint)


def _zero(hint: Any) -> Any:
    hint = _strip_optional(hint)
    origin = typing.get_origin(hint) or hint
    zeros: dict[Any, Any] = {int: 0, float: 0.0, bool: False, str: "", list: [], dict: {},
                             set: set(), frozenset: frozenset(), tuple: ()}
    return zeros.get(origin)


def _enum(cls: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    """Enums arrive by name or by number (ordinal), as clients in the wild send them."""
    if isinstance(value, str):
        member = cls.__members__.get(value)
        if member is not None:
            return member
        if value.lstrip("-").isdigit():
            value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return cls(value)
        except ValueError:
            members = list(cls)
            if 0 <= value < len(members):
                return members[value]
    raise BodyError(f"{where}: {value!r} is not a {cls.__name__}")


def _scalar(hint: Any, value: Any, where: str, error: type[Exception]) -> Any:
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return value.strip().lower() == "true"  # Java Boolean.parseBoolean
        if isinstance(value, int):
            return value != 0
    elif hint is int:
        if isinstance(value, bool):
            return int(value)
        if not isinstance(value, int):
            try:
                value = int(value)
            except (TypeError, ValueError, OverflowError):
                raise error(f"{where}: {str(value)[:64]!r} is not a valid long") from None
        if INT64_MIN <= value <= INT64_MAX:
            return value
        raise error(f"{where}: {value} is out of range for a Java long")
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    elif hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
    else:
        return value
    raise error(f"{where}: {value!r} is not a valid {getattr(hint, '__name__', hint)}")


# ---------------------------------------------------------------------------- extFields headers


def _ext_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def to_ext(header: Any) -> dict[str, str]:
    """Write a header dataclass as extFields: wire names, string values, nulls omitted."""
    out: dict[str, str] = {}
    for f in _fields(type(header)):
        v = getattr(header, f.attr)
        if v is not None:
            out[f.wire] = f.render(v)
    return out


def from_ext(cls: type[T], ext: Mapping[str, str] | None) -> T:
    """Read a header dataclass from extFields; extra keys are ignored.

    Raises:
        HeaderError: a required field is missing or a value does not parse as its type.
    """
    ext = ext or {}
    kwargs: dict[str, Any] = {}
    for f in _fields(cls):
        raw = ext.get(f.wire)
        if raw is None or (not raw and not f.is_text):
            if f.required:
                raise HeaderError(f"{cls.__name__}: required field '{f.wire}' is missing")
            continue
        kwargs[f.attr] = f.parse(raw)
    return cls(**kwargs)
