"""Session summaries: the codec benches (medians per codec, kcoord's speedups against the targets) and the assignor
benches (Kafka's JMH grid next to the published Java figures, the issue's targets, kafka-python in the same run)."""

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
    benchmarks = list(session.benchmarks) if session is not None else []
    _codec_summary(terminalreporter, benchmarks)
    _assignor_summary(terminalreporter, benchmarks)
    _spark_summary(terminalreporter, benchmarks)
    _server_summary(terminalreporter, benchmarks)
    _reconcile_summary(terminalreporter, benchmarks)


def _write_table(terminalreporter: Any, title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    terminalreporter.write_sep("=", title)
    for row in (header, *rows):
        terminalreporter.write_line("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _codec_summary(terminalreporter: Any, benchmarks: list[Any]) -> None:
    medians: dict[str, dict[str, float]] = {}
    kinds: dict[str, str] = {}
    for bench in benchmarks:
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


# --- assignors -------------------------------------------------------------------------------------------------

GRID_COLUMNS = (("homogeneous", "full"), ("homogeneous", "incremental"), ("heterogeneous", "full"),
                ("heterogeneous", "incremental"))


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"


def _verdict(measured: float, target: float) -> str:
    return "ok" if measured < target else "MISS"


def _assignor_summary(terminalreporter: Any, benchmarks: list[Any]) -> None:
    grid = [b for b in benchmarks if b and b.extra_info.get("assignor_grid")]
    sources: dict[str, None] = {}
    for assignor in dict.fromkeys(b.extra_info["assignor"] for b in grid):
        cells: dict[tuple[int, int, int], dict[tuple[str, str], str]] = {}
        parts: dict[tuple[int, int, int], int] = {}
        for b in grid:
            info = b.extra_info
            if info["assignor"] != assignor:
                continue
            key = (info["members"], info["ratio"], info["topics"])
            parts[key] = info["partitions"]
            cell = _ms(b.stats.median)
            if info["java_ms"] is not None:
                cell += f" [{info['java_ms']:g}]"
                sources[info["java_source"]] = None
            cells.setdefault(key, {})[(info["subscription"], info["assignment"])] = cell
        rows = [(f"{m:,} × {r} × {t:,} ({parts[(m, r, t)]:,})",
                 *(cells[(m, r, t)].get(col, "-") for col in GRID_COLUMNS)) for m, r, t in sorted(cells)]
        _write_table(terminalreporter,
                     f"assignor grid: {assignor} (assign_arrays, median ms; [published Java JMH ms])",
                     ("members × per member × topics (partitions)", "hom full", "hom incremental", "het full",
                      "het incremental"), rows)
    if sources:
        terminalreporter.write_line("Java figures from Apache Kafka PRs " + "; ".join(sources)
                                    + " (other hardware; read as orders of magnitude)")

    targets = []
    for b in benchmarks:
        if not b:
            continue
        info = b.extra_info
        if info.get("assignor_grid") and info.get("target_s"):
            name = f"{info['target_name']} ({info['members']:,} × {info['ratio']} × {info['topics']:,} topics)"
            targets.append((name, b.stats.median, info["target_s"]))
        elif info.get("assignor_target"):
            targets.append((info["assignor_target"], b.stats.median, info["target_s"]))
    if targets:
        _write_table(terminalreporter, "assignor targets (median; reported, not asserted)",
                     ("case", "kcoord", "target", "verdict"),
                     [(n, f"{_ms(m)} ms", f"< {_ms(t)} ms", _verdict(m, t)) for n, m, t in targets])

    peers: dict[str, dict[str, float]] = {}
    wanted: dict[str, float | None] = {}
    for b in benchmarks:
        if b and b.extra_info.get("assignor_peer"):
            peers.setdefault(b.extra_info["assignor_peer"], {})[b.extra_info["impl"]] = b.stats.median
            wanted[b.extra_info["assignor_peer"]] = b.extra_info.get("target_speedup")
    if peers:
        rows = []
        for op, times in peers.items():
            ours, theirs, target = times.get("kcoord"), times.get("kafka-python"), wanted[op]
            speedup = f"{theirs / ours:,.0f}x" if ours and theirs else "-"
            if ours and theirs and target:
                met = theirs / ours >= target
                speedup += f" ({'>=' if met else '<'} {target:g}x {'ok' if met else 'MISS'})"
            rows.append((op, f"{_ms(ours)} ms" if ours else "-", f"{_ms(theirs)} ms" if theirs else "-", speedup))
        _write_table(terminalreporter, "assignors vs kafka-python 3.0.12, same run (median per call)",
                     ("operation", "kcoord", "kafka-python", "speedup"), rows)

    threads: dict[str, dict[str, float]] = {}
    for b in benchmarks:
        if b and b.extra_info.get("assignor_threads"):
            threads.setdefault(b.extra_info["kernel"], {})[b.extra_info["assignor_threads"]] = b.stats.min
    rows = [(kernel, f"{_ms(t['one thread'])} ms", f"{_ms(t['two threads'])} ms",
             f"{t['one thread'] / t['two threads']:.2f}x") for kernel, t in threads.items() if len(t) == 2]
    if rows:
        _write_table(terminalreporter, "assignor kernels without the GIL: 2 × 10 calls on 1M partitions (best round; "
                     "2.00x = perfect scaling on two free cores)", ("kernel", "one thread", "two threads", "scaling"),
                     rows)
    gil = [(b.extra_info["assignor_gil"], f"{b.extra_info['python_progress']:.2f}") for b in benchmarks
           if b and b.extra_info.get("assignor_gil")]
    if gil:
        _write_table(terminalreporter, "a pure-Python thread beside kernel calls: its speed relative to running "
                     "alone (1.00 = the GIL stays free)", ("kernel", "Python thread speed"), gil)


# --- planning on Spark -----------------------------------------------------------------------------------------


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s < 100 else f"{s:.0f} s"


def _spark_summary(terminalreporter: Any, benchmarks: list[Any]) -> None:
    cases: dict[str, dict[str, tuple[float, int]]] = {}
    huge: set[str] = set()
    in_task: dict[str, dict[str, float]] = {}
    for b in benchmarks:
        if not b or not b.extra_info.get("spark_planning"):
            continue
        info = b.extra_info
        if info.get("in_task"):
            in_task.setdefault(info["case"], {})[info["impl"]] = b.stats.min / info["groups"]
            continue
        cases.setdefault(info["case"], {})[info["impl"]] = (b.stats.min, info["groups"])
        if info.get("huge"):
            huge.add(info["case"])
    rows = [(case, f"{t['kcoord'] * 1e3:.3f} ms", f"{t['kafka-python'] * 1e3:.3f} ms",
             f"{t['kafka-python'] / t['kcoord']:.1f}x") for case, t in in_task.items() if len(t) == 2]
    if rows:
        _write_table(terminalreporter, "work inside one task, without Spark (per group, 500 groups)",
                     ("estate", "kcoord task body", "kafka-python pandas UDF body", "ratio"), rows)
    for case, impls in cases.items():
        if case in huge:
            rows = [(impl, _seconds(s)) for impl, (s, _) in impls.items()]
            _write_table(terminalreporter, f"one huge group on Spark local[2]: {case} (Spark: best of two runs)",
                         ("how", "time"), rows)
            continue
        ours = impls.get("kcoord on Spark")
        rows = []
        for impl, (s, groups) in impls.items():
            ratio = "-"
            if ours and impl != "kcoord on Spark" and "validation" not in impl:
                ratio = f"{s / ours[0]:.2f}x"
            rows.append((impl, _seconds(s), f"{groups / s:,.0f}", ratio))
        _write_table(terminalreporter, f"planning on Spark local[2]: {case} (best of two runs each)",
                     ("implementation", "time", "groups/s", "its time / kcoord on Spark"), rows)
        peer = impls.get("kafka-python range in a pandas UDF")
        if ours and peer:
            ratio = peer[0] / ours[0]
            terminalreporter.write_line(f"kcoord on Spark vs kafka-python in a pandas UDF: {ratio:.1f}x "
                                        f"({'>=' if ratio >= 20 else '<'} the issue's 20x target; reported, not "
                                        f"asserted)")
        floor = impls.get("Spark alone, no assignor")
        if floor and peer:
            terminalreporter.write_line(
                f"Spark alone (the same shuffle, Arrow in and plan rows out, no assignor) takes {_seconds(floor[0])}: "
                f"no planner inside Spark can beat kafka-python in a pandas UDF by more than "
                f"{peer[0] / floor[0]:.1f}x here; kcoord's planning adds {_seconds(max(ours[0] - floor[0], 0))}"
                if ours else "")


# --- kcoord serve ------------------------------------------------------------------------------------------------

# The server issue's targets: cold start within the initial delay (3 s by default) + 0.5 s, and 5x Tansu.
COLD_START_LIMIT_S = 3.0 + 0.5
COLD_START_VS_TANSU = 5.0


def _server_summary(terminalreporter: Any, benchmarks: list[Any]) -> None:
    cold: dict[tuple[str, int], dict[str, float]] = {}
    for b in benchmarks:
        if b and b.extra_info.get("kind") == "cold-start":
            info = b.extra_info
            cold.setdefault((info["client"], info["members"]), {})[info["server"]] = info["seconds"]
        elif b and b.extra_info.get("kind") == "heartbeat-load":
            info = b.extra_info
            terminalreporter.write_sep("=", "heartbeats over loopback, 100 connections, 10,000 members")
            verdict = "ok" if info["heartbeats_per_server_cpu_s"] >= 100_000 else "MISS"
            terminalreporter.write_line(
                f"saturated {info['heartbeats_per_s']:,}/s, {info['heartbeats_per_server_cpu_s']:,} per server "
                f"CPU-second (target 100,000 on one core: {verdict}); paced at {info['paced_rate']:,}/s: "
                f"p50 {info['paced_p50_us']:,} us, p99 {info['paced_p99_us']:,} us")
    rows = []
    for (client, members), t in sorted(cold.items()):
        ours, tansu = t.get("kcoord"), t.get("tansu")
        within = "-" if ours is None else ("ok" if ours <= COLD_START_LIMIT_S else "MISS")
        ratio = "-" if not (ours and tansu) else \
            f"{tansu / ours:.1f}x ({'ok' if tansu / ours >= COLD_START_VS_TANSU else 'MISS'})"
        rows.append((client, str(members), _seconds(ours) if ours else "-", within, _seconds(tansu) if tansu else "-",
                     ratio))
    if rows:
        _write_table(terminalreporter, "cold start: every member holds its assignment (defaults; one run each)",
                     ("client", "members", "kcoord", f"<= {COLD_START_LIMIT_S:g} s", "Tansu",
                      f"Tansu / kcoord (>= {COLD_START_VS_TANSU:g}x)"), rows)


def _reconcile_summary(terminalreporter: Any, benchmarks: list[Any]) -> None:
    """The compiled KIP-848 reconciliation step against the pure-Python model (benches/bench_reconcile.py)."""
    medians: dict[tuple[str, int], dict[str, float]] = {}
    for b in benchmarks:
        info = b.extra_info
        if "reconcile" in info:
            medians.setdefault((info["reconcile"], info["partitions_per_member"]), {})[info["impl"]] = b.stats.median
    rows = []
    for (kind, k), t in sorted(medians.items()):
        if len(t) == 2:
            note = f" (target < 5 us: {_verdict(t['kcoord'], 5e-6)})" if kind == "reconciling" and k == 10 else ""
            rows.append((kind, f"{k:,}", _fmt_time(t["kcoord"]) + note, _fmt_time(t["model"]),
                         f"{t['model'] / t['kcoord']:.0f}x"))
    if rows:
        _write_table(terminalreporter, "KIP-848 reconciliation step over a 100,000-partition table (median per step)",
                     ("step", "partitions", "kcoord", "model", "model / kcoord"), rows)
