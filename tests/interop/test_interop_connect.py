"""Connect groups with real processes: `kcoord serve` and workers from examples/connect_worker.py (kcoord.client.worker's
Worker and the IncrementalCooperativeAssignor), each a subprocess that appends a JSON line for every unit it starts
or stops. Timers are shortened through the server's settings (session 3 s, heartbeat 300 ms).

Every test checks, from those logs, that no unit ever ran on two workers at the same instant (a unit's run intervals
across workers never overlap; a killed worker's intervals end at the kill) and that the group ends with every unit
running exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client

from ..support import waits
from ..support.servers import CONNECT_HEARTBEAT_MS, CONNECT_SESSION_MS, CONNECT_SETTINGS, ROOT, Server, free_port, serve

pytestmark = pytest.mark.interop

WORKER = ROOT / "examples" / "connect_worker.py"
SESSION_MS, HEARTBEAT_MS, SETTINGS = CONNECT_SESSION_MS, CONNECT_HEARTBEAT_MS, CONNECT_SETTINGS
CONNECTORS, TASKS = 20, 8
ALL = frozenset([f"conn{c}" for c in range(CONNECTORS)] + [f"conn{c}-{t}" for c in range(CONNECTORS)
                                                           for t in range(TASKS)])
CONVERGE_S = 30


def start_server(port: int, log: Path, *extra: str) -> Server:
    args = [a for s in SETTINGS for a in ("--set", s)]
    return serve(port, log, *args, *extra)


class Workers:
    """Worker processes of one group, each logging to its own JSON-lines file."""

    def __init__(self, tmp: Path, server: Server, group: str, delay_ms: int = 0) -> None:
        self.tmp, self.server, self.group, self.delay_ms = tmp, server, group, delay_ms
        self.procs: dict[str, subprocess.Popen] = {}  # live processes by name
        self.ended: dict[str, float] = {}  # the killed workers: name -> kill time
        self.count = 0

    def start(self, name: str | None = None, *, instance_id: str | None = None, max_version: int = 2) -> str:
        name = name or f"w{self.count}"
        self.count += 1
        args = [sys.executable, str(WORKER), "--bootstrap", self.server.bootstrap, "--group", self.group,
                "--connectors", str(CONNECTORS), "--tasks", str(TASKS), "--name", name, "--log",
                str(self.tmp / f"{name}.jsonl"), "--delay-ms", str(self.delay_ms), "--max-version", str(max_version),
                "-v"]
        if instance_id is not None:
            args += ["--instance-id", instance_id]
        with open(self.tmp / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        return name

    def kill(self, name: str) -> float:
        proc = self.procs.pop(name)
        t = time.time()
        proc.kill()
        proc.wait(10)
        self.ended[name] = t
        return t

    def stop(self, name: str) -> None:
        """SIGTERM: the worker stops its units and leaves; it must exit cleanly."""
        proc = self.procs.pop(name)
        proc.terminate()
        rc = proc.wait(20)
        assert rc == 0, f"worker {name} exited with {rc}:\n{self.out_tail(name)}"

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(10)
        self.procs.clear()

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"worker {name} exited with {proc.returncode}:\n{self.out_tail(name)}"

    def out_tail(self, name: str, n: int = 30) -> str:
        path = self.tmp / f"{name}.out"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def events(self) -> list[dict]:
        """Every start/stop line of every worker, in time order (a killed worker's torn last line is skipped)."""
        out = []
        for path in sorted(self.tmp.glob("*.jsonl")):
            lines = path.read_text().splitlines()
            for i, line in enumerate(lines):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    assert i == len(lines) - 1 and path.stem in self.ended, f"{path.name}: bad line {line!r}"
        return sorted(out, key=lambda e: e["t"])

    def running(self, events: list[dict] | None = None) -> dict[str, set[str]]:
        """unit -> the live workers running it now (started and not stopped since)."""
        held: dict[tuple[str, str], bool] = {}
        for e in self.events() if events is None else events:
            held[e["worker"], e["unit"]] = e["event"] == "start"
        out: dict[str, set[str]] = {}
        for (worker, unit), on in held.items():
            if on and worker not in self.ended:
                out.setdefault(unit, set()).add(worker)
        return out

    def intervals(self, events: list[dict]) -> dict[str, list[tuple[float, float, str]]]:
        """unit -> [(start, end, worker)]; an interval still open ends at its worker's kill, or never."""
        opened: dict[tuple[str, str], float] = {}
        out: dict[str, list[tuple[float, float, str]]] = {}
        for e in events:
            key = (e["worker"], e["unit"])
            if e["event"] == "start":
                assert key not in opened, f"{e['worker']} started {e['unit']} twice: {e}"
                opened[key] = e["t"]
            else:
                assert key in opened, f"{e['worker']} stopped {e['unit']}, which it was not running: {e}"
                out.setdefault(e["unit"], []).append((opened.pop(key), e["t"], e["worker"]))
        for (worker, unit), t in opened.items():
            out.setdefault(unit, []).append((t, self.ended.get(worker, float("inf")), worker))
        return out

    def assert_never_twice(self) -> None:
        """No unit ran on two workers at the same instant."""
        events = self.events()
        for unit, spans in self.intervals(events).items():
            spans.sort()
            for (s1, e1, w1), (s2, e2, w2) in zip(spans, spans[1:], strict=False):
                assert s2 >= e1, (f"{unit} ran on {w1} [{s1:.3f}, {e1:.3f}] and on {w2} [{s2:.3f}, {e2:.3f}] at "
                                  f"once")

    def converged(self) -> tuple[bool, dict]:
        """Every unit on exactly one live worker, every live worker busy, and the coordinator settled."""
        self.check_alive()
        running = self.running()
        twice = {u: sorted(ws) for u, ws in running.items() if len(ws) > 1}
        missing = sorted(ALL - running.keys())
        extra = sorted(running.keys() - ALL)
        per_worker: dict[str, int] = {name: 0 for name in self.procs}
        for ws in running.values():
            for w in ws:
                per_worker[w] = per_worker.get(w, 0) + 1
        d = describe(self.server, self.group, missing_ok=True)
        if d is None:
            return False, {"group": "not created yet", "per_worker": per_worker}
        settled = (d.group_epoch == d.assignment_epoch and d.computing_member_id is None
                   and len(d.members) == len(self.procs)
                   and all(m.member_epoch == d.group_epoch and m.state == "STABLE" for m in d.members))
        ok = not twice and not missing and not extra and all(per_worker.values()) and settled
        return ok, {"twice": twice, "missing": missing[:10], "n_missing": len(missing), "extra": extra,
                    "per_worker": per_worker, "group": summary(d)}

    def wait_converged(self, what: str, timeout: float = CONVERGE_S) -> dict:
        return wait_until(self.converged, timeout, what, self)


def describe(server: Server, group: str, missing_ok: bool = False):
    with Client(server.bootstrap, timeout=10) as c:
        resp = c.request(wire.ConnectGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 0)
    g = resp.groups[0]
    if missing_ok and g.error_code == E.GROUP_ID_NOT_FOUND:
        return None
    assert g.error_code == 0, f"ConnectGroupDescribe {group}: {g.error_code} {g.error_message}"
    return g


def summary(g) -> dict:
    return {"state": g.group_state, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": (g.assignor_name, g.assignor_version), "computing": g.computing_member_id,
            "delay_remaining_ms": g.delay_remaining_ms,
            "members": [(m.member_id[:8], m.instance_id, m.member_epoch, m.state, m.minimum_version,
                         m.maximum_version) for m in g.members],
            "history": [(h.group_epoch, h.reason) for h in g.history[-8:]]}


def wait_until(check: Callable[[], tuple[bool, object]], timeout: float, what: str, workers: Workers):
    def logs() -> str:
        outs = "\n".join(f"--- {n}\n{workers.out_tail(n, 10)}" for n in list(workers.procs)[:3])
        return f"\nserver log tail:\n{workers.server.log_tail()}\nworkers:\n{outs}"
    return waits.wait_until(check, timeout, what, interval=0.2, show=lambda o: json.dumps(o, indent=1, default=repr),
                            more=logs)


def hold_steady(workers: Workers, seconds: float) -> None:
    """The group stays converged, with no unit starting or stopping, for `seconds`."""
    before = len(workers.events())
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ok, observed = workers.converged()
        assert ok, f"the group moved: {json.dumps(observed, indent=1, default=repr)}"
        time.sleep(0.3)
    moved = workers.events()[before:]
    assert not moved, f"units started or stopped in a stable group: {moved[:10]}"


@pytest.fixture
def env(tmp_path):
    """(port, server log) and a teardown that kills whatever the test left running."""
    made: list[Workers | Server] = []
    yield tmp_path, made
    for x in made:
        if isinstance(x, Workers):
            x.close()
        elif x.proc.poll() is None:
            x.proc.kill()
            x.proc.wait(10)


def test_connect_workers_share_units_exactly_once(env) -> None:
    tmp, made = env
    server = start_server(free_port(), tmp / "server.log")
    made.append(server)
    workers = Workers(tmp, server, "connect-five", delay_ms=0)
    made.append(workers)
    for _ in range(5):
        workers.start()
    observed = workers.wait_converged("5 workers sharing 20 connectors x 8 tasks")
    assert sorted(observed["per_worker"].values())[-1] - sorted(observed["per_worker"].values())[0] <= 2, observed
    hold_steady(workers, 1.5)
    workers.assert_never_twice()
    workers.stop_all()
    workers.assert_never_twice()
    assert workers.running() == {}, "a worker exited without stopping its units"
    server.check_alive()


def test_connect_killed_worker_units_wait_for_the_scheduled_delay(env) -> None:
    tmp, made = env
    delay_ms = 4000
    server = start_server(free_port(), tmp / "server.log")
    made.append(server)
    workers = Workers(tmp, server, "connect-kill", delay_ms=delay_ms)
    made.append(workers)
    for _ in range(3):
        workers.start()
    workers.wait_converged("3 workers forming")
    victim = "w1"
    lost = {u for u, ws in workers.running().items() if victim in ws}
    assert lost
    killed_at = workers.kill(victim)
    workers.wait_converged("the survivors taking over the killed worker's units",
                           timeout=(SESSION_MS + delay_ms) / 1000 + CONVERGE_S)
    events = workers.events()
    first = {}
    for e in events:
        if e["event"] == "start" and e["unit"] in lost and e["t"] > killed_at:
            first.setdefault(e["unit"], e["t"])
    assert first.keys() == lost, f"never restarted: {sorted(lost - first.keys())[:10]}"
    # The units wait for the session to expire (less at most a heartbeat interval and some slack), then the delay.
    earliest = killed_at + (delay_ms + SESSION_MS - HEARTBEAT_MS) / 1000 - 0.5
    early = {u: round(t - killed_at, 3) for u, t in first.items() if t < earliest}
    assert not early, f"the killed worker's units restarted before session expiry + delay ({delay_ms} ms): {early}"
    moved = [e for e in events if e["t"] > killed_at and e["unit"] not in lost]
    assert not moved, f"the survivors' own units moved: {moved[:10]}"
    workers.assert_never_twice()
    workers.stop_all()
    workers.assert_never_twice()
    server.check_alive()


def test_connect_rolling_upgrade_of_the_assignor_version(env) -> None:
    tmp, made = env
    server = start_server(free_port(), tmp / "server.log")
    made.append(server)
    group = "connect-upgrade"
    workers = Workers(tmp, server, group, delay_ms=1000)
    made.append(workers)
    for i in range(3):
        workers.start(f"v1-{i}", instance_id=f"worker-{i}", max_version=1)
    workers.wait_converged("3 workers at version range [1, 1]")
    assert describe(server, group).assignor_version == 1
    for i in range(3):
        workers.stop(f"v1-{i}")  # static leave (-2) after stopping its units
        workers.start(f"v2-{i}", instance_id=f"worker-{i}", max_version=2)
        workers.wait_converged(f"worker-{i} back with version range [1, 2]")
        workers.assert_never_twice()
    d = describe(server, group)
    assert d.assignor_version == 2, summary(d)
    assert sorted((m.instance_id, m.minimum_version, m.maximum_version) for m in d.members) == \
        [(f"worker-{i}", 1, 2) for i in range(3)]
    workers.stop_all()
    workers.assert_never_twice()
    server.check_alive()


def test_connect_workers_ride_out_a_coordinator_restart(env) -> None:
    tmp, made = env
    port, data_dir, log = free_port(), tmp / "data", tmp / "server.log"
    server = start_server(port, log, "--data-dir", str(data_dir))
    made.append(server)
    group = "connect-restart"
    workers = Workers(tmp, server, group, delay_ms=10_000)
    made.append(workers)
    for _ in range(3):
        workers.start()
    workers.wait_converged("3 workers forming")
    hold_steady(workers, 1.0)
    before = describe(server, group)
    n_events = len(workers.events())

    server.proc.kill()
    assert server.proc.wait(10) == -signal.SIGKILL
    workers.server = server = start_server(port, log, "--data-dir", str(data_dir))
    made.append(server)
    # Longer than a session timeout: a worker that had not reconnected with its epoch would be fenced by now.
    time.sleep(SESSION_MS / 1000 + 1.0)
    workers.wait_converged("the group back on the restarted coordinator", timeout=10)
    after = describe(server, group)
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch), \
        (summary(before), summary(after))
    assert sorted((m.member_id, m.member_epoch) for m in after.members) == \
        sorted((m.member_id, m.member_epoch) for m in before.members), (summary(before), summary(after))
    moved = workers.events()[n_events:]
    assert not moved, f"units started or stopped across the coordinator restart: {moved[:10]}"
    workers.stop_all()
    workers.assert_never_twice()
    server.check_alive()


def test_readme_worker_example_runs(tmp_path) -> None:
    """The README's kcoord.client.worker example, as written, against a real server: the worker gets every unit."""
    import re

    code = re.search(r"#### The worker client.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    port = free_port()
    server = start_server(port, tmp_path / "server.log")
    try:
        out = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:9092", server.bootstrap)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(sorted(["orders-sink", "audit"] + [f"orders-sink-{i}" for i in range(4)]
                                                + [f"audit-{i}" for i in range(2)]))
    finally:
        server.proc.kill()
        server.proc.wait(10)
