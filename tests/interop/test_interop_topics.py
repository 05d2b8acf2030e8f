"""Topics over the wire: `kcoord topics` creates and grows them, and a live group's leader follows."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from ..support.cli import kcoord


def cli(port: int, *args: str) -> subprocess.CompletedProcess:
    return kcoord(*args, "--bootstrap", f"127.0.0.1:{port}")


def test_topics_cli_create_grow_and_refuse_shrink(fresh_server) -> None:  # noqa: F811
    out = cli(fresh_server, "topics", "--create", "events:4", "--json")
    assert out.returncode == 0, out.stderr
    assert [(t["topic"], t["partitions"]) for t in json.loads(out.stdout)["topics"]] == [("events", 4)]
    out = cli(fresh_server, "topics", "--grow", "events:6")
    assert out.returncode == 0 and "events  6" in out.stdout
    out = cli(fresh_server, "topics", "--grow", "events:2")
    assert out.returncode == 1 and "INVALID_PARTITIONS" in out.stderr


@pytest.mark.interop
def test_partition_growth_reaches_a_live_group(fresh_server) -> None:  # noqa: F811
    from kafka import KafkaConsumer

    assert cli(fresh_server, "topics", "--create", "grow:4").returncode == 0
    owned: dict[int, set[int]] = {}
    stop = threading.Event()

    def member(i: int) -> None:
        # kafka-python 3.0.12 can strand a member in a rejoin that only metadata asked for, when poll's timeout runs
        # out during it (README, "Two client behaviours"); this test's rejoin is exactly that. A loaded run saw its
        # 200 ms poll spent on the pre-rebalance commit, and the member expired. So: no auto-commit (the test commits
        # nothing) and a poll that leaves the rejoin room to finish.
        c = KafkaConsumer("grow", bootstrap_servers=f"127.0.0.1:{fresh_server}", group_id="grow-g",
                          client_id=f"m{i}", metadata_max_age_ms=500, session_timeout_ms=6000,
                          heartbeat_interval_ms=500, enable_auto_commit=False)
        try:
            while not stop.is_set():
                c.poll(timeout_ms=2000)
                owned[i] = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()

    def covered(n: int) -> bool:
        parts = [p for s in owned.values() for p in s]
        return len(owned) == 2 and sorted(parts) == list(range(n))

    try:
        deadline = time.monotonic() + 30
        while not covered(4):
            assert time.monotonic() < deadline, f"group never covered 4 partitions: {owned}"
            time.sleep(0.1)
        assert cli(fresh_server, "topics", "--grow", "grow:8").returncode == 0
        deadline = time.monotonic() + 30
        while not covered(8):  # the leader sees 8 partitions in Metadata and rejoins; everyone gets the new ones
            assert time.monotonic() < deadline, f"group never covered 8 partitions: {owned}"
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def test_topics_cli_delete(fresh_server) -> None:  # noqa: F811
    assert cli(fresh_server, "topics", "--create", "doomed:2", "--create", "kept:1").returncode == 0
    out = cli(fresh_server, "topics", "--delete", "doomed", "--json")
    assert out.returncode == 0, out.stderr
    assert [t["topic"] for t in json.loads(out.stdout)["topics"]] == ["kept"]
    again = cli(fresh_server, "topics", "--delete", "doomed")
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert "delete doomed: UNKNOWN_TOPIC_OR_PARTITION" in again.stderr, again.stderr
    bad = cli(fresh_server, "topics", "--delete", "bad name!")
    assert bad.returncode == 2 and "--delete" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
