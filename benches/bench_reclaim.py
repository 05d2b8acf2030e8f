"""What a mass deletion gives back (issue 30, "nothing expires and nothing is reclaimed").

A real `kcoord serve --data-dir` is filled with 100,000 groups, each with one committed offset (simple consumers),
then emptied two ways: DeleteGroups of every group (requests of 1,000), and offset retention
(offsets.retention.minutes=1, checked every second). For each it prints the server's RSS (idle, full, emptied), the
store's files (database and write-ahead log: full, emptied while serving, after a stop, after a restart), and the
longest wait of a bystander's heartbeat while the groups went (the retention check and the page reclaim run in
slices on the event loop). An in-process part prints how long each step of the page reclaim holds the loop.

Run: `python -m pytest benches/bench_reclaim.py -m slow -s --benchmark-enable` (the retention run waits a minute).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any

import pytest

from kcoord import records as R
from kcoord import wire
from kcoord.client import Client
from kcoord.config import GroupConfig
from kcoord.coordinator import Coordinator
from kcoord.store import STORE_FILE, GroupStore, SqliteRecords
from kcoord.timers import ManualClock

from .loadgen import ServerProcess

GROUPS = 100_000
TOPIC = "t"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def store_mb(data: str) -> tuple[float, float]:
    """(database, write-ahead log) in MB."""
    path = os.path.join(data, STORE_FILE)
    return tuple(os.path.getsize(p) / 1e6 if os.path.exists(p) else 0.0 for p in (path, path + "-wal"))


def free_pages(data: str) -> int:
    db = sqlite3.connect(f"file:{os.path.join(data, STORE_FILE)}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        db.close()


def pipeline(c: Client, reqs: list, version: int, batch: int = 500) -> list:
    out = []
    for i in range(0, len(reqs), batch):
        ids = [c.send(type(r).API_KEY, version, r) for r in reqs[i:i + batch]]
        out += [c.receive(type(reqs[0]).API_KEY, version, k) for k in ids]
    return out


def fill(port: int, groups: list[str]) -> None:
    reqs = [wire.OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_metadata="", committed_leader_epoch=-1)])])
        for g in groups]
    with Client(f"127.0.0.1:{port}", timeout=120) as c:
        for r in pipeline(c, reqs, 8):
            assert all(p.error_code == 0 for t in r.topics for p in t.partitions)


def gone(port: int, group: str) -> bool:
    with Client(f"127.0.0.1:{port}", timeout=60) as c:
        return c.request(wire.DescribeGroupsRequest(groups=[group]), 5).groups[0].group_state == "Dead"


def listed(port: int) -> int:
    with Client(f"127.0.0.1:{port}", timeout=60) as c:
        return len(c.request(wire.ListGroupsRequest(), 4).groups)


class Bystander:
    """A client heartbeating every 5 ms (to a group it is not in: answered at once) that keeps its longest wait."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.worst = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        req = wire.HeartbeatRequest(group_id="bystander", generation_id=1, member_id="m")
        with Client(f"127.0.0.1:{self.port}", timeout=60) as c:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                c.request(req, 4)
                self.worst = max(self.worst, time.perf_counter() - t0)
                time.sleep(0.005)

    def __enter__(self) -> Bystander:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def wait_for(what, timeout: float) -> float:
    t0 = time.monotonic()
    while not what():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.2)
    return time.monotonic() - t0


def report(how: str, figures: dict[str, Any]) -> None:
    print(f"\n{how} of {GROUPS:,} groups (one offset each), kcoord serve --data-dir:")
    print(f"  RSS: idle {figures['rss_idle']:.0f} MiB, full {figures['rss_full']:.0f} MiB, emptied "
          f"{figures['rss_emptied']:.0f} MiB, after a restart {figures['rss_restarted']:.0f} MiB")
    print("  store (database + WAL): full {:.1f} + {:.1f} MB, emptied while serving {:.1f} + {:.1f} MB, after a stop "
          "{:.2f} + {:.2f} MB".format(*figures["store_full"], *figures["store_emptied"], *figures["store_stopped"]))
    print(f"  the bystander's longest heartbeat over 3 s before: {figures['bystander_idle_worst_ms']:.1f} ms")
    print(f"  emptied in {figures['seconds']:.1f} s; the bystander's longest heartbeat meanwhile: "
          f"{figures['bystander_worst_ms']:.1f} ms, and while memory and pages were given back: "
          f"{figures['bystander_reclaim_worst_ms']:.1f} ms")


