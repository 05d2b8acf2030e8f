"""Plain-text tables for the CLI's readable output (every command also has --json)."""

from __future__ import annotations

from collections.abc import Sequence


def printable(text: str) -> str:
    """`text` with every character a terminal could act on escaped: what is not printable (C0 and C1 controls such
    as ESC and newline, format characters such as bidi overrides, lone surrogates) as \\xHH, \\uHHHH or
    \\UHHHHHHHH. The one escaping function of the CLI's readable output: group, member, instance and client ids,
    hosts, reasons and metadata come from clients (confluent-kafka commits a C string's NUL)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 0x100 else
                   f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in text)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: bool = False) -> str:
    """Columns padded to their widest cell, two spaces apart; None prints as "-". `right`: every column but the
    first is right-aligned (for figures). Every cell is passed through `printable`, so no cell can move the cursor,
    clear the screen or start a row of its own."""
    cells = [[printable(str(c)) for c in headers]] + [["-" if c is None else printable(str(c)) for c in r]
                                                      for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.rjust(w) if right and i else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
                     for r in cells)


def ranges(ids) -> str:
    """Integers as ranges, ascending: [0, 1, 2, 5] -> "0-2,5" ("" for none)."""
    ids = sorted(ids)
    out, i = [], 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)
