"""The Prometheus endpoint and the server's logs, on a real `kcoord serve` driven by real consumers.

One server runs a scenario in which groups form, rebalance, expire, lose members to an admin, replace a static
member and commit; the endpoint is scraped before and after each step and the metric that step should move is
checked to have moved by what it should (and the JSON log to have the line for it). A real Prometheus server
(Debian's package) scrapes another kcoord and a rebalance count is read back through its HTTP API.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord import wire
from kcoord.cli import main as cli_main
from kcoord.client import Client

from ..support.interop_consumer import ConsumerMember
from ..support.metrics import scrape, scrape_until, value
from ..support.servers import free_port, recv_exact, serve
from ..support.waits import wait_for

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana" / "kcoord-dashboard.json"
SECRET = "TOPSECRET-offset-metadata-7f3a"  # an offset commit's metadata: must never reach the log
PAYLOAD = b"PAYLOAD-member-metadata-91c2"  # a member's subscription bytes: likewise


def http_status(port: int, path: str, method: str = "GET") -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:  # not listening (yet, or any more)
        return 0


def join(c: Client, group: str, instance: str, session_ms: int = 30_000, member_id: str = "", version: int = 5):
    return c.request(wire.JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=PAYLOAD)]), version)


def sync(c: Client, group: str, instance: str, joined, assign: bool):
    return c.request(wire.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=instance,
        assignments=[wire.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")] if assign else []),
        3)


def json_log(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def events(path: Path, name: str, **fields) -> list[dict]:
    return [e for e in json_log(path) if e.get("event") == name and all(e.get(k) == v for k, v in fields.items())]


@pytest.fixture
def server(tmp_path: Path):
    port, mport = free_port(), free_port()
    log = tmp_path / "server.log"
    srv = serve(port, log, "--topic", "orders:4", "--data-dir", str(tmp_path / "data"), "--metrics-port", str(mport),
                "--log-format", "json", "--set", "group.initial.rebalance.delay.ms=0",
                "--set", "group.min.session.timeout.ms=500")
    srv.metrics_port = mport
    wait_for(lambda: http_status(mport, "/readyz") == 200, "/readyz")
    yield srv
    if srv.proc.poll() is None:
        srv.proc.kill()
        srv.proc.wait(10)


def classic_member(srv, group: str, cid: str, instance: str | None = None) -> ConsumerMember:
    return ConsumerMember(srv.bootstrap, group, ["orders"], client_id=cid, instance_id=instance,
                          conf={"group.protocol": "classic", "session.timeout.ms": 6000,
                                "heartbeat.interval.ms": 200}).start()


def test_metrics_follow_real_groups_and_the_log_tells_each_event(server, tmp_path: Path) -> None:
    srv, mport = server, server.metrics_port
    assert http_status(mport, "/healthz") == 200
    assert http_status(mport, "/readyz") == 200
    assert http_status(mport, "/nope") == 404
    assert http_status(mport, "/metrics", "POST") == 405
    s0 = scrape(mport)
    assert value(s0, "kcoord_ready") == 1
    assert value(s0, "kcoord_groups") == 0

    # ---- a classic group of two real consumers forms: a rebalance started by a join, completed, timed
    a = classic_member(srv, "cg", "a", "ia")
    b = classic_member(srv, "cg", "b")
    wait_for(lambda: len(a.held | b.held) == 4 and a.held and b.held, "the classic group to share orders")
    s1 = scrape_until(mport, lambda x: value(x, "kcoord_groups", group_type="classic",
                                                         state="Stable") == 1, "cg Stable")
    assert value(s1, "kcoord_group_members", group_type="classic") == 2
    assert value(s1, "kcoord_group_rebalances_started_total", group_type="classic", trigger="join") >= 1
    assert value(s1, "kcoord_group_rebalances_completed_total", group_type="classic") >= 1
    assert value(s1, "kcoord_group_rebalance_duration_seconds_count", group_type="classic") == \
        value(s1, "kcoord_group_rebalances_completed_total", group_type="classic")
    assert value(s1, "kcoord_requests_total", api="JoinGroup") >= 2
    assert value(s1, "kcoord_requests_total", api="SyncGroup") >= 2
    assert value(s1, "kcoord_request_duration_seconds_count", api="JoinGroup") == \
        value(s1, "kcoord_requests_total", api="JoinGroup")
    assert value(s1, "kcoord_request_duration_seconds_bucket", api="Heartbeat", le="+Inf") == \
        value(s1, "kcoord_requests_total", api="Heartbeat")
    assert value(s1, "kcoord_connections") >= 2
    assert value(s1, "kcoord_connections_accepted_total") >= 2
    assert value(s1, "kcoord_network_received_bytes_total") > value(s0, "kcoord_network_received_bytes_total")
    assert value(s1, "kcoord_network_sent_bytes_total") > value(s0, "kcoord_network_sent_bytes_total")
    started = events(srv.log, "rebalance-started", group="cg", trigger="join")
    assert started and started[0]["group_type"] == "classic" and "members" in started[0] and "epoch" in started[0]
    assert events(srv.log, "join-completed", group="cg")
    done = events(srv.log, "rebalance-completed", group="cg", outcome="Stable")
    assert done and done[-1]["seconds"] >= 0 and done[-1]["members"] >= 1

    # ---- commits: the count, the store's commits and fsyncs move
    a.commit({p: 10 + p for _, p in a.held})
    s2 = scrape(mport)
    assert value(s2, "kcoord_offset_commits_total") - value(s1, "kcoord_offset_commits_total") == len(a.held)
    assert value(s2, "kcoord_store_commit_duration_seconds_count") > \
        value(s1, "kcoord_store_commit_duration_seconds_count")
    assert value(s2, "kcoord_store_fsyncs_total") > value(s1, "kcoord_store_fsyncs_total")
    assert value(s2, "kcoord_requests_total", api="OffsetCommit") > value(s1, "kcoord_requests_total",
                                                                          api="OffsetCommit")
    with Client(srv.bootstrap) as c:  # a simple consumer's commit with metadata the log must not show
        r = c.request(wire.OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1, member_id="",
                                               topics=[wire.OffsetCommitRequestTopic(name="orders", partitions=[
                                                   wire.OffsetCommitRequestPartition(
                                                       partition_index=0, committed_offset=3,
                                                       committed_metadata=SECRET)])]), 8)
        assert r.topics[0].partitions[0].error_code == 0

    # ---- an error answer is counted under its API, version and Kafka's error name
    with Client(srv.bootstrap) as c:
        r = c.request(wire.HeartbeatRequest(group_id="cg", generation_id=1, member_id="nobody"), 4)
        assert r.error_code == 25  # UNKNOWN_MEMBER_ID
    s3 = scrape(mport)
    assert value(s3, "kcoord_request_errors_total", api="Heartbeat", version="4", error="UNKNOWN_MEMBER_ID") - \
        value(s2, "kcoord_request_errors_total", api="Heartbeat", version="4", error="UNKNOWN_MEMBER_ID") == 1

    # ---- a static member replaced by a new instance (a restart under the same group.instance.id)
    a.stop()  # a static member leaves nothing behind: its session holds its place
    a2 = classic_member(srv, "cg", "a2", "ia")
    scrape_until(mport, lambda x: value(x, "kcoord_static_member_replacements_total",
                                                         group_type="classic") >= 1, "a replacement")
    assert events(srv.log, "static-member-replaced", group="cg", instance="ia")

    # ---- an admin removal (KIP-345) through the CLI
    assert cli_main(["remove-members", "cg", "--instance-id", "ia", "--bootstrap", srv.bootstrap]) == 0
    s5 = scrape_until(mport, lambda x: value(x, "kcoord_admin_member_removals_total",
                                                         group_type="classic") == 1, "the admin removal")
    assert value(s5, "kcoord_group_rebalances_started_total", group_type="classic", trigger="admin-removal") >= 1
    removal = events(srv.log, "admin-removal", group="cg", instance="ia")
    assert removal and removal[0]["reason"] == "member was removed by an admin"
    a2.stop()
    b.stop()

    # ---- a session expiry: a member that joins and syncs, then never heartbeats
    with Client(srv.bootstrap) as c:
        j = join(c, "exp", "lonely", session_ms=500)
        assert j.error_code == 0
        assert sync(c, "exp", "lonely", j, assign=True).error_code == 0
    s6 = scrape_until(mport, lambda x: value(x, "kcoord_member_expirations_total", group_type="classic",
                                                         trigger="session-timeout") >= 1, "the expiry")
    assert value(s6, "kcoord_member_expirations_total", group_type="classic", trigger="session-timeout") == 1
    assert events(srv.log, "member-expired", group="exp", instance="lonely", trigger="session-timeout")
    assert value(s6, "kcoord_groups", group_type="classic", state="Empty") >= 1

    # ---- a parked JoinGroup: a second member waits while the first is asked to rejoin
    with Client(srv.bootstrap) as c1, Client(srv.bootstrap) as c2:
        j1 = join(c1, "park", "p1")
        assert sync(c1, "park", "p1", j1, assign=True).error_code == 0
        answered = threading.Event()
        t = threading.Thread(target=lambda: (join(c2, "park", "p2"), answered.set()), daemon=True)
        t.start()
        wait_for(lambda: value(scrape(mport), "kcoord_parked_requests") == 1, "the parked JoinGroup")
        assert not answered.is_set()
        assert join(c1, "park", "p1", member_id=j1.member_id).error_code == 0  # the rebalance completes
        t.join(10)
        assert answered.is_set()
    assert value(scrape(mport), "kcoord_parked_requests") == 0

    # ---- a KIP-848 consumer group: its epoch bumps are its rebalances
    m = ConsumerMember(srv.bootstrap, "kg", ["orders"], client_id="k1").start()
    wait_for(lambda: len(m.held) == 4, "the consumer group to assign")
    s7 = scrape(mport)
    assert value(s7, "kcoord_group_rebalances_started_total", group_type="consumer", trigger="join") >= 1
    assert value(s7, "kcoord_group_members", group_type="consumer") == 1
    assert value(s7, "kcoord_requests_total", api="ConsumerGroupHeartbeat") >= 1
    m.stop()
    wait_for(lambda: value(scrape(mport), "kcoord_group_rebalances_started_total", group_type="consumer",
                           trigger="leave") >= 1, "the leave's bump")
    assert events(srv.log, "rebalance-started", group="kg", group_type="consumer", trigger="leave")

    # ---- stop and start: the stop line, then the start line with what was loaded
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(30) == 0
    stopped = events(srv.log, "stopped")
    assert stopped and stopped[0]["connections"] >= 5
    text = srv.log.read_text()
    assert SECRET not in text and PAYLOAD.decode() not in text
    info = [e for e in json_log(srv.log) if e["level"] == "INFO"]
    assert not [e for e in info if "heartbeat" in e["message"].lower()], "a line per heartbeat at INFO"
    assert {e["event"] for e in info if "event" in e} >= {
        "started", "rebalance-started", "join-completed", "rebalance-completed", "static-member-replaced",
        "admin-removal", "member-expired", "stopped"}

    log2 = tmp_path / "restart.log"
    srv2 = serve(srv.port, log2, "--topic", "orders:4", "--data-dir", str(tmp_path / "data"), "--log-format", "json")
    try:
        loaded = wait_for(lambda: events(log2, "loaded"), "the loaded line")[0]
        assert loaded["offsets"] >= 2 and loaded["groups"] >= 4 and loaded["data_dir"] == str(tmp_path / "data")
        assert events(log2, "started")[0]["metrics_port"] is None
    finally:
        srv2.proc.terminate()
        srv2.proc.wait(30)


def consumer_heartbeat(c: Client, group: str, member: str, epoch: int, owned=None, join: bool = False,
                       rebalance_ms: int = 30_000) -> wire.ConsumerGroupHeartbeatResponse:
    """A KIP-848 heartbeat by hand: a join (epoch 0, subscribing to orders) or a regular one reporting `owned`
    (the topic partitions an earlier answer gave) or nothing (None)."""
    r = c.request(wire.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=rebalance_ms if join else -1,
        subscribed_topic_names=["orders"] if join else None, topic_partitions=[] if join else None if owned is None
        else [wire.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
              for tp in owned]), 0)
    assert r.error_code == 0, r
    return r


def test_a_consumer_member_fenced_by_its_rebalance_timeout_counts_as_an_expiration(server) -> None:
    """A KIP-848 member told to revoke that never does is fenced when its rebalance timeout passes: counted in
    kcoord_member_expirations_total{group_type="consumer", trigger="rebalance-timeout"} and logged as an expiry,
    and its partitions go to the member that waited for them."""
    srv, mport = server, server.metrics_port
    with Client(srv.bootstrap) as ca, Client(srv.bootstrap) as cb:
        a = consumer_heartbeat(ca, "rt", "a", 0, join=True, rebalance_ms=300)
        held = a.assignment.topic_partitions
        assert sum(len(tp.partitions) for tp in held) == 4
        b = consumer_heartbeat(cb, "rt", "b", 0, join=True)  # its share is a's until a revokes it
        assert not b.assignment.topic_partitions
        while b.member_epoch != a.member_epoch + 1:  # the target with b in it comes within the assignment interval
            time.sleep(0.1)
            b = consumer_heartbeat(cb, "rt", "b", b.member_epoch)
            assert b.error_code == 0 and b.assignment is None, b
        told = consumer_heartbeat(ca, "rt", "a", a.member_epoch, owned=held)  # told to revoke; never acknowledges
        assert sum(len(tp.partitions) for tp in told.assignment.topic_partitions) == 2
        epoch = b.member_epoch

        def b_has_all() -> bool:  # b's heartbeats until a's fence frees the partitions a was revoking
            nonlocal epoch
            r = consumer_heartbeat(cb, "rt", "b", epoch)
            epoch = r.member_epoch
            return r.assignment is not None and sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 4

        wait_for(b_has_all, "a's fence to give b every partition")
        s = scrape(mport)
        assert value(s, "kcoord_member_expirations_total", group_type="consumer", trigger="rebalance-timeout") == 1
        assert value(s, "kcoord_member_expirations_total", group_type="consumer") == 1  # nothing else expired
        [line] = events(srv.log, "member-expired", group="rt")
        assert (line["member"], line["trigger"], line["group_type"]) == ("a", "rebalance-timeout", "consumer")


def commit_many(port: int, groups: list[str]) -> None:
    """A simple consumer's commit to each group (one pipelined connection; every one must be accepted)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        for start in range(0, len(groups), 1_000):
            batch = groups[start:start + 1_000]
            s.sendall(b"".join(wire.encode_request(8, 8, i, "junk", wire.OffsetCommitRequest(
                group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[wire.OffsetCommitRequestTopic(
                    name="orders", partitions=[wire.OffsetCommitRequestPartition(partition_index=0,
                                                                                 committed_offset=1)])]))
                for i, g in enumerate(batch)))
            for _ in batch:
                (n,) = struct.unpack(">i", recv_exact(s, 4))
                r = wire.decode_response(8, 8, recv_exact(s, n))[1]
                assert r.topics[0].partitions[0].error_code == 0


