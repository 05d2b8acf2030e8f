"""Forming large groups over loopback, in server CPU-seconds: KIP-848 consumer groups of 1,000, 10,000 and 50,000
members over as many partitions, and a connect group of 1,000 workers joining at once, each on a `kcoord serve`
with its embedded store (a fresh data directory, store.fsync=always) driven by raw pipelined frames over 100
connections (benches/loadgen.py). A group is formed when every member is at the group epoch with its assignment
acknowledged and nothing moves any more.

Beside the commit before the batched target computation (KCOORD_FORMATION_BASELINE, default 538eafd, built once
into .bench-baseline/ as bench_baseline.py builds its baseline), in the same run, at 1,000 and 10,000 members and
1,000 workers; 50,000 members only on this tree (the baseline's quadratic formation would take about 20 minutes).

Targets (issue 33): a 10,000-member consumer group formed in at most 2 s of server CPU, 50,000 members in at most
15 s, growth close to linear; the same for a connect group of 1,000 workers. Marked slow.
Run: `python -m pytest benches/bench_formation.py -m slow -s`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from .bench_baseline import baseline_build
from .loadgen import ServerProcess, form_connect_group, form_consumer_group

BASELINE = os.environ.get("KCOORD_FORMATION_BASELINE", "538eafd")
CONNECTIONS = 100


def consumer_formation(members: int, data_dir: str, pythonpath: str | None = None) -> dict[str, float]:
    with ServerProcess(topics=(f"orders:{members}",), data_dir=data_dir, pythonpath=pythonpath) as srv:
        cpu0 = srv.cpu_seconds()
        cg = asyncio.run(form_consumer_group(srv.port, "formed", members, CONNECTIONS))
        cpu = srv.cpu_seconds() - cpu0
    return {"cpu_s": round(cpu, 2), "joins_s": round(cg.join_s, 2), "formed_s": round(cg.stable_s, 2),
            "epoch": cg.epochs[0]}


def connect_formation(workers: int, data_dir: str, pythonpath: str | None = None) -> dict[str, float]:
    with ServerProcess("group.coordinator.rebalance.protocols=classic,consumer,connect", data_dir=data_dir,
                       pythonpath=pythonpath) as srv:
        cpu0 = srv.cpu_seconds()
        cg = asyncio.run(form_connect_group(srv.port, "formed", workers, CONNECTIONS))
        cpu = srv.cpu_seconds() - cpu0
    return {"cpu_s": round(cpu, 2), "joins_s": round(cg.join_s, 2), "formed_s": round(cg.stable_s, 2),
            "computations": cg.computations, "epoch": cg.epochs[0]}


def show(kind: str, size: int, new: dict, old: dict | None) -> str:
    line = f"{kind} {size:>6,}: server CPU {new['cpu_s']:6.2f} s (joins answered in {new['joins_s']:.1f} s, formed in " \
           f"{new['formed_s']:.1f} s wall)"
    if old is not None:
        line += f"; {BASELINE}: {old['cpu_s']:.2f} s ({old['cpu_s'] / max(new['cpu_s'], 1e-9):.1f}x)"
    return line


@pytest.mark.slow
@pytest.mark.benchmark(group="formation: KIP-848 consumer groups (server CPU-seconds)")
def test_consumer_group_formation(benchmark: Any, tmp_path) -> None:
    old_tree = baseline_build(BASELINE)
    figures: dict[str, Any] = {}
    lines = []
    for members in (1_000, 10_000, 50_000):
        new = consumer_formation(members, str(tmp_path / f"new-{members}"))
        old = consumer_formation(members, str(tmp_path / f"old-{members}"), old_tree) if members <= 10_000 else None
        figures[str(members)] = {"new": new, BASELINE: old}
        lines.append(show("consumer group", members, new, old))
    benchmark.extra_info.update(figures)
    benchmark.pedantic(lambda: None, rounds=1)
    per_member = {m: figures[m]["new"]["cpu_s"] / int(m) * 1e6 for m in figures}
    print("\n" + "\n".join(lines) + "\nserver CPU per member: " +
          ", ".join(f"{int(m):,}: {v:.0f} µs" for m, v in per_member.items()) +
          " (targets: 10,000 <= 2 s, 50,000 <= 15 s, close to linear)")


@pytest.mark.slow
@pytest.mark.benchmark(group="formation: a connect group of 1,000 workers (server CPU-seconds)")
def test_connect_group_formation(benchmark: Any, tmp_path) -> None:
    old_tree = baseline_build(BASELINE)
    new = connect_formation(1_000, str(tmp_path / "new"))
    old = connect_formation(1_000, str(tmp_path / "old"), old_tree)
    benchmark.extra_info.update(new=new, old=old)
    benchmark.pedantic(lambda: None, rounds=1)
    print("\n" + show("connect group", 1_000, new, old) +
          f"; computations installed: {new['computations']} (baseline {old['computations']})")
