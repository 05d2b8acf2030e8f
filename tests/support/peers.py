"""Two independent Kafka codecs as test peers, fed from kcoord objects: kafka-python 3 and kio.

`KAFKA_PYTHON` drives kafka-python's schema-driven `kafka.protocol` classes (one mutable class per message,
the version given at encode time); `KIO` drives kio's generated frozen dataclasses (one module per version)
through `kio.serial`. Both convert a kcoord object by walking kcoord's own definition at the version, so
every field the version carries is carried over and a field one side lacks fails loudly.

A peer may represent only part of a type's domain (kio's error codes are an enum, its durations
`timedelta`s, its timestamps non-negative `datetime`s); `Peer.random_message` draws values the peer can
hold, so that golden tests compare codecs rather than value models.

Both model "this tagged field is absent" as a value of their own in a few places, where Kafka (and kcoord)
leave out a tagged field whose value equals its schema default: kafka-python writes every tagged struct that
is not None (even one equal to the default struct), kio writes a tagged uuid that is not None (even the zero
uuid). The adapters hand them their "absent" value for exactly those fields at their default, and nothing
else, so that a default kcoord gets wrong still shows up as different bytes.

`records` fields (Produce, Fetch) are opaque bytes to kcoord and to both peers (kafka-python's `Bytes`,
kio's `Records`, a phantom of `bytes`), so random bytes go through as they are.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime
import importlib
import io
import random
import re
import types
import typing
import uuid
import warnings
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta

from kcoord.protocol.dsl import Field, Message, Struct

from .values import ValueMaker, random_message

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its JSON schemas at import time through deprecated importlib.resources calls.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.protocol import admin, consumer, metadata, producer, sasl
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas.fields.base import BaseField
    from kafka.protocol.schemas.fields.codecs import BitField


class Peer(abc.ABC):
    """A codec kcoord's bytes are checked against."""

    name: str
    # Hand the peer its own "absent" value for a tagged field at its Kafka default where the peer needs it (see
    # the module doc); False feeds such fields literally, to show the peer would then write them.
    omit_tagged_defaults = True

    @abc.abstractmethod
    def supports(self, msg: Message, version: int) -> bool:
        """Whether this peer can encode `msg` at `version`."""

    @abc.abstractmethod
    def convert(self, msg: Message, version: int, obj: Any) -> Any:
        """The peer's object holding the same values as the kcoord object `obj`."""

    @abc.abstractmethod
    def encode(self, peer_obj: Any, version: int) -> bytes:
        """The peer's body encoding of one of its objects."""

    def random_message(self, msg: Message, version: int, rng: random.Random) -> Any:
        """A random kcoord object whose values this peer can represent (no unknown tagged fields)."""
        return random_message(msg, version, rng, unknown_tags=False)


def _at_default(fld: Field, value: Any) -> bool:
    """Whether `value` is `fld`'s default: the value Kafka leaves out when the field is tagged."""
    if fld.struct is not None and not fld.is_array:
        return value == type(value)()
    return value == fld.python_default()


# ---------------------------------------------------------------------------------------------- kafka-python

KP_MODULES = (metadata, consumer, admin, producer, sasl)
# kafka-python patches some schemas (`json_patch`): a few int32 bitfields are renamed and hold a set of bits.
KP_RENAMED = {"cluster_authorized_operations": "authorized_operations",
              "topic_authorized_operations": "authorized_operations"}


