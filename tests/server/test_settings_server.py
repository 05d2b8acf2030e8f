"""Every broker setting (kcoord.config.SERVER_SETTINGS), and offset.metadata.max.bytes, shown by its effect on a running
`kcoord serve --set NAME=VALUE`, at the boundary where it has one: a server that ignored the setting fails here.
`COVERED` names, for each setting, the test that shows its effect (here or elsewhere in the suite); out-of-bounds
values (SERVER_BOUNDS' minimum - 1 and maximum + 1) are refused at start, one stderr line naming the setting.
"""

from __future__ import annotations

import datetime
import subprocess
import sys

import pytest

from kcoord import cli, wire
from kcoord import errors as E
from kcoord.client import Client
from kcoord.config import SERVER_BOUNDS
from kcoord.server import Server

from ..support.servers import ROOT, free_port, serve

HERE = "tests/server/test_settings_server.py"
LIMITS = "tests/server/test_connection_limits.py"
AUTHZ = "tests/server/test_authorization.py"

COVERED: dict[str, str] = {
    "socket.request.max.bytes": f"{HERE}::test_socket_request_max_bytes_reads_a_frame_of_the_limit_and_closes_above",
    "offset.metadata.max.bytes": f"{HERE}::test_offset_metadata_max_bytes_at_the_limit_and_one_above",
    "auto.create.topics.enable": f"{HERE}::test_auto_create_topics_enable_false_creates_nothing",
    "num.partitions": f"{HERE}::test_num_partitions_is_what_a_created_topic_gets",
    "topic.max.partitions": f"{HERE}::test_topic_max_partitions_at_the_limit_and_one_above",
    "max.partitions": f"{HERE}::test_max_partitions_at_the_limit_and_one_above",
    "node.id": f"{HERE}::test_node_id_is_the_broker_controller_and_coordinator",
    "store.fsync": f"{HERE}::test_store_fsync_sets_how_the_store_syncs",
    # K served, the K+1-th closed at once, the others still served
    "max.connections": "tests/server/test_server.py::test_max_connections_refuses_the_extra_connection",
    # an idle connection is closed by the server after connections.max.idle.ms
    "connections.max.idle.ms": "tests/server/test_server.py::test_idle_connections_are_reaped",
    "max.connections.per.ip": f"{LIMITS}::test_max_connections_per_ip_with_an_override_for_one_address",
    "max.connections.per.ip.overrides": f"{LIMITS}::test_max_connections_per_ip_with_an_override_for_one_address",
    "max.connection.creation.rate":
        f"{LIMITS}::test_max_connection_creation_rate_refuses_a_burst_and_logs_a_bounded_number_of_lines",
    "queued.max.request.bytes":
        f"{LIMITS}::test_unfinished_frames_beyond_queued_max_request_bytes_wait_their_turn_and_are_all_answered",
    "socket.request.timeout.ms":
        f"{LIMITS}::test_a_request_trickled_past_socket_request_timeout_ms_closes_its_connection",
    "offsets.topic.num.partitions": f"{HERE}::test_cluster_settings_shape_the_leases",
    "broker.session.timeout.ms": f"{HERE}::test_cluster_settings_shape_the_leases",
    "broker.heartbeat.interval.ms": f"{HERE}::test_cluster_settings_shape_the_leases",
    "listeners": "tests/server/test_listeners.py::test_each_listener_answers_with_its_own_advertised_address",
    "controller.listener.names": "tests/server/test_config_file.py::test_kafkas_kraft_server_properties_starts_kcoord",
    "advertised.listeners": "tests/server/test_listeners.py::test_each_listener_answers_with_its_own_advertised_address",
    "listener.security.protocol.map": "tests/interop/test_sasl_interop.py::test_a_classic_group_forms_and_commits_over_sasl",
    "sasl.enabled.mechanisms":
        "tests/server/test_listeners.py::test_a_mechanism_not_enabled_is_answered_with_the_enabled_ones_then_closed_after_the_delay",
    "connection.failed.authentication.delay.ms":
        "tests/server/test_listeners.py::test_a_mechanism_not_enabled_is_answered_with_the_enabled_ones_then_closed_after_the_delay",
    "connections.max.reauth.ms":
        "tests/server/test_listeners.py::test_connections_max_reauth_ms_is_the_session_lifetime_and_an_expired_session_is_closed",
    "sasl.server.max.receive.size":
        "tests/server/test_listeners.py::test_a_frame_above_sasl_server_max_receive_size_before_authentication_closes",
    "authorizer.class.name": f"{AUTHZ}::test_without_authorizer_class_name_nothing_is_checked_and_the_acl_apis_answer_"
                             "security_disabled",
    "super.users": f"{AUTHZ}::test_a_super_user_is_allowed_what_no_acl_grants",
    "allow.everyone.if.no.acl.found": f"{AUTHZ}::test_allow_everyone_if_no_acl_found_admits_only_to_resources_without_acls",
}

