"""kcoord's own message definition language.

A message is a list of fields; each field names its wire type and the versions that carry it.
The language is deliberately small and close to the wire:

    f("session_timeout_ms", "int32")                        # in every version
    f("rebalance_timeout_ms", "int32", "1+", default=-1, ign=True)
    f("group_instance_id", "string", "5+", null="5+")       # nullable from v5 on
    array("protocols", "JoinGroupRequestProtocol", "0+", [f("name", "string"), f("metadata", "bytes")])
    struct("assignment", ASSIGNMENT, "0+", null="0+")       # a single (optionally nullable) struct
    f("reason", "string", "8+", tag=0, tagged="8+")         # a tagged field (flexible versions only)

Version ranges are written as Kafka writes them: "0+", "3-5", "7", "none".
Field names are snake_case; the generator turns them into attributes of the decoded objects.
Primitive types: bool int8 int16 uint16 int32 uint32 int64 float64 uuid string bytes records, and arrays of
them written "[]int32". Structs are declared inline (array/struct with a field list) or once as a `Struct`
value shared by several fields.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field

PRIMITIVES = (
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "uuid", "string", "bytes", "records",
)
INT_TYPES = ("int8", "int16", "uint16", "int32", "uint32", "int64")
ZERO_UUID = b"\x00" * 16

_MISSING = object()


@dataclass(frozen=True)
class Versions:
    """A closed range of versions; hi is None for an open range ("3+"), lo > hi for "none"."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v and (self.hi is None or v <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.lo > self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]

    def walk(self) -> Iterator[Struct]:
        """This struct and every struct nested in it, depth first, each once."""
        yield self
        for fld in self.fields:
            if fld.struct is not None:
                yield from fld.struct.walk()


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a primitive, "[]primitive", or the struct's name ("[]Name" for arrays of structs)
    versions: Versions
    nullable: Versions
    default: object
    ignorable: bool
    tag: int | None
    tagged: Versions
    flexible: Versions | None  # a field-level override of the message's flexible versions
    struct: Struct | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def present(self, v: int) -> bool:
        return v in self.versions

    def is_tagged(self, v: int) -> bool:
        return self.tag is not None and v in self.tagged

    def is_nullable(self, v: int) -> bool:
        return v in self.nullable

    def python_default(self):
        """The value a decoded object holds when the version does not carry the field."""
        if self.default is not _MISSING:
            return self.default
        if self.is_array:
            return []
        t = self.type
        if self.struct is not None:
            return None  # a struct default is built by the generated class
        if t in INT_TYPES:
            return 0
        if t == "float64":
            return 0.0
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t in ("bytes", "records"):
            return b""
        if t == "uuid":
            return ZERO_UUID
        raise ValueError(f"no default for type {t}")

    @property
    def has_explicit_default(self) -> bool:
        return self.default is not _MISSING


@dataclass(frozen=True)
class Message:
    name: str  # e.g. "JoinGroupRequest"
    kind: str  # "request", "response", "header" or "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]
    notes: str = ""
    structs: tuple[Struct, ...] = dc_field(default=())

    @property
    def root(self) -> Struct:
        return Struct(self.name, self.fields)

    @property
    def versions(self) -> range:
        assert self.valid.hi is not None
        return range(self.valid.lo, self.valid.hi + 1)

    def is_flexible(self, v: int) -> bool:
        return v in self.flexible


def f(
    name: str,
    type: str,
    versions: str = "0+",
    *,
    null: str = "none",
    default: object = _MISSING,
    ign: bool = False,
    tag: int | None = None,
    tagged: str = "none",
    flex: str | None = None,
) -> Field:
    """A field of a primitive type or an array of primitives."""
    if type.removeprefix("[]") not in PRIMITIVES:
        raise ValueError(f"{name}: unknown primitive type {type!r}; use array()/struct() for structs")
    return Field(
        name, type, Versions.parse(versions), Versions.parse(null), default, ign, tag,
        Versions.parse(tagged), None if flex is None else Versions.parse(flex),
    )


def _struct_field(name, struct_name, versions, fields, is_array, null, ign, tag, tagged, default):
    if isinstance(struct_name, Struct):
        st = struct_name
    else:
        if fields is None:
            raise ValueError(f"{name}: struct {struct_name} needs its fields")
        st = Struct(struct_name, tuple(fields))
    return Field(
        name, ("[]" if is_array else "") + st.name, Versions.parse(versions), Versions.parse(null),
        default, ign, tag, Versions.parse(tagged), None, st,
    )


def array(
    name: str,
    struct_name: str | Struct,
    versions: str = "0+",
    fields: Sequence[Field] | None = None,
    *,
    null: str = "none",
    ign: bool = False,
    tag: int | None = None,
    tagged: str = "none",
    default: object = _MISSING,
) -> Field:
    """An array of structs."""
    return _struct_field(name, struct_name, versions, fields, True, null, ign, tag, tagged, default)


def struct(
    name: str,
    struct_name: str | Struct,
    versions: str = "0+",
    fields: Sequence[Field] | None = None,
    *,
    null: str = "none",
    ign: bool = False,
    tag: int | None = None,
    tagged: str = "none",
    default: object = _MISSING,
) -> Field:
    """A single struct (nullable where `null` says so)."""
    return _struct_field(name, struct_name, versions, fields, False, null, ign, tag, tagged, default)


def _message(kind, api_key, name, valid, flex, fields, notes=""):
    return Message(
        name, kind, api_key, Versions.parse(valid), Versions.parse(flex), tuple(fields), notes
    )


def request(api_key: int, name: str, valid: str, flex: str, fields: Sequence[Field], notes: str = "") -> Message:
    return _message("request", api_key, name + "Request", valid, flex, fields, notes)


def response(api_key: int, name: str, valid: str, flex: str, fields: Sequence[Field], notes: str = "") -> Message:
    return _message("response", api_key, name + "Response", valid, flex, fields, notes)


def header(name: str, valid: str, flex: str, fields: Sequence[Field]) -> Message:
    return _message("header", None, name, valid, flex, fields)


def data(name: str, valid: str, flex: str, fields: Sequence[Field], notes: str = "") -> Message:
    """An embedded or stored structure: consumer protocol bytes, coordinator records."""
    return _message("data", None, name, valid, flex, fields, notes)
