"""One confluent-kafka consumer speaking the KIP-848 protocol (`group.protocol=consumer`), on a thread of its own;
run as a module it is one member in a subprocess (for the kill tests) that prints a JSON line per assignment change.

With the consumer protocol librdkafka assigns and revokes incrementally: the listener sees only what changes, so
the member keeps the set it holds from those calls.

    python -m tests.support.interop_consumer --bootstrap 127.0.0.1:P --group G --topic orders --client-id c1 \
        [--instance-id i1]
"""

from __future__ import annotations

import argparse
import json
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

POLL_S = 0.05


class ConsumerMember:
    def __init__(self, bootstrap: str, group: str, topics: list[str], *, client_id: str,
                 instance_id: str | None = None, assignor: str | None = None,
                 on_change: Callable[[ConsumerMember], None] | None = None, conf: dict | None = None) -> None:
        # `conf`: librdkafka settings laid over the defaults, e.g. {"group.protocol": "classic", ...} for a member
        # speaking the classic protocol (its listener calls are tracked the same way).
        self.bootstrap, self.group, self.topics = bootstrap, group, topics
        self.client_id, self.instance_id, self.assignor = client_id, instance_id, assignor
        self.on_change = on_change
        self.conf = dict(conf or {})
        self.errors: list[Any] = []  # KafkaErrors librdkafka reported (error_cb and errors returned by poll)
        self._lock = threading.Lock()
        self._held: set[tuple[str, int]] = set()
        self.revoked: list[tuple[float, frozenset[tuple[str, int]]]] = []
        self.lost = 0
        self._commands: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._started = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"cg:{client_id}", daemon=True)

    @property
    def held(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return frozenset(self._held)

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(p for _, p in self.held)

    def __repr__(self) -> str:
        return f"<consumer {self.client_id} instance={self.instance_id} held={sorted(self.held)}>"

    def start(self) -> ConsumerMember:
        self._thread.start()
        assert self._started.wait(30), "the consumer did not start"
        if self.error is not None:
            raise self.error
        return self

    def run(self, fn: Callable[[Any], Any], timeout: float = 30.0) -> Any:
        fut: Future = Future()
        self._commands.put((fn, fut))
        return fut.result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Close the consumer (a dynamic member leaves with -1, a static one with -2)."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.client_id} did not close"

    def commit(self, offsets: dict[int, int], topic: str | None = None) -> None:
        from confluent_kafka import TopicPartition

        t = topic or self.topics[0]
        self.run(lambda c: c.commit(offsets=[TopicPartition(t, p, o) for p, o in offsets.items()],
                                    asynchronous=False))

    def committed(self, partitions: list[int], topic: str | None = None) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        t = topic or self.topics[0]
        got = self.run(lambda c: c.committed([TopicPartition(t, p) for p in partitions], timeout=10))
        return {tp.partition: tp.offset for tp in got}

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def _main(self) -> None:
        try:
            from confluent_kafka import Consumer

            conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                    "client.id": self.client_id, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "topic.metadata.refresh.interval.ms": 1000}
            if self.instance_id is not None:
                conf["group.instance.id"] = self.instance_id
            if self.assignor is not None:
                conf["group.remote.assignor"] = self.assignor
            conf["error_cb"] = self.errors.append
            conf.update(self.conf)
            consumer = Consumer(conf)

            def on_assign(c, parts) -> None:
                with self._lock:
                    self._held |= {(p.topic, p.partition) for p in parts}
                self._changed()

            def on_revoke(c, parts) -> None:
                gone = frozenset((p.topic, p.partition) for p in parts)
                with self._lock:
                    self._held -= gone
                    if gone:
                        self.revoked.append((time.monotonic(), gone))
                self._changed()

            def on_lost(c, parts) -> None:
                with self._lock:
                    self._held -= {(p.topic, p.partition) for p in parts}
                    self.lost += 1
                self._changed()

            consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            self.error = e
            self._started.set()
            return
        self._started.set()
        try:
            while not self._stop.is_set():
                msg = consumer.poll(POLL_S)
                if msg is not None and msg.error() is not None:
                    self.errors.append(msg.error())
                while True:
                    try:
                        fn, fut = self._commands.get_nowait()
                    except queue.Empty:
                        break
                    try:
                        fut.set_result(fn(consumer))
                    except BaseException as e:  # noqa: BLE001 - handed to the caller
                        fut.set_exception(e)
        except BaseException as e:  # noqa: BLE001
            self.error = e
        finally:
            consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--client-id", required=True)
    ap.add_argument("--instance-id")
    args = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def report(m: ConsumerMember) -> None:
        print(json.dumps({"held": sorted(p for _, p in m.held)}), flush=True)

    m = ConsumerMember(args.bootstrap, args.group, [args.topic], client_id=args.client_id,
                       instance_id=args.instance_id, on_change=report).start()
    stop.wait()
    m.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