MAX_FRAME = 4096  # socket.request.max.bytes
META_MAX = 64  # offset.metadata.max.bytes
DEFAULT_PARTITIONS = 7  # num.partitions (kcoord's default: 1)
TOPIC_MAX = 10  # topic.max.partitions
ALL_MAX = 100  # max.partitions
NODE = 7  # node.id
TOPIC = "orders"


def test_every_setting_kcoord_serve_accepts_has_a_test_of_its_effect() -> None:
    # Every name `--set` takes (the broker's and the groups'), here or in test_settings_group, names a test that
    # exists; a new setting without one fails here.
    import re

    from kcoord.config import SERVER_SETTINGS as BROKER_SETTINGS
    from kcoord.config import SETTINGS as GROUP_SETTINGS

    from .test_settings_group import COVERED as GROUP_COVERED

    covered = {**GROUP_COVERED, **COVERED}
    assert set(covered) == set(BROKER_SETTINGS) | set(GROUP_SETTINGS), \
        set(covered) ^ (set(BROKER_SETTINGS) | set(GROUP_SETTINGS))
    for name, where in covered.items():
        path, _, test = where.partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text(), re.M), f"{name}: no {where}"


def settings(*pairs: str) -> list[str]:
    return [a for p in pairs for a in ("--set", p)]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One server with the settings whose effects do not meet (auto-creation left at its default, true)."""
    log = tmp_path_factory.mktemp("settings") / "server.log"
    s = serve(free_port(), log, "--topic", f"{TOPIC}:3", *settings(
        f"socket.request.max.bytes={MAX_FRAME}", f"offset.metadata.max.bytes={META_MAX}",
        f"num.partitions={DEFAULT_PARTITIONS}", f"topic.max.partitions={TOPIC_MAX}", f"max.partitions={ALL_MAX}",
        f"node.id={NODE}"))
    yield s
    s.proc.terminate()
    assert s.proc.wait(timeout=30) == 0, s.log_tail()


@pytest.fixture(scope="module")
def no_auto(tmp_path_factory):
    """A server with auto.create.topics.enable=false, every other setting at its default."""
    log = tmp_path_factory.mktemp("settings-no-auto") / "server.log"
    s = serve(free_port(), log, *settings("auto.create.topics.enable=false"))
    yield s
    s.proc.terminate()
    assert s.proc.wait(timeout=30) == 0, s.log_tail()


def metadata(s, names: list[str] | None, version: int = 12, allow: bool = False) -> wire.MetadataResponse:
    topics = None if names is None else [wire.MetadataRequestTopic(name=n) for n in names]
    # v0-3 carry no allow_auto_topic_creation: it is true for them, and cannot be sent false
    with Client(s.bootstrap) as c:
        return c.request(wire.MetadataRequest(topics=topics, allow_auto_topic_creation=allow or version < 4), version)


def partitions_of(s) -> dict[str, int]:
    """Every topic the server has and its partition count (a Metadata of all topics, which creates nothing)."""
    return {t.name: len(t.partitions) for t in metadata(s, None).topics}


def create_topics(s, topics: dict[str, int], version: int = 7) -> dict[str, wire.CreateTopicsResponseCreatableTopicResult]:
    req = wire.CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[
        wire.CreateTopicsRequestCreatableTopic(name=name, num_partitions=n, replication_factor=-1 if version >= 4 else 1,
                                               assignments=[], configs=[]) for name, n in topics.items()])
    with Client(s.bootstrap) as c:
        return {t.name: t for t in c.request(req, version).topics}


def grow(s, name: str, count: int) -> int:
    with Client(s.bootstrap) as c:
        r = c.request(wire.CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
            wire.CreatePartitionsRequestCreatePartitionsTopic(name=name, count=count, assignments=None)]), 3)
    [res] = r.results
    return res.error_code


def delete_topics(s, names: list[str]) -> None:
    with Client(s.bootstrap) as c:
        r = c.request(wire.DeleteTopicsRequest(timeout_ms=5000, topic_names=names), 5)
    assert [x.error_code for x in r.responses] == [E.NONE] * len(names)


def closed(sock) -> bool:
    """The server closed the connection (a reset counts): recv does not return a response."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# ---- socket.request.max.bytes ------------------------------------------------------------------------------------

