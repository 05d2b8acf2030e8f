"""A Connect-style worker on a kcoord connect group: it runs its share of N connectors x M tasks, each unit an
asyncio task, and computes the group's assignment when the coordinator picks it.

    kcoord serve --port 9092 --set group.coordinator.rebalance.protocols=classic,consumer,connect
    python examples/connect_worker.py --bootstrap 127.0.0.1:9092 --group workers --connectors 4 --tasks 8
    python examples/connect_worker.py --bootstrap 127.0.0.1:9092 --group workers --connectors 4 --tasks 8

Units are named as Connect names them: connector "conn0", its task "conn0-3". Every start and stop is printed;
with --log FILE it is also appended as a JSON line {"unit": ..., "event": "start"|"stop", "t": time.time(),
"worker": ...} ("stop" is written once the unit has stopped, before the coordinator hears it was released).
SIGTERM or Ctrl-C stops every unit and leaves the group (with --instance-id, a static leave: epoch -2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
import uuid

from kcoord.client.worker import ConnectGroupError, Unit, Units, Worker
from kcoord.client.worker_assignor import IncrementalCooperativeAssignor


class Runner:
    """Runs units as asyncio tasks and writes their start/stop events."""

    def __init__(self, name: str, log_path: str | None) -> None:
        self.name = name
        self.log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115  (open for the process)
        self.running: dict[Unit, asyncio.Task] = {}

    def event(self, unit: Unit, event: str) -> None:
        print(f"{self.name}: {event} {unit}", flush=True)
        if self.log is not None:
            self.log.write(json.dumps({"unit": str(unit), "event": event, "t": time.time(), "worker": self.name})
                           + "\n")

    async def work(self, unit: Unit) -> None:
        while True:  # a connector or task doing its work
            await asyncio.sleep(1)

    def assigned(self, units: Units) -> None:
        for u in sorted(units):
            self.event(u, "start")
            self.running[u] = asyncio.create_task(self.work(u))

    async def revoked(self, units: Units) -> None:
        tasks = [(u, self.running.pop(u)) for u in sorted(units) if u in self.running]
        for _, t in tasks:
            t.cancel()
        await asyncio.gather(*(t for _, t in tasks), return_exceptions=True)
        for u, _ in tasks:
            self.event(u, "stop")


async def main(args: argparse.Namespace) -> int:
    counts = {f"conn{i}": args.tasks for i in range(args.connectors)}
    assignor = IncrementalCooperativeAssignor(minimum_version=args.min_version, maximum_version=args.max_version,
                                              scheduled_rebalance_max_delay_ms=args.delay_ms)
    member_id = args.member_id or uuid.uuid4().hex
    runner = Runner(args.name or args.instance_id or member_id[:8], args.log)
    worker = Worker(args.bootstrap, args.group, units=counts, on_assigned=runner.assigned, on_revoked=runner.revoked,
                    member_id=member_id, instance_id=args.instance_id, url=args.url, assignor=assignor,
                    rebalance_timeout_ms=args.rebalance_timeout_ms, client_id=args.client_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await worker.start()
        closed = asyncio.ensure_future(worker.wait_closed())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({closed, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if closed.done():
            closed.result()
        await worker.stop(static=args.instance_id is not None)
    except ConnectGroupError as e:
        print(f"{runner.name}: {e}", file=sys.stderr)
        await worker.stop()
        return 2
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="kcoord serve's HOST:PORT")
    p.add_argument("--group", default="connect-cluster", help="the worker group id")
    p.add_argument("--connectors", type=int, default=4, help="connectors conn0..conn{N-1}")
    p.add_argument("--tasks", type=int, default=8, help="tasks per connector")
    p.add_argument("--instance-id", help="a static member: SIGTERM leaves with epoch -2")
    p.add_argument("--member-id", help="default: a fresh uuid")
    p.add_argument("--name", help="the worker's name in output and log (default: instance id or member id)")
    p.add_argument("--url", default="", help="the worker's REST url, shown to the assignor")
    p.add_argument("--log", help="append JSON lines of unit starts and stops to this file")
    p.add_argument("--delay-ms", type=int, default=300_000,
                   help="scheduled.rebalance.max.delay.ms: how long a departed worker's units wait")
    p.add_argument("--min-version", type=int, default=1, help="the assignor's minimum version")
    p.add_argument("--max-version", type=int, default=2, help="the assignor's maximum version")
    p.add_argument("--rebalance-timeout-ms", type=int, default=60_000)
    p.add_argument("--client-id", default="connect-worker")
    p.add_argument("-v", "--verbose", action="store_true", help="log the worker's protocol steps")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(asyncio.run(main(args)))