def test_frozen_objects_follow_the_groups(server) -> None:
    """kcoord_gc_frozen_objects (kcoord.gcpolicy): what survives a full collection is frozen while the server serves,
    so the count grows as junk groups are made, and falls when they are deleted (frozen objects are still freed)."""
    srv, mport = server, server.metrics_port
    n = 15_000  # about 5 tracked objects a group: past one full collection's worth (about 40,000 objects)
    groups = [f"junk-{i}" for i in range(n)]
    s0 = scrape(mport)
    assert value(s0, "kcoord_gc_frozen_objects") > 0  # what start-up made
    commit_many(srv.port, groups)
    s1 = scrape(mport)
    assert value(s1, "kcoord_groups", group_type="classic", state="Empty") == n
    assert value(s1, "kcoord_gc_frozen_objects") - value(s0, "kcoord_gc_frozen_objects") >= n
    with Client(srv.bootstrap, timeout=60) as c:
        r = c.request(wire.DeleteGroupsRequest(groups_names=groups), 2)
    assert all(x.error_code == 0 for x in r.results)
    s2 = scrape(mport)
    assert value(s2, "kcoord_groups") == 0
    assert value(s1, "kcoord_gc_frozen_objects") - value(s2, "kcoord_gc_frozen_objects") >= n