def api_versions_frame(size: int, correlation_id: int) -> bytes:
    """An ApiVersions v3 request whose size prefix is exactly `size`: padded in the header's client id, so the
    request decodes the same whatever its size."""
    body = wire.ApiVersionsRequest(client_software_name="kcoord-test", client_software_version="1")
    bare = len(wire.encode_request(18, 3, correlation_id, "", body)) - 4
    frame = wire.encode_request(18, 3, correlation_id, "c" * (size - bare), body)
    assert int.from_bytes(frame[:4], "big") == size == len(frame) - 4
    return frame


def test_socket_request_max_bytes_reads_a_frame_of_the_limit_and_closes_above(srv, no_auto) -> None:
    # Kafka's rule (NetworkReceive): a size above socket.request.max.bytes is refused (InvalidReceiveException),
    # the connection closed; a frame of exactly the limit is read.
    with Client(srv.bootstrap) as c:
        c.sock.sendall(api_versions_frame(MAX_FRAME, 1))
        assert c.receive(18, 3, 1).error_code == E.NONE
        c.sock.sendall(api_versions_frame(MAX_FRAME + 1, 2))
        assert closed(c.sock), "a frame one byte above socket.request.max.bytes was answered"
    with Client(srv.bootstrap) as c:  # the server serves the next connection
        c.sock.sendall(api_versions_frame(MAX_FRAME, 1))
        assert c.receive(18, 3, 1).error_code == E.NONE
    with Client(no_auto.bootstrap) as c:  # the same frame is a good request under the default limit (100 MiB)
        c.sock.sendall(api_versions_frame(MAX_FRAME + 1, 1))
        assert c.receive(18, 3, 1).error_code == E.NONE


# ---- offset.metadata.max.bytes -----------------------------------------------------------------------------------

def commit(s, group: str, partition: int, offset: int, meta: str, version: int) -> int:
    """An admin's OffsetCommit (generation -1, no member) of one partition of TOPIC; its error code."""
    with Client(s.bootstrap) as c:
        r = c.request(wire.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[wire.OffsetCommitRequestTopic(
                name=TOPIC, partitions=[wire.OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_metadata=meta)])]), version)
    [t] = r.topics
    [p] = t.partitions
    return p.error_code


def committed(s, group: str) -> dict[int, tuple[int, str]]:
    with Client(s.bootstrap) as c:
        r = c.request(wire.OffsetFetchRequest(group_id=group, topics=[
            wire.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1, 2])]), 7)
    assert r.error_code == E.NONE
    return {p.partition_index: (p.committed_offset, p.metadata) for p in r.topics[0].partitions
            if p.committed_offset != -1}


