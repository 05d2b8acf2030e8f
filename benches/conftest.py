"""A per-operation summary of the codec benches: medians per codec and kcoord's speedups against the targets."""

from __future__ import annotations

from typing import Any

import pytest

# The foundation issue's targets, as kcoord's minimum speedup over each peer (reported, not asserted).
TARGETS = {("decode", "kio"): 3.0, ("decode", "kafka-python"): 10.0, ("encode", "kafka-python"): 10.0}
PEERS = ("kio", "kafka-python")


def _fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


def _fmt_speedup(kind: str, peer: str, speedup: float) -> str:
    target = TARGETS.get((kind, peer))
    verdict = "" if target is None else (f" (>= {target:g}x ok)" if speedup >= target else f" (< {target:g}x MISS)")
    return f"{speedup:.1f}x{verdict}"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = getattr(config, "_benchmarksession", None)
    medians: dict[str, dict[str, float]] = {}
    kinds: dict[str, str] = {}
    for bench in session.benchmarks if session is not None else ():
        if not bench or "codec" not in bench.extra_info:
            continue
        info = bench.extra_info
        medians.setdefault(info["operation"], {})[info["codec"]] = bench.stats.median
        kinds[info["operation"]] = info["kind"]
    if not medians:
        return
    header = ("operation", "kcoord", *PEERS, *(f"kcoord vs {p}" for p in PEERS))
    rows = []
    for op, times in medians.items():
        ours = times.get("kcoord")
        cells = [_fmt_time(times[c]) if c in times else "-" for c in ("kcoord", *PEERS)]
        cells += [_fmt_speedup(kinds[op], p, times[p] / ours) if ours and p in times else "-" for p in PEERS]
        rows.append((op, *cells))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    terminalreporter.write_sep("=", "codec summary (median per call; speedup = peer median / kcoord median)")
    for row in (header, *rows):
        terminalreporter.write_line("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
