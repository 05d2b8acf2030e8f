"""A store that cannot write for want of space: writes are refused with COORDINATOR_NOT_AVAILABLE, the groups
already formed keep their heartbeats, the server stays up and takes writes again once there is room (README,
"Durable state"). In process with SQLite's max_page_count (a deterministic SQLITE_FULL), and as `kcoord serve`
on a real 3 MiB tmpfs with a kafka-python consumer in its group.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client, KafkaError
from kcoord.config import GroupConfig
from kcoord.store import SqliteRecords, check_store

from ..support.interop_member import MEMBERS
from ..support.metrics import scrape, value
from ..support.servers import ThreadServer, form_group, free_port, heartbeat, serve
from ..support.waits import wait_for


def commit(c: Client, group: str, offsets: dict[int, int], metadata: str = "", topic: str = "t") -> list[int]:
    """A simple (generation -1) OffsetCommit; the error code of each partition."""
    r = c.call(8, 8, wire.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        wire.OffsetCommitRequestTopic(name=topic, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata=metadata)
            for p, o in offsets.items()])]))
    return [p.error_code for t in r.topics for p in t.partitions]


def consumer_heartbeat(c: Client, group: str, member: str, epoch: int, topics: list[str] | None = None,
                       owned: list | None = None) -> wire.ConsumerGroupHeartbeatResponse:
    return c.request(wire.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=topics, topic_partitions=[] if epoch == 0 else owned), 0)


def fetched(c: Client, group: str) -> dict[int, int]:
    r = c.call(9, 7, wire.OffsetFetchRequest(group_id=group, topics=None))
    assert r.error_code == E.NONE
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


def events(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "kcoord", {}).get("event") == name]


def test_a_full_store_refuses_writes_keeps_heartbeats_and_recovers(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO)
    records = SqliteRecords(str(tmp_path))
    srv = ThreadServer(records, topics=["t:64"], group=GroupConfig(group_initial_rebalance_delay_ms=0))
    store = srv.server.store
    bootstrap = f"127.0.0.1:{srv.port}"
    try:
        with Client(bootstrap) as member, Client(bootstrap) as other:
            j = form_group(member, "steady")
            assert commit(other, "solo", {0: 1}) == [E.NONE]
            modern = consumer_heartbeat(member, "modern", "a", 0, ["t"])  # a KIP-848 member, its assignment taken
            modern = consumer_heartbeat(member, "modern", "a", modern.member_epoch, None, [
                wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                for tp in modern.assignment.topic_partitions])
            assert modern.error_code == E.NONE
            # No room to grow: SQLite answers SQLITE_FULL ("database or disk is full") to a write that needs a page.
            pages = records.db.execute("PRAGMA page_count").fetchone()[0]
            records.db.execute(f"PRAGMA max_page_count = {pages}")
            with Client(bootstrap) as filler:
                with pytest.raises((KafkaError, ConnectionError)):  # closed unanswered: its write failed
                    commit(filler, "big", dict.fromkeys(range(64), 7), "m" * 4000)
            assert store.full
            # refused up front, with a code the client retries on
            assert commit(other, "solo", {0: 2}) == [E.COORDINATOR_NOT_AVAILABLE]
            joined = other.call(11, 5, wire.JoinGroupRequest(
                group_id="newcomer", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                protocol_type="consumer", protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert joined.error_code == E.COORDINATOR_NOT_AVAILABLE and "newcomer" not in srv.server.coordinator.groups
            deleted = other.call(42, 2, wire.DeleteGroupsRequest(groups_names=["steady"]))
            assert deleted.results[0].error_code == E.COORDINATOR_NOT_AVAILABLE
            # a KIP-848 join is refused; a member's steady heartbeat is answered
            refused = consumer_heartbeat(other, "modern", "b", 0, ["t"])
            assert refused.error_code == E.COORDINATOR_NOT_AVAILABLE
            # the formed groups keep their heartbeats, and reads are served
            for _ in range(3):
                assert heartbeat(member, "steady", j) == E.NONE
                steady = consumer_heartbeat(member, "modern", "a", modern.member_epoch)
                assert steady.error_code == E.NONE and steady.member_epoch == modern.member_epoch
            assert fetched(other, "solo") == {0: 1}
            # a consumer's long poll (a Fetch held 300 ms) is answered, not left waiting behind the write that fails
            polled = other.call(1, 12, wire.FetchRequest(
                replica_id=-1, max_wait_ms=300, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[wire.FetchRequestFetchTopic(
                    topic="t", partitions=[wire.FetchRequestFetchPartition(
                        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                        log_start_offset=-1, partition_max_bytes=1 << 20)])]))
            assert polled.error_code == E.NONE and store.full
            records.db.execute("PRAGMA max_page_count = 1073741823")  # room again
            wait_for(lambda: commit(other, "solo", {0: 3}) == [E.NONE], "a commit accepted once there is room")
            assert not store.full and heartbeat(member, "steady", j) == E.NONE
            # the write that failed was kept and went with the retry: memory and the store agree
            assert fetched(other, "big") == dict.fromkeys(range(64), 7)
            assert fetched(other, "solo") == {0: 3}
        report = check_store(str(tmp_path))
        assert report.ok and report.offsets == 65, report.problems
        assert len(events(caplog, "store-full")) == 1 and len(events(caplog, "store-writable")) == 1
        assert not events(caplog, "store-failure")
    finally:
        srv.close()
    assert srv.error is None and srv.server.failed is None


# ---- a real full filesystem ---------------------------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path):
    """A 3 MiB tmpfs (mounting needs root, as CI runs)."""
    where = tmp_path / "small"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.interop
def test_a_full_filesystem_keeps_a_real_consumers_group_and_recovers(small_fs, tmp_path) -> None:
    port, mport = free_port(), free_port()
    srv = serve(port, tmp_path / "server.log", "--data-dir", str(small_fs / "data"), "--topic", "orders:12",
                "--topic", "t:64", "--metrics-port", str(mport), "--set", "group.initial.rebalance.delay.ms=0")
    member = None
    try:
        member = MEMBERS["kafka-python"](srv.bootstrap, "steady", "orders", client_id="steady-1").start()
        formed = wait_for(lambda: (d := srv.describe("steady"))["state"] == "Stable" and d["members"] and d,
                          "the consumer's group to form")
        who = (formed["generation"], [m["member_id"] for m in formed["members"]])
        # Fill the filesystem but for a little, then commit large metadata from another client until it is full.
        st = os.statvfs(small_fs)
        filler = small_fs / "filler"
        filler.write_bytes(b"\0" * max(st.f_bavail * st.f_frsize - 256 * 1024, 0))

        def refused() -> bool:
            try:
                with Client(srv.bootstrap) as c:
                    return E.COORDINATOR_NOT_AVAILABLE in commit(c, "filler", dict.fromkeys(range(64), 1), "m" * 4000)
            except (KafkaError, ConnectionError):
                return False  # the write that found the disk full: its connection closes unanswered

        wait_for(refused, "a commit refused for a full disk")
        before = scrape(mport)
        assert value(before, "kcoord_store_full") == 1
        # the consumer goes on heartbeating, answered without error, in the same generation
        wait_for(lambda: value(scrape(mport), "kcoord_requests_total", api="Heartbeat")
                 >= value(before, "kcoord_requests_total", api="Heartbeat") + 3, "three heartbeats while full")
        after = scrape(mport)
        assert value(after, "kcoord_request_errors_total", api="Heartbeat") == 0
        assert value(after, "kcoord_store_full") == 1
        now = srv.describe("steady")
        assert (now["generation"], [m["member_id"] for m in now["members"]]) == who and now["state"] == "Stable"
        srv.check_alive()
        filler.unlink()  # room again: the next retry writes, and commits are accepted
        wait_for(lambda: value(scrape(mport), "kcoord_store_full") == 0, "the store to be writable again")
        member.commit({0: 5})  # the consumer's own commit (kafka-python raises on an error)
        assert member.committed([0]) == {0: 5}
        assert srv.describe("steady")["generation"] == who[0]
        log = Path(srv.log).read_text()
        assert log.count("the store is full") == 1 and log.count("the store is writable again") == 1
    finally:
        if member is not None:
            member.close()
        srv.proc.terminate()
        rc = srv.proc.wait(timeout=15)
    assert rc == 0, srv.log_tail()