class KafkaPython(Peer):
    """kafka-python 3's `kafka.protocol` message classes.

    kafka-python accepts every version from 0 up to its schema's newest, also below the `validVersions` its
    bundled Kafka 4 JSON declares (it leaves version negotiation to ApiVersions). Those JSON files still
    describe the removed versions field by field (OffsetCommit v0-1 and OffsetFetch v0 are identical to
    the shared Kafka schemas), so the old versions are fair golden peers too.
    """

    name = "kafka_python"

    def __init__(self) -> None:
        self._layouts: dict[tuple[type, int], tuple[tuple[Field, str, BaseField], ...]] = {}

    def message_class(self, msg: Message) -> type[ApiMessage] | None:
        return next((getattr(m, msg.name) for m in KP_MODULES if hasattr(m, msg.name)), None)

    def supports(self, msg: Message, version: int) -> bool:
        cls = self.message_class(msg)
        return cls is not None and cls.min_version <= version <= cls.max_version

    def convert(self, msg: Message, version: int, obj: Any) -> ApiMessage:
        cls = self.message_class(msg)
        assert cls is not None, f"kafka-python has no {msg.name}"
        return cls(version=version, **self._fields(msg.root, cls, obj, version))

    def encode(self, peer_obj: ApiMessage, version: int) -> bytes:
        return bytes(peer_obj.encode(version=version))

    def _layout(self, st: Struct, cls: type, version: int) -> tuple[tuple[Field, str, BaseField], ...]:
        """(our field, kafka-python's name, kafka-python's field) for every field `version` carries."""
        key = (cls, version)
        if key not in self._layouts:
            theirs = {n: f for n, f in cls._struct.fields.items() if f.for_version_q(version)}
            ours = [(fld, KP_RENAMED.get(fld.name, fld.name)) for fld in st.fields if fld.present(version)]
            names = sorted(n for _, n in ours)
            assert names == sorted(theirs), f"{st.name} v{version}: ours {names}, kafka-python {sorted(theirs)}"
            self._layouts[key] = tuple((fld, n, theirs[n]) for fld, n in ours)
        return self._layouts[key]

    def _fields(self, st: Struct, cls: type, obj: Any, version: int) -> dict[str, Any]:
        return {name: self._value(fld, theirs, getattr(obj, fld.name), version)
                for fld, name, theirs in self._layout(st, cls, version)}

    def _value(self, fld: Field, theirs: BaseField, value: Any, version: int) -> Any:
        if value is None:
            return None
        if (self.omit_tagged_defaults and fld.is_tagged(version) and theirs.default is None
                and not fld.is_nullable(version) and _at_default(fld, value)):
            # kafka-python's default for a tagged struct or a uuid without a JSON default is None: it writes any
            # other value, the default struct and the zero uuid included, which Kafka leaves out.
            return None
        if fld.struct is not None:
            cls = theirs.data_class
            if fld.is_array:
                return [cls(**self._fields(fld.struct, cls, item, version)) for item in value]
            return cls(**self._fields(fld.struct, cls, value, version))
        if getattr(theirs, "_type", None) is BitField:
            return {bit for bit in range(32) if value >> bit & 1}
        if fld.elem == "uuid":
            return [uuid.UUID(bytes=u) for u in value] if fld.is_array else uuid.UUID(bytes=value)
        return list(value) if fld.is_array else value


# ------------------------------------------------------------------------------------------------------ kio

# kio's duration fields drop Kafka's "Ms" suffix (throttle_time_ms is `throttle_time`, a timedelta).
KIO_DURATIONS = {"timedelta_i32": i32Timedelta, "timedelta_i64": i64Timedelta}
KIO_ERROR_CODES = tuple(int(e) for e in ErrorCode)
# kio writes an i64 duration as round(total_seconds() * 1000): exact only while the microseconds fit a double.
KIO_EXACT_I64_MS = 2**43


# kio's timestamps ("datetime_i64", `TZAware | None`; the name drops "Ms" like a duration's) are None for -1, else
# a non-negative datetime in whole seconds (`TZAware` refuses a nonzero microsecond), up to 9999-12-31T23:59:59Z.
KIO_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
KIO_MAX_DATETIME_S = (datetime.datetime.max.replace(tzinfo=datetime.UTC) - KIO_EPOCH) // datetime.timedelta(seconds=1)
KIO_RENAMED_TYPES = (*KIO_DURATIONS, "datetime_i64")
_AS_IS = object()