@pytest.mark.parametrize("version", [8, 2])
def test_offset_metadata_max_bytes_at_the_limit_and_one_above(srv, version) -> None:
    group = f"metadata-limit-v{version}"
    at, above = "m" * META_MAX, "m" * (META_MAX + 1)
    assert commit(srv, group, 0, 5, at, version) == E.NONE
    assert committed(srv, group) == {0: (5, at)}
    assert commit(srv, group, 1, 6, above, version) == E.OFFSET_METADATA_TOO_LARGE
    assert commit(srv, group, 0, 9, above, version) == E.OFFSET_METADATA_TOO_LARGE
    assert committed(srv, group) == {0: (5, at)}  # nothing of the refused commits was stored


def test_offset_metadata_max_bytes_counts_as_kafka_does(srv) -> None:
    # OffsetMetadataManager.isMetadataInvalid: metadata.length() > offsetMetadataMaxSize. "é" is one UTF-16 unit
    # (two UTF-8 bytes); an emoji is two UTF-16 units (one Python character, four UTF-8 bytes).
    group = "metadata-limit-utf16"
    assert commit(srv, group, 0, 1, "é" * META_MAX, 8) == E.NONE
    assert commit(srv, group, 1, 2, "\U0001f600" * (META_MAX // 2), 8) == E.NONE
    assert commit(srv, group, 2, 3, "\U0001f600" * (META_MAX // 2) + "é", 8) == E.OFFSET_METADATA_TOO_LARGE


# ---- auto.create.topics.enable, num.partitions ---------------------------------------------------------------------

def test_auto_create_topics_enable_false_creates_nothing(srv, no_auto) -> None:
    for version in (12, 4):  # allow_auto_topic_creation=true is asked; the broker setting says no
        name = f"never-v{version}"
        [t] = metadata(no_auto, [name], version, allow=True).topics
        assert (t.error_code, t.name) == (E.UNKNOWN_TOPIC_OR_PARTITION, name)
        assert name not in partitions_of(no_auto)
    [t] = metadata(no_auto, ["never-v1"], 1, allow=True).topics  # before v4 every Metadata may create: not here
    assert t.error_code == E.UNKNOWN_TOPIC_OR_PARTITION and "never-v1" not in partitions_of(no_auto)
    # explicit creation is not auto-creation: CreateTopics still creates
    assert create_topics(no_auto, {"made": 2})["made"].error_code == E.NONE
    assert partitions_of(no_auto) == {"made": 2}
    # the default (true) creates the same request's topic
    [t] = metadata(srv, ["born-by-metadata"], 12, allow=True).topics
    assert t.error_code == E.NONE and "born-by-metadata" in partitions_of(srv)


def test_num_partitions_is_what_a_created_topic_gets(srv) -> None:
    for version in (12, 1):  # auto-created by Metadata
        name = f"auto-partitions-v{version}"
        [t] = metadata(srv, [name], version, allow=True).topics
        assert t.error_code == E.NONE and len(t.partitions) == DEFAULT_PARTITIONS
        assert partitions_of(srv)[name] == DEFAULT_PARTITIONS
    for version in (7, 4):  # CreateTopics with num_partitions -1 (v4+, KIP-464): the broker's default
        name = f"default-partitions-v{version}"
        r = create_topics(srv, {name: -1}, version)[name]
        assert r.error_code == E.NONE
        if version >= 5:
            assert r.num_partitions == DEFAULT_PARTITIONS
        assert partitions_of(srv)[name] == DEFAULT_PARTITIONS


# ---- topic.max.partitions, max.partitions --------------------------------------------------------------------------

def test_topic_max_partitions_at_the_limit_and_one_above(srv) -> None:
    got = create_topics(srv, {"tmax-at": TOPIC_MAX, "tmax-above": TOPIC_MAX + 1, "tmax-grown": 1})
    assert got["tmax-at"].error_code == E.NONE and got["tmax-grown"].error_code == E.NONE
    assert got["tmax-above"].error_code == E.INVALID_PARTITIONS
    assert "topic.max.partitions" in got["tmax-above"].error_message
    assert grow(srv, "tmax-grown", TOPIC_MAX + 1) == E.INVALID_PARTITIONS
    assert grow(srv, "tmax-grown", TOPIC_MAX) == E.NONE
    have = partitions_of(srv)
    assert (have["tmax-at"], have["tmax-grown"]) == (TOPIC_MAX, TOPIC_MAX) and "tmax-above" not in have
    delete_topics(srv, ["tmax-at", "tmax-grown"])


def test_max_partitions_at_the_limit_and_one_above(srv) -> None:
    room = ALL_MAX - sum(partitions_of(srv).values())
    assert room > TOPIC_MAX
    fill = {}
    while room:  # topics that bring the server to exactly max.partitions, each within topic.max.partitions
        fill[f"fill-{len(fill)}"] = n = min(room, TOPIC_MAX - 1)
        room -= n
    try:
        assert {name: t.error_code for name, t in create_topics(srv, fill).items()} == dict.fromkeys(fill, E.NONE)
        assert sum(partitions_of(srv).values()) == ALL_MAX  # at the limit
        over = create_topics(srv, {"one-too-many": 1})["one-too-many"]
        assert over.error_code == E.INVALID_PARTITIONS and "max.partitions" in over.error_message
        assert grow(srv, "fill-0", fill["fill-0"] + 1) == E.INVALID_PARTITIONS
        [t] = metadata(srv, ["auto-one-too-many"], allow=True).topics
        assert t.error_code == E.INVALID_PARTITIONS
        have = partitions_of(srv)
        assert sum(have.values()) == ALL_MAX and "one-too-many" not in have and "auto-one-too-many" not in have
    finally:
        delete_topics(srv, list(fill))
    assert create_topics(srv, {"room-again": 1})["room-again"].error_code == E.NONE


# ---- node.id -------------------------------------------------------------------------------------------------------

def test_node_id_is_the_broker_controller_and_coordinator(srv) -> None:
    for version in (12, 1):  # controller_id from v1
        r = metadata(srv, [TOPIC], version)
        assert [(b.node_id, b.port) for b in r.brokers] == [(NODE, srv.port)]
        assert r.controller_id == NODE
        [t] = r.topics
        assert {p.leader_id for p in t.partitions} == {NODE}
        assert all(p.replica_nodes == [NODE] and p.isr_nodes == [NODE] for p in t.partitions)
    with Client(srv.bootstrap) as c:
        old = c.request(wire.FindCoordinatorRequest(key="some-group", key_type=0), 3)
        assert (old.error_code, old.node_id, old.port) == (E.NONE, NODE, srv.port)
        new = c.request(wire.FindCoordinatorRequest(key_type=0, coordinator_keys=["some-group", "other"]), 6)
        assert [(x.key, x.error_code, x.node_id) for x in new.coordinators] == \
            [("some-group", E.NONE, NODE), ("other", E.NONE, NODE)]


# ---- store.fsync ---------------------------------------------------------------------------------------------------

def test_store_fsync_sets_how_the_store_syncs(tmp_path) -> None:
    # What the setting changes (kcoord/store.py): SQLite's synchronous, FULL (2: the WAL fsynced at every commit)
    # for "always", NORMAL (1: left to the OS) for "off". The server is built as `kcoord serve` builds it.
    for policy, synchronous in (("always", 2), ("off", 1)):
        args = cli.build_parser().parse_args(["serve", "--port", "0", "--data-dir", str(tmp_path / policy),
                                          "--set", f"store.fsync={policy}"])
        server = Server(cli.server_config(args))
        try:
            assert server.store.records.db.execute("PRAGMA synchronous").fetchone()[0] == synchronous, policy
        finally:
            server.store.close()


# ---- offsets.topic.num.partitions, broker.session.timeout.ms, broker.heartbeat.interval.ms ---------------------------

LEASE_MS, RENEW_MS, COORDINATOR_PARTITIONS = 60_000, 3_000, 7


def test_cluster_settings_shape_the_leases(pg_dsn, tmp_path) -> None:
    """A one-node cluster on PostgreSQL, read in the database itself: offsets.topic.num.partitions lease rows (the
    default: 50), each lease running broker.session.timeout.ms (default 9 s) from its renewal, and renewals
    broker.heartbeat.interval.ms apart (default 2 s), by the database's clock."""
    from ..support.cluster_nodes import KCluster, wait_until

    args = settings(f"offsets.topic.num.partitions={COORDINATOR_PARTITIONS}", f"broker.session.timeout.ms={LEASE_MS}",
                    f"broker.heartbeat.interval.ms={RENEW_MS}")
    with KCluster(pg_dsn, tmp_path, nodes=1, args=tuple(args)) as cl:
        assert cl.partitions() == COORDINATOR_PARTITIONS
        rows = cl.db.execute("SELECT partition, node_id, extract(epoch FROM expires_at - clock_timestamp()) "
                             "FROM kcoord_leases ORDER BY partition").fetchall()
        assert [(p, n) for p, n, _ in rows] == [(p, 1) for p in range(COORDINATOR_PARTITIONS)]
        assert all(LEASE_MS / 2000 < left <= LEASE_MS / 1000 for _, _, left in rows), rows

        def node_lease():
            return cl.db.execute("SELECT expires_at FROM kcoord_nodes WHERE node_id = 1").fetchone()[0]

        # The node listens once its first lease round is done; the next renews the lease no sooner than the interval
        # after it (the database's clock; slow rounds only make the gap longer).
        first = node_lease()
        second = wait_until(lambda: (e := node_lease()) != first and e, 30, "the node renews its lease")
        assert second - first >= datetime.timedelta(milliseconds=RENEW_MS - 50), second - first
        with Client(cl.node(1).bootstrap) as c:
            r = c.request(wire.FindCoordinatorRequest(key="g", key_type=0), 3)
        assert (r.error_code, r.node_id) == (E.NONE, 1)


# ---- out of bounds -------------------------------------------------------------------------------------------------

def edges() -> list[tuple[str, int, str]]:
    """(setting, value, what the refusal says) for each SERVER_BOUNDS entry's minimum - 1 and maximum + 1."""
    out = []
    for name, ((type_lo, type_hi), lo, hi) in SERVER_BOUNDS.items():
        lo = type_lo if lo is None else lo
        hi = type_hi if hi is None else hi
        out += [(name, lo - 1, f"{name}: {lo - 1} is below the minimum {lo}"),
                (name, hi + 1, f"{name}: {hi + 1} is above the maximum {hi}")]
    return out


def test_out_of_bounds_values_are_refused_naming_the_setting(monkeypatch, capsys) -> None:
    # `kcoord serve --set NAME=VALUE` for each edge, through the CLI's own entry point in this process (22 server
    # processes would take seconds each on a busy machine); a value let through would start a server: refused here.
    def started(*_args, **_kwargs):
        raise AssertionError("kcoord serve started")

    monkeypatch.setattr(cli, "run", started)
    monkeypatch.setattr(cli, "configure_logging", lambda *a, **k: None)  # the test process's logging stays as it is
    cases = edges()
    assert {name for name, *_ in cases} == set(SERVER_BOUNDS)
    for name, value, rule in cases:
        code = cli.main(["serve", "--port", "0", "--set", f"{name}={value}"])
        out, err = capsys.readouterr()
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and rule in lines[0] and out == "", (name, value, code, err)


def test_out_of_bounds_refusal_is_the_processes_exit_status() -> None:
    # Two of the edges as real processes: the exit status and the single stderr line are the process's own.
    cases = [edges()[0], edges()[-1]]
    procs = [(rule, subprocess.Popen(
        [sys.executable, "-m", "kcoord.cli", "serve", "--port", str(free_port()), "--set", f"{name}={value}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)) for name, value, rule in cases]
    for rule, proc in procs:
        try:
            out, err = proc.communicate(timeout=20)  # a refusal takes well under a second
        finally:
            proc.kill()
        assert proc.returncode == 2 and err.splitlines() == [f"kcoord serve: {rule}"] and out == "", err
