"""Random message values built from kcoord's own definitions, for round trips, peers and benches.

`random_message(msg, version, rng)` returns a kcoord object whose fields present in `version` hold random
values (nulls where the version allows them, empty and non-empty arrays, tagged fields set or left at their
default, and, if asked, unknown tagged fields); fields the version does not carry keep their defaults, so
the object is encodable at that version.
"""

from __future__ import annotations

import random

from kcoord import wire
from kcoord.protocol.dsl import Field, Message, Struct
from kcoord.protocol.generate import class_name

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
ALPHABET = "abcxyz-_.019 ÄöéΩ漢😀"


def _int(rng: random.Random, t: str) -> int:
    lo, hi = INT_RANGES[t]
    r = rng.random()
    if r < 0.15:
        return rng.choice((lo, hi, 0, -1 if lo < 0 else 1))
    if r < 0.5:
        return rng.randint(max(lo, -1000), min(hi, 1000))
    return rng.randint(lo, hi)


def _primitive(rng: random.Random, t: str):
    if t in INT_RANGES:
        return _int(rng, t)
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice((0.0, -1.5, 1e300, rng.uniform(-1e6, 1e6)))
    if t == "string":
        return "".join(rng.choice(ALPHABET) for _ in range(rng.choice((0, 1, 3, 8))))
    if t in ("bytes", "records"):
        return rng.randbytes(rng.choice((0, 1, 5, 17)))
    if t == "uuid":
        return rng.randbytes(16)
    raise ValueError(t)


class ValueMaker:
    def __init__(self, rng: random.Random, *, unknown_tags: bool = True, max_items: int = 3,
                 nulls: bool = True) -> None:
        self.rng = rng
        self.unknown_tags = unknown_tags
        self.max_items = max_items
        self.nulls = nulls

    def message(self, msg: Message, v: int):
        return self.struct(msg, msg.root, v)

    def struct(self, msg: Message, st: Struct, v: int):
        cls = getattr(wire, class_name(msg, st))
        kwargs = {}
        known_tags = set()
        for fld in st.fields:
            if not fld.present(v):
                continue
            if fld.is_tagged(v):
                known_tags.add(fld.tag)
                if self.rng.random() < 0.4:
                    continue  # leave the tagged field at its default: it is then not written
            kwargs[fld.name] = self.field(msg, fld, v)
        if self.unknown_tags and msg.is_flexible(v) and self.rng.random() < 0.3:
            tags = sorted(self.rng.sample(range(90, 200), self.rng.randint(1, 2)))
            kwargs["unknown_tags"] = [(t, self.rng.randbytes(self.rng.randint(0, 6))) for t in tags
                                      if t not in known_tags]
        return cls(**kwargs)

    def field(self, msg: Message, fld: Field, v: int):
        rng = self.rng
        if self.nulls and fld.is_nullable(v) and rng.random() < 0.25:
            return None
        if fld.is_array:
            n = rng.choice((0, 1, rng.randint(0, self.max_items)))
            if fld.struct is not None:
                return [self.struct(msg, fld.struct, v) for _ in range(n)]
            return [_primitive(rng, fld.elem) for _ in range(n)]
        if fld.struct is not None:
            return self.struct(msg, fld.struct, v)
        return _primitive(rng, fld.type)


def random_message(msg: Message, v: int, rng: random.Random, **kw):
    return ValueMaker(rng, **kw).message(msg, v)