class _KioLayout(typing.NamedTuple):
    field: Field
    name: str
    kafka_type: str | None  # None for structs
    struct_class: type | None
    # What kio writes for the field at its Kafka default: None where kio models a tagged field's absence as None
    # although Kafka's field is not nullable (kio then writes any other value, the Kafka default included).
    absent: Any = _AS_IS


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _entity_type(annotation: Any) -> type:
    """The dataclass inside `X`, `X | None` or `tuple[X, ...]`."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return _entity_type(typing.get_args(annotation)[0])
    if origin in (types.UnionType, typing.Union):
        (inner,) = (a for a in typing.get_args(annotation) if a is not type(None))
        return _entity_type(inner)
    return annotation


class Kio(Peer):
    """kio's per-version entity dataclasses, written with `kio.serial.entity_writer`."""

    name = "kio"

    def __init__(self) -> None:
        self._layouts: dict[type, tuple[_KioLayout, ...]] = {}

    def message_class(self, msg: Message, version: int) -> type | None:
        api, kind = re.fullmatch(r"(.+)(Request|Response)", msg.name).groups()
        path = f"kio.schema.{_snake(api)}.v{version}.{kind.lower()}"
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as e:
            if e.name is None or not path.startswith(e.name):
                raise
            return None
        return getattr(module, msg.name)

    def supports(self, msg: Message, version: int) -> bool:
        return self.message_class(msg, version) is not None

    def convert(self, msg: Message, version: int, obj: Any) -> Any:
        cls = self.message_class(msg, version)
        assert cls is not None, f"kio has no {msg.name} v{version}"
        return self._entity(msg.root, cls, obj)

    def encode(self, peer_obj: Any, version: int) -> bytes:
        assert peer_obj.__version__ == version
        out = io.BytesIO()
        entity_writer(type(peer_obj))(out, peer_obj)
        return out.getvalue()

    def random_message(self, msg: Message, version: int, rng: random.Random) -> Any:
        cls = self.message_class(msg, version)
        assert cls is not None, f"kio has no {msg.name} v{version}"
        return _KioValueMaker(rng, self._kafka_types(msg.root, cls)).message(msg, version)

    def _layout(self, st: Struct, cls: type) -> tuple[_KioLayout, ...]:
        """kio's name, wire type and nested class for every field of `st` at the version `cls` is for."""
        if cls not in self._layouts:
            theirs = {f.name: f for f in dataclasses.fields(cls)}
            layout = []
            version = cls.__version__
            for fld in st.fields:
                if not fld.present(version):
                    continue
                name = fld.name if fld.name in theirs else fld.name.removesuffix("_ms")
                assert name in theirs, f"{st.name} v{version}: kio has no {fld.name}"
                spec = theirs[name]
                assert name == fld.name or spec.metadata["kafka_type"] in KIO_RENAMED_TYPES, (st.name, fld.name)
                absent = _AS_IS
                if fld.is_tagged(version) and spec.default is None and not fld.is_nullable(version):
                    absent = None
                if fld.struct is not None:
                    layout.append(_KioLayout(fld, name, None, _entity_type(spec.type), absent))
                else:
                    layout.append(_KioLayout(fld, name, spec.metadata["kafka_type"], None, absent))
            ours = sorted(item.name for item in layout)
            assert ours == sorted(theirs), f"{st.name} v{version}: ours {ours}, kio {sorted(theirs)}"
            self._layouts[cls] = tuple(layout)
        return self._layouts[cls]

    def _kafka_types(self, st: Struct, cls: type) -> dict[int, str]:
        """kio's wire type of every primitive field under `st`, keyed by the id of our Field."""
        found: dict[int, str] = {}
        for item in self._layout(st, cls):
            if item.struct_class is not None:
                found.update(self._kafka_types(item.field.struct, item.struct_class))
            else:
                found[id(item.field)] = item.kafka_type
        return found

    def _entity(self, st: Struct, cls: type, obj: Any) -> Any:
        layout = self._layout(st, cls)
        return cls(**{item.name: self._value(item, getattr(obj, item.field.name)) for item in layout})

    def _value(self, item: _KioLayout, value: Any) -> Any:
        if value is None:
            return None
        fld = item.field
        if self.omit_tagged_defaults and item.absent is not _AS_IS and _at_default(fld, value):
            return item.absent
        if item.struct_class is not None:
            if fld.is_array:
                return tuple(self._entity(fld.struct, item.struct_class, v) for v in value)
            return self._entity(fld.struct, item.struct_class, value)
        if fld.is_array:
            return tuple(_kio_primitive(item.kafka_type, v) for v in value)
        return _kio_primitive(item.kafka_type, value)


def _kio_primitive(kafka_type: str, value: Any) -> Any:
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type in KIO_DURATIONS:
        return KIO_DURATIONS[kafka_type].parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "uuid":
        return uuid.UUID(bytes=value)
    if kafka_type == "datetime_i64":
        return None if value == -1 else TZAware.parse(KIO_EPOCH + datetime.timedelta(milliseconds=value))
    return value


class _KioValueMaker(ValueMaker):
    """Random values restricted to what kio can hold: known error codes, durations it converts exactly."""

    def __init__(self, rng: random.Random, kafka_types: dict[int, str]) -> None:
        super().__init__(rng, unknown_tags=False)
        self.kafka_types = kafka_types

    def field(self, msg: Message, fld: Field, v: int) -> Any:
        kafka_type = self.kafka_types.get(id(fld))
        if kafka_type == "error_code":
            return self.rng.choice(KIO_ERROR_CODES)
        if kafka_type == "timedelta_i64":
            return self.rng.randint(-KIO_EXACT_I64_MS, KIO_EXACT_I64_MS)
        if kafka_type == "datetime_i64":
            seconds = self.rng.choice((0, KIO_MAX_DATETIME_S, self.rng.randint(0, KIO_MAX_DATETIME_S)))
            return -1 if self.rng.random() < 0.25 else seconds * 1000
        return super().field(msg, fld, v)


KAFKA_PYTHON = KafkaPython()
KIO = Kio()
PEERS: tuple[Peer, ...] = (KAFKA_PYTHON, KIO)