def test_text_log_format_and_levels(tmp_path: Path) -> None:
    """The default text format says the same in words; --log-level WARNING keeps the INFO lines out."""
    log = tmp_path / "text.log"
    srv = serve(free_port(), log, "--set", "group.initial.rebalance.delay.ms=0")
    with Client(srv.bootstrap) as c:
        j = join(c, "tg", "t1")
        assert sync(c, "tg", "t1", j, assign=True).error_code == 0
    srv.proc.terminate()
    assert srv.proc.wait(30) == 0
    lines = log.read_text().splitlines()
    assert any(" INFO kcoord.groups: rebalance started " in x and "group='tg'" in x and "trigger='join'" in x
               for x in lines), lines
    assert any(" INFO kcoord.server: kcoord listening on 127.0.0.1:" in x for x in lines), lines
    assert any(" INFO kcoord.server: kcoord stopped" in x for x in lines), lines

    quiet = tmp_path / "quiet.log"
    srv = serve(free_port(), quiet, "--log-level", "warning", "--set", "group.initial.rebalance.delay.ms=0")
    with Client(srv.bootstrap) as c:
        j = join(c, "tg", "t1")
        assert j.error_code == 0
    srv.proc.terminate()
    assert srv.proc.wait(30) == 0
    assert " INFO " not in quiet.read_text()


