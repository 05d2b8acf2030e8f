"""One real Kafka consumer (confluent-kafka, kafka-python or aiokafka) driven on a thread of its own, for the
interop tests; run as a module it is one member in a subprocess (for the kill tests).

The owner thread creates the client, subscribes, polls, runs the test's commands between polls and closes it:
none of the three clients is meant to be used from several threads. What the test reads (the assignment the
client reports, the partitions its rebalance listener saw revoked) is published under a lock.

    python -m tests.support.interop_member --kind aiokafka --bootstrap 127.0.0.1:P --group G --topic orders \
        --client-id c1 [--instance-id i1]
prints one JSON line each time the client's assignment changes and runs until it is killed (SIGTERM: closes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

KINDS = ("confluent", "kafka-python", "aiokafka")
SESSION_TIMEOUT_MS = 6000  # the server's group.min.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 1000
POLL_S = 0.1


class Member:
    """A consumer on its own thread. `run(fn)` executes `fn(consumer)` on that thread between polls."""

    kind = ""

    def __init__(self, bootstrap: str, group: str, topic: str, *, client_id: str, instance_id: str | None = None,
                 strategy: str | None = None, track_positions: bool = False,
                 on_change: Callable[["Member"], None] | None = None,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, client_config: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.client_config = client_config or {}  # more of the client's own settings (security: SASL, TLS)
        self.group = group
        self.topic = topic
        self.client_id = client_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.strategy = strategy
        self.track_positions = track_positions  # confluent: needs librdkafka's statistics (see positions())
        self.on_change = on_change
        self._lock = threading.Lock()
        self._assigned: frozenset[int] = frozenset()
        self._revoked: list[tuple[float, frozenset[int]]] = []  # (monotonic time, partitions), non-empty only
        self._callbacks: list[tuple[float, str, frozenset[int]]] = []  # every listener call, for messages
        self._commands: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._started = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"{self.kind}:{client_id}", daemon=True)

    # ---- what the test reads --------------------------------------------------------------------

    @property
    def assigned(self) -> frozenset[int]:
        with self._lock:
            return self._assigned

    def revocations_since(self, t: float) -> list[frozenset[int]]:
        with self._lock:
            return [ps for when, ps in self._revoked if when >= t]

    def callbacks(self) -> list[str]:
        with self._lock:
            return [f"{name}{sorted(ps)}" for _, name, ps in self._callbacks]

    def __repr__(self) -> str:
        return f"<{self.kind} {self.client_id} instance={self.instance_id} assigned={sorted(self.assigned)}>"

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "Member":
        self._thread.start()
        return self

    def close(self, timeout: float = 20.0) -> None:
        """Close the client on its thread (a dynamic member sends LeaveGroup, a static one does not)."""
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self!r} did not close within {timeout}s")

    def run(self, fn: Callable[[Any], Any], timeout: float = 20.0) -> Any:
        """fn(consumer) on the owner thread; an awaitable result is awaited there (aiokafka)."""
        if self.error is not None:
            raise AssertionError(f"{self!r} failed earlier: {self.error!r}")
        fut: Future = Future()
        self._commands.put((fn, fut))
        return fut.result(timeout)

    # ---- listener plumbing ----------------------------------------------------------------------

    def _record(self, name: str, partitions) -> None:
        ps = frozenset(p for _, p in partitions)
        with self._lock:
            self._callbacks.append((time.monotonic(), name, ps))
            if name in ("revoked", "lost") and ps:
                self._revoked.append((time.monotonic(), ps))

    def _publish(self, assignment) -> None:
        ps = frozenset(p for t, p in assignment if t == self.topic)
        changed = False
        with self._lock:
            if ps != self._assigned:
                self._assigned = ps
                changed = True
        if changed and self.on_change is not None:
            self.on_change(self)

    def _run_commands(self, consumer) -> list[tuple[Any, Future]]:
        """Run queued commands; those returning awaitables are handed back to be awaited."""
        pending = []
        while True:
            try:
                fn, fut = self._commands.get_nowait()
            except queue.Empty:
                return pending
            try:
                result = fn(consumer)
            except BaseException as e:  # noqa: BLE001 - handed to the test
                fut.set_exception(e)
                continue
            if asyncio.iscoroutine(result):
                pending.append((result, fut))
            else:
                fut.set_result(result)

    def _main(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            while True:  # nobody will run what is left
                try:
                    _, fut = self._commands.get_nowait()
                except queue.Empty:
                    break
                fut.set_exception(AssertionError(f"{self!r} stopped: {self.error!r}"))

    def _loop(self) -> None:
        raise NotImplementedError

    # ---- per-client operations (built as commands) ------------------------------------------------

    def commit(self, offsets: dict[int, int]) -> None:
        raise NotImplementedError

    def committed(self, partitions) -> dict[int, int | None]:
        raise NotImplementedError

    def positions(self, partitions) -> dict[int, int | None]:
        raise NotImplementedError


class ConfluentMember(Member):
    kind = "confluent"

    def _loop(self) -> None:
        from confluent_kafka import Consumer

        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.client_id,
                "session.timeout.ms": self.session_timeout_ms, "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 60_000}
        if self.instance_id is not None:
            conf["group.instance.id"] = self.instance_id
        if self.strategy is not None:
            conf["partition.assignment.strategy"] = self.strategy
        if self.track_positions:
            conf["statistics.interval.ms"] = 200
            conf["stats_cb"] = self._on_stats
        self._fetch_positions: dict[int, int] = {}
        conf.update(self.client_config)
        c = Consumer(conf)
        try:
            # With no assign call inside the callbacks, confluent-kafka assigns (eager) or incrementally
            # assigns/unassigns (cooperative) itself after each callback returns.
            c.subscribe([self.topic], on_assign=lambda _c, ps: self._record("assigned", _tp(ps)),
                        on_revoke=lambda _c, ps: self._record("revoked", _tp(ps)),
                        on_lost=lambda _c, ps: self._record("lost", _tp(ps)))
            while not self._stop.is_set():
                for coro, fut in self._run_commands(c):
                    fut.set_exception(TypeError("confluent commands are synchronous"))
                c.poll(POLL_S)
                self._publish(_tp(c.assignment()))
        finally:
            c.close()

    def commit(self, offsets):
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
        res = self.run(lambda c: c.commit(offsets=tps, asynchronous=False))
        bad = [(tp.partition, tp.error) for tp in res or () if tp.error]
        assert not bad, f"{self!r}: commit errors {bad}"

    def committed(self, partitions):
        from confluent_kafka import TopicPartition

        res = self.run(lambda c: c.committed([TopicPartition(self.topic, p) for p in partitions], timeout=10))
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res}

    def _on_stats(self, blob: str) -> None:
        parts = json.loads(blob).get("topics", {}).get(self.topic, {}).get("partitions", {})
        with self._lock:
            self._fetch_positions = {int(p): s["next_offset"] for p, s in parts.items()
                                     if int(p) >= 0 and s.get("fetch_state") == "active"}

    def positions(self, partitions):
        """The offsets librdkafka fetches next. Its position() API is the offset after the last message handed
        to the application, unset until a message is consumed, and kcoord stores no messages: the fetch
        position is only visible in the statistics (per partition next_offset, while fetch_state is active)."""
        assert self.track_positions, "start the confluent member with track_positions=True"
        with self._lock:
            return {p: self._fetch_positions.get(p) for p in partitions}


class KafkaPythonMember(Member):
    kind = "kafka-python"

    def _loop(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._record("revoked", _tp(revoked))

            def on_partitions_assigned(self, assigned):
                member._record("assigned", _tp(assigned))

            def on_partitions_lost(self, lost):
                member._record("lost", _tp(lost))

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.client_id,
                          group_instance_id=self.instance_id, session_timeout_ms=self.session_timeout_ms,
                          heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, enable_auto_commit=False,
                          auto_offset_reset="earliest", request_timeout_ms=10_000, **self.client_config)
        try:
            c.subscribe([self.topic], listener=Listener())
            self._await_metadata(c)
            while not self._stop.is_set():
                for coro, fut in self._run_commands(c):
                    fut.set_exception(TypeError("kafka-python commands are synchronous"))
                c.poll(timeout_ms=int(POLL_S * 1000))
                self._publish(_tp(c.assignment()))
        finally:
            c.close(autocommit=False)

    def _await_metadata(self, c, timeout: float = 10.0) -> None:
        """Hold the first poll (and so the first JoinGroup) until the client's metadata lists the topic's partitions.

        kafka-python 3.0.12 strands a member when a rejoin that only its metadata asked for (the leader assigned
        from metadata without the topic, then the topic's partitions arrived) is cut short by poll's timeout after
        it sent SyncGroup: the next poll's `need_rejoin()` is already False, so the finished join is never read,
        heartbeats stay disabled and the coordinator expires the member a session later. Its own debug log shows
        "coordinator.poll: timeout in ensure_active_group", then "Received SyncGroup response" and nothing more.
        A leader that joins before its first metadata answer (sent ~100 ms after subscribe) takes that path. Beside
        two CPU burners, 1 of 13 joins of a confluent-kafka and a kafka-python member stranded it this way; with this
        wait, 0 of 60 did. The topic may be one the subscription creates (auto-create), so this asks again until it
        is there, then goes on."""
        deadline = time.monotonic() + timeout
        while not c.partitions_for_topic(self.topic) and time.monotonic() < deadline:
            time.sleep(0.05)

    def commit(self, offsets):
        from kafka import OffsetAndMetadata, TopicPartition

        req = {TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        self.run(lambda c: c.commit(req, timeout_ms=10_000))

    def committed(self, partitions):
        from kafka import TopicPartition

        return self.run(lambda c: {p: c.committed(TopicPartition(self.topic, p), timeout_ms=10_000)
                                   for p in partitions})

    def positions(self, partitions):
        from kafka import TopicPartition

        return self.run(lambda c: {p: c.position(TopicPartition(self.topic, p), timeout_ms=10_000)
                                   for p in partitions})


class AiokafkaMember(Member):
    kind = "aiokafka"

    def _loop(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._record("revoked", _tp(revoked))

            def on_partitions_assigned(self, assigned):
                member._record("assigned", _tp(assigned))

        c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.client_id,
                             group_instance_id=self.instance_id, session_timeout_ms=self.session_timeout_ms,
                             heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10_000, **self.client_config)
        c.subscribe([self.topic], listener=Listener())
        await c.start()
        try:
            while not self._stop.is_set():
                for coro, fut in self._run_commands(c):
                    try:
                        fut.set_result(await coro)
                    except BaseException as e:  # noqa: BLE001 - handed to the test
                        fut.set_exception(e)
                await c.getmany(timeout_ms=int(POLL_S * 1000))
                self._publish(_tp(c.assignment()))
        finally:
            await c.stop()

    def commit(self, offsets):
        from aiokafka import TopicPartition

        req = {TopicPartition(self.topic, p): o for p, o in offsets.items()}
        self.run(lambda c: c.commit(req))

    def committed(self, partitions):
        from aiokafka import TopicPartition

        async def fetch(c):
            return {p: await c.committed(TopicPartition(self.topic, p)) for p in partitions}

        return self.run(fetch)

    def positions(self, partitions):
        from aiokafka import TopicPartition

        async def fetch(c):
            return {p: await c.position(TopicPartition(self.topic, p)) for p in partitions}

        return self.run(fetch)


MEMBERS: dict[str, type[Member]] = {"confluent": ConfluentMember, "kafka-python": KafkaPythonMember,
                                    "aiokafka": AiokafkaMember}


def _tp(partitions) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in partitions or ()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--instance-id")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # a subprocess member: its clients' deprecation noise is not the test

    def report(m: Member) -> None:
        print(json.dumps({"client_id": m.client_id, "assigned": sorted(m.assigned)}), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    m = MEMBERS[args.kind](args.bootstrap, args.group, args.topic, client_id=args.client_id,
                           instance_id=args.instance_id, on_change=report).start()
    print(json.dumps({"client_id": args.client_id, "started": True}), flush=True)
    while not stop.wait(0.2):
        if m.error is not None:
            print(json.dumps({"client_id": args.client_id, "error": repr(m.error)}), flush=True)
            return 1
    m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