def run(tmp_path, how: str) -> dict[str, Any]:
    data = str(tmp_path / "data")
    settings = ("offsets.retention.minutes=1", "offsets.retention.check.interval.ms=1000") if how == "expiry" else ()
    groups = [f"group-{i:06d}" for i in range(GROUPS)]
    figures: dict[str, Any] = {}
    with ServerProcess(*settings, topics=(f"{TOPIC}:1",), data_dir=data) as srv:
        pid = srv.proc.pid
        time.sleep(1)
        figures["rss_idle"] = rss_mib(pid)
        fill(srv.port, groups)
        figures["rss_full"] = rss_mib(pid)
        figures["store_full"] = store_mb(data)
        with Bystander(srv.port) as bystander:
            time.sleep(3)  # the bystander's longest wait on a server holding the groups, doing nothing else
            figures["bystander_idle_worst_ms"] = bystander.worst * 1e3
            bystander.worst = 0.0
            t0 = time.monotonic()
            if how == "delete":
                with Client(f"127.0.0.1:{srv.port}", timeout=120) as c:
                    for r in pipeline(c, [wire.DeleteGroupsRequest(groups_names=groups[i:i + 1000])
                                          for i in range(0, GROUPS, 1000)], 2, batch=1):
                        assert not any(x.error_code for x in r.results)
            else:
                wait_for(lambda: gone(srv.port, groups[-1]), 180)  # the last committed is the last to expire
            figures["seconds"] = time.monotonic() - t0
            figures["bystander_worst_ms"] = bystander.worst * 1e3
            bystander.worst = 0.0
            wait_for(lambda: free_pages(data) == 0, 120)  # the reclaim, step by step
            time.sleep(2)  # memory is given back a second after the deletion
            figures["bystander_reclaim_worst_ms"] = bystander.worst * 1e3
        assert listed(srv.port) == 0
        figures["rss_emptied"] = rss_mib(pid)
        figures["store_emptied"] = store_mb(data)
    figures["store_stopped"] = store_mb(data)
    with ServerProcess(topics=(f"{TOPIC}:1",), data_dir=data) as srv:
        time.sleep(1)
        figures["rss_restarted"] = rss_mib(srv.proc.pid)
        assert listed(srv.port) == 0
    report("DeleteGroups" if how == "delete" else "Offset retention", figures)
    return figures


@pytest.mark.slow
@pytest.mark.parametrize("how", ["delete", "expiry"])
@pytest.mark.benchmark(group="reclaim: 100,000 groups deleted or expired")
def test_what_a_mass_deletion_gives_back(benchmark: Any, tmp_path, how: str) -> None:
    figures = benchmark.pedantic(lambda: run(tmp_path, how), rounds=1, iterations=1)
    benchmark.extra_info.update(kind="reclaim", how=how, **{k: v if not isinstance(v, tuple) else list(v)
                                                            for k, v in figures.items()})


@pytest.mark.benchmark(group="reclaim: one step of the page reclaim, in-process")
def test_reclaim_steps_hold_the_loop_briefly(benchmark: Any, tmp_path) -> None:
    """The coordinator's reclaim timer over a store that just lost 300,000 of its 400,000 offsets (three groups in
    four, so the pages left must be moved down): each step's duration."""
    clock = ManualClock(1_000_000)
    records = SqliteRecords(str(tmp_path / "data"), fsync="off")
    keys = [R.offset_key(f"group-{j:06d}", TOPIC, p) for j in range(GROUPS) for p in range(4)]
    value = R.offset_value(42, -1, "m" * 40, 0)
    for i in range(0, len(keys), 20_000):
        records.put(dict.fromkeys(keys[i:i + 20_000], value))
    records.put(dict.fromkeys((k for i, k in enumerate(keys) if (i // 4) % 4), None))
    c = Coordinator(GroupConfig(), clock, store=GroupStore(records, clock.wall_ms))
    pages = records.db.execute("PRAGMA freelist_count").fetchone()[0]
    steps: list[float] = []

    def reclaim_all() -> None:
        c.schedule_reclaim(0)
        while c.timers.is_armed(c.reclaim_timer):
            clock.ms = c.timers.next_deadline()
            t0 = time.perf_counter()
            c.poll()
            steps.append(time.perf_counter() - t0)

    benchmark.pedantic(reclaim_all, rounds=1, iterations=1)
    records.close()
    first = steps[0] * 1e3  # opens the reclaim's connection
    steps = sorted(steps[1:])
    worst, median = steps[-1] * 1e3, steps[len(steps) // 2] * 1e3
    benchmark.extra_info.update(kind="reclaim-step", pages=pages, steps=len(steps) + 1, first_ms=first,
                                median_ms=median, worst_ms=worst)
    print(f"\npage reclaim of {pages:,} free pages: {len(steps) + 1} steps, the first {first:.2f} ms (it opens a "
          f"connection), then median {median:.2f} ms, worst {worst:.2f} ms")