def test_the_endpoint_answers_http_mistakes_and_keeps_serving(server) -> None:
    import socket

    mport = server.metrics_port
    for bad in (b"NONSENSE\r\n\r\n", b"GET /metrics\r\n\r\n", b"GET /" + b"x" * 9000):
        with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
            s.sendall(bad)
            got = s.recv(200)
            assert got.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), got
    # keep-alive: two requests on one connection, both answered
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 2
    # OpenMetrics when asked for it
    req = urllib.request.Request(f"http://127.0.0.1:{mport}/metrics",
                                 headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert r.read().rstrip().endswith(b"# EOF")
    assert scrape(mport)  # still served


def test_metrics_port_mistakes_are_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main(["serve", "--metrics-port", "70000"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metrics-port" in err and "70000" in err


def test_not_ready_until_listening_and_after_stop(tmp_path: Path) -> None:
    """/readyz follows the server: ready while it serves; the endpoint goes with it."""
    port, mport = free_port(), free_port()
    srv = serve(port, tmp_path / "log", "--metrics-port", str(mport))
    assert wait_for(lambda: http_status(mport, "/readyz") == 200, "ready")
    srv.proc.terminate()
    assert srv.proc.wait(30) == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{mport}/readyz", timeout=5)


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_the_grafana_dashboard_uses_only_metrics_kcoord_exposes(server) -> None:
    """Each series the dashboard queries is one kcoord's endpoint exposes (names drift apart otherwise)."""
    import re

    mport = server.metrics_port
    with Client(server.bootstrap) as c:  # a request, so that the per-API families have samples
        j = join(c, "dash", "d1")
        assert sync(c, "dash", "d1", j, assign=True).error_code == 0
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
        families = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
    # a family with no sample yet (no expiry so far) is still declared: its series names follow from its type
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    exposed = {name + sfx for name, f in families.items() for sfx in suffixes[f.type]}
    used = set()
    for expr in dashboard_exprs():
        used |= set(re.findall(r"\b(kcoord_[a-z_]+)\b", expr))
    assert len(used) >= 15
    assert used <= exposed, f"the dashboard queries series kcoord does not expose: {sorted(used - exposed)}"


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(PROMETHEUS is None and not os.environ.get("KCOORD_CI"),
                    reason="Debian's prometheus package is not installed (.ci/run installs it: "
                           "apt-get install prometheus)")
def test_a_real_prometheus_scrapes_kcoord(server, tmp_path: Path) -> None:
    assert PROMETHEUS is not None, "CI needs Debian's prometheus package (.ci/run installs it)"
    srv, mport = server, server.metrics_port
    pport = free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: kcoord\n    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n")
    with open(tmp_path / "prometheus.log", "wb") as out:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{pport}"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        a = classic_member(srv, "pg", "pa")
        b = classic_member(srv, "pg", "pb")
        wait_for(lambda: a.held and b.held, "the group to form")
        a.stop()
        wait_for(lambda: len(b.held) == 4, "b to take everything")
        expected = value(scrape(mport), "kcoord_group_rebalances_started_total", group_type="classic")
        assert expected >= 2  # two joins (perhaps one rebalance for both) and a leave

        def through_prometheus():
            q = urllib.parse.quote('sum(kcoord_group_rebalances_started_total{job="kcoord",group_type="classic"})')
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query?query={q}", timeout=5) as r:
                    body = json.load(r)
            except OSError:
                return None
            result = body["data"]["result"]
            return float(result[0]["value"][1]) if result and float(result[0]["value"][1]) == expected else None

        assert wait_for(through_prometheus, "Prometheus to have scraped the count", timeout=60) == expected
        # every expression of the Grafana dashboard is valid PromQL that Prometheus evaluates over kcoord's series
        for expr in dashboard_exprs():
            q = urllib.parse.quote(expr.replace("$instance", ".*"))
            with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query?query={q}", timeout=10) as r:
                assert json.load(r)["status"] == "success", expr
        b.stop()
    finally:
        prom.terminate()
        prom.wait(30)
