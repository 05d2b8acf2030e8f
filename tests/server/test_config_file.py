"""A first run without surprises (issue #30): `kcoord serve --config` reads a Kafka server.properties as Kafka reads
it (Java's properties syntax, Kafka's broker settings kcoord does not use warned about and left out, a typo refused
in one line with the closest name), a new store is announced loudly and `--require-store` refuses to start without
one, and a listener on 0.0.0.0 is refused without an address to advertise."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from kcoord import wire
from kcoord.cli import build_parser, server_config
from kcoord.client import Client
from kcoord.config import GroupConfig, ServerConfig, parse_properties
from kcoord.kafka_configs import BROKER_CONFIGS, is_kafka_broker_setting
from kcoord.store import STORE_FILE, SqliteRecords

from ..support.cli import kcoord, one_line
from ..support.servers import free_port, serve

# A Kafka 3.x/4.x KRaft combined-mode server.properties as operators have them: Kafka's shipped keys, with its
# comment and layout conventions. kcoord uses node.id, socket.request.max.bytes and num.partitions of these.
KRAFT_PROPERTIES = r"""# Licensed to the Apache Software Foundation (ASF) under one or more contributor license agreements.
#
# This configuration file is intended for use in KRaft mode, where Apache ZooKeeper is not present.
#

############################# Server Basics #############################

# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1

# The connect string for the controller quorum
controller.quorum.voters=1@localhost:9093

############################# Socket Server Settings #############################

listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,\
    SASL_SSL:SASL_SSL

num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################

log.dirs=/tmp/kraft-combined-logs
num.partitions=3
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################

log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""
KRAFT_IGNORED = ["process.roles", "controller.quorum.voters", "inter.broker.listener.name",
                 "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
                 "log.dirs", "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor",
                 "transaction.state.log.replication.factor", "transaction.state.log.min.isr", "log.retention.hours",
                 "log.segment.bytes", "log.retention.check.interval.ms"]

# The ZooKeeper-era file (Kafka 2.x/3.x config/server.properties) starts with broker.id: kcoord refused it there.
ZK_PROPERTIES = """broker.id=0
num.network.threads=3
log.dirs=/tmp/kafka-logs
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def config_of(*argv: str) -> ServerConfig:
    """What `kcoord serve ARGV` would run with (the CLI's own parsing, in-process)."""
    return server_config(build_parser().parse_args(["serve", *argv]))


def ignored_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "kcoord", {}).get("event") == "settings-ignored"]


# ---- Java's properties syntax (java.util.Properties.load) ---------------------------------------------------------

# (file text, the entries Java's Properties.load reads from it). The first block is the Javadoc's own examples.
JAVA_CASES = [
    ("Truth = Beauty", [("Truth", "Beauty")]),
    ("  Truth:Beauty", [("Truth", "Beauty")]),
    ("Truth                    :Beauty", [("Truth", "Beauty")]),
    ("fruits                           apple, banana, pear, \\\n"
     "                                  cantaloupe, watermelon, \\\n"
     "                                  kiwi, mango", [("fruits", "apple, banana, pear, cantaloupe, watermelon, kiwi, mango")]),
    ("cheeses", [("cheeses", "")]),
    ("\\:\\=", [(":=", "")]),
    # separators: = or : or blanks, with blanks around them skipped; one = or : after blanks is the separator
    ("a=b", [("a", "b")]),
    ("a: b", [("a", "b")]),
    ("a b", [("a", "b")]),
    ("a\tb", [("a", "b")]),
    ("a\fb", [("a", "b")]),
    ("a = = b", [("a", "= b")]),
    ("a:=b", [("a", "=b")]),
    ("a b=c", [("a", "b=c")]),
    ("a=", [("a", "")]),
    ("=b", [("", "b")]),
    ("  a = b  ", [("a", "b  ")]),  # the value keeps its trailing blanks (Kafka trims when it parses the value)
    # comments and blank lines
    ("# c\n! c\n\n \t \na=1\n  # indented comment\n", [("a", "1")]),
    ("a=1 # not a comment", [("a", "1 # not a comment")]),
    ("#a comment ending in a backslash \\\nb=c", [("b", "c")]),  # a comment never continues
    # continuations: an odd number of trailing backslashes; the next line's leading blanks dropped
    ("a=b\\\n   c", [("a", "bc")]),
    ("a=b\\\\\nc=d", [("a", "b\\"), ("c", "d")]),  # an even number is an escaped backslash
    ("a=b\\\\\\\n  c", [("a", "b\\c")]),
    ("a=b\\\n   #c", [("a", "b#c")]),  # a continued line is not a comment
    ("a=b\\\n\nc=d", [("a", "b"), ("c", "d")]),  # continued onto an empty line: the entry ends
    ("a=b\\", [("a", "b")]),  # at the end of the file
    ("group.max.\\\n    size = 7", [("group.max.size", "7")]),  # a key continued
    ("\\\n\n", []),
    # escapes
    ("a=\\u0041\\u00e9", [("a", "A\u00e9")]),
    ("a=\\t\\n\\r\\f", [("a", "\t\n\r\f")]),
    ("a=\\q\\\\\\#", [("a", "q\\#")]),  # any other escaped character is itself
    ("k\\=ey=v", [("k=ey", "v")]),
    ("k\\:ey:v", [("k:ey", "v")]),
    ("k\\ ey v", [("k ey", "v")]),
    ("k\\u0020ey=v", [("k ey", "v")]),  # an escaped blank stays in the key
    ("a=\\uD83D\\uDE00", [("a", "\U0001F600")]),  # a UTF-16 pair, as Java's strings hold it
    # line terminators: \n, \r\n and a lone \r
    ("a=1\r\nb=2\rc=3\n", [("a", "1"), ("b", "2"), ("c", "3")]),
    # a key twice: both are read (the later wins in the dict)
    ("a=1\na=2", [("a", "1"), ("a", "2")]),
]


@pytest.mark.parametrize(("text", "entries"), JAVA_CASES)
def test_properties_are_read_as_java_reads_them(text: str, entries: list[tuple[str, str]]) -> None:
    assert [(k, v) for k, v, _ in parse_properties(text)] == entries


def test_an_entry_is_named_by_its_first_line() -> None:
    text = "# header\n\na=1\nb=2\\\n  3\nc=4\n"
    assert [(k, line) for k, _, line in parse_properties(text)] == [("a", 3), ("b", 4), ("c", 6)]


@pytest.mark.parametrize("escape", ["\\u00g1", "\\u12", "\\u"])
def test_a_malformed_unicode_escape_names_its_line(escape: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_properties(f"a=1\nb={escape}\n")
    assert str(e.value).startswith("2: ") and "\\u" in str(e.value)


def test_java_forms_in_a_config_file_reach_the_settings(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("group.initial.rebalance.delay.ms: 0\n"
                     "num.partitions 3\n"
                     "group.max.\\\n    size = 7\n"
                     "auto.create.topics.\\u0065nable=false\n"
                     "! a comment\n"
                     "topic.max.partitions\t=\t50\r\n")
    cfg = config_of("--config", str(props))
    assert cfg.group.group_initial_rebalance_delay_ms == 0
    assert cfg.num_partitions == 3
    assert cfg.group.group_max_size == 7
    assert cfg.auto_create_topics is False
    assert cfg.topic_max_partitions == 50


def test_a_malformed_escape_in_a_config_file_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nbroker.id=\\u00zz\n")
    line = one_line(kcoord("serve", "--port", str(free_port()), "--config", str(props)), 2)
    assert f"--config {props}:2:" in line and "\\u" in line


# ---- Kafka's broker settings: warned about and left out; anything else refused with the closest name ---------------

def test_the_list_of_kafka_broker_settings() -> None:
    # kcoord's own names are Kafka's where Kafka has them; the list holds Kafka's across releases
    assert {"broker.id", "log.dirs", "listeners", "advertised.listeners", "zookeeper.connect", "num.network.threads",
            "process.roles", "controller.quorum.voters", "group.share.max.size"} <= BROKER_CONFIGS
    assert {"socket.request.max.bytes", "node.id", "group.consumer.session.timeout.ms"} <= BROKER_CONFIGS
    assert not {"store.fsync", "topic.max.partitions", "group.rebalance.history.size"} & BROKER_CONFIGS
    assert is_kafka_broker_setting("listener.name.internal.ssl.keystore.location")
    assert is_kafka_broker_setting("super.users")
    assert not is_kafka_broker_setting("group.max.sise")


def test_a_zookeeper_era_server_properties_is_read(tmp_path: Path, caplog) -> None:
    props = tmp_path / "server.properties"
    props.write_text(ZK_PROPERTIES)
    with caplog.at_level(logging.WARNING):
        cfg = config_of("--config", str(props))
    assert cfg.group.group_initial_rebalance_delay_ms == 0
    [warning] = ignored_warnings(caplog)
    assert warning.kcoord["settings"] == ["broker.id", "num.network.threads", "log.dirs", "zookeeper.connect",
                                          "zookeeper.connection.timeout.ms"]
    assert warning.getMessage() == ("ignoring 5 Kafka broker settings kcoord does not use: broker.id, "
                                    "num.network.threads, log.dirs, zookeeper.connect, zookeeper.connection.timeout.ms")


def test_set_of_a_kafka_broker_setting_is_warned_about_and_start_goes_on(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cfg = config_of("--set", "broker.id=3", "--set", "num.partitions=2")
    assert cfg.num_partitions == 2
    [warning] = ignored_warnings(caplog)
    assert warning.kcoord["settings"] == ["broker.id"]


def test_kcoords_own_settings_are_not_warned_about(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        ServerConfig.from_kafka({"node.id": "1", "num.partitions": "3", "store.fsync": "off",
                                 "group.initial.rebalance.delay.ms": "0"})
        GroupConfig.from_kafka({"group.max.size": "3"})
    assert not ignored_warnings(caplog)


@pytest.mark.parametrize(("typo", "closest"), [("group.max.sise", "group.max.size"),
                                               ("num.partition", "num.partitions"),
                                               ("group.initial.rebalance.delay", "group.initial.rebalance.delay.ms"),
                                               ("zookeeper.conect", "zookeeper.connect")])
def test_an_unknown_setting_is_one_short_line_with_the_closest_name(typo: str, closest: str) -> None:
    with pytest.raises(ValueError) as e:
        config_of("--set", f"{typo}=3")
    assert str(e.value) == f"unknown setting {typo!r} (did you mean {closest}?)"  # not the list of every name


def test_set_of_an_unknown_setting_is_one_line() -> None:
    line = one_line(kcoord("serve", "--port", str(free_port()), "--set", "group.max.sise=3"), 2)
    assert line == "kcoord serve: unknown setting 'group.max.sise' (did you mean group.max.size?)"


def test_an_unknown_setting_in_a_config_file_names_file_line_and_closest_name(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(ZK_PROPERTIES + "group.max.sise=10\nmy.own.thing=1\n")
    line = one_line(kcoord("serve", "--port", str(free_port()), "--config", str(props)), 2)
    assert line == (f"kcoord serve: --config {props}:7: unknown setting 'group.max.sise' (did you mean "
                    "group.max.size?); 1 more unknown")


def test_a_setting_far_from_every_name_says_so() -> None:
    with pytest.raises(ValueError) as e:
        ServerConfig.from_kafka({"xyzzy": "1"})
    assert str(e.value) == "unknown setting 'xyzzy' (neither kcoord's nor a Kafka broker setting)"


def test_a_bad_value_in_a_config_file_names_its_line(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# kcoord\nnode.id=1\n\nnum.partitions: \\\n  0\n")
    line = one_line(kcoord("serve", "--port", str(free_port()), "--config", str(props)), 2)
    assert line == f"kcoord serve: --config {props}:4: num.partitions: 0 is below the minimum 1"


def test_kafkas_kraft_server_properties_starts_kcoord(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(KRAFT_PROPERTIES)
    log = tmp_path / "server.log"
    port = free_port()
    # The file's listeners are read (PLAINTEXT on :9092, advertised localhost:9092; CONTROLLER, a KRaft
    # controller's, not served); --set moves PLAINTEXT to a free loopback port, as it wins over the file.
    srv = serve(port, log, "--config", str(props), "--log-format", "json", "--set",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://:9093")
    try:
        with Client(f"127.0.0.1:{port}") as c:
            meta = c.request(wire.MetadataRequest(topics=[wire.MetadataRequestTopic(name="orders")],
                                                  allow_auto_topic_creation=True), 9)
        assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(1, "localhost", 9092)]  # node.id, advertised
        assert len(meta.topics[0].partitions) == 3  # num.partitions from the file
    finally:
        srv.proc.terminate()
        assert srv.proc.wait(timeout=30) == 0, srv.log_tail()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    ignored = [e for e in events if e.get("event") == "settings-ignored"]
    assert len(ignored) == 1, log.read_text()  # one line, once
    assert ignored[0]["settings"] == KRAFT_IGNORED
    assert ignored[0]["level"] == "WARNING" and "log.dirs" in ignored[0]["message"]
    assert any(e.get("level") == "WARNING" and "not serving listener CONTROLLER" in e.get("message", "")
               for e in events)


# ---- the store: a new one is announced; --require-store refuses to start without one -------------------------------

def store_created(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "kcoord", {}).get("event") == "store-created"]


def test_a_new_store_is_announced_and_an_existing_one_is_not(tmp_path: Path, caplog) -> None:
    d = tmp_path / "data"
    with caplog.at_level(logging.WARNING):
        SqliteRecords(str(d)).close()
    [created] = store_created(caplog)
    assert created.levelno == logging.WARNING
    assert created.getMessage().startswith(f"created a new, empty store at {d} ")
    assert created.kcoord["data_dir"] == str(d)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        SqliteRecords(str(d)).close()
    assert not store_created(caplog)


def test_serve_says_when_it_created_a_store(tmp_path: Path) -> None:
    d = tmp_path / "data-dri"  # the typo the warning is for
    log = tmp_path / "server.log"
    port = free_port()
    srv = serve(port, log, "--data-dir", str(d))
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()
    assert f"WARNING kcoord.store: created a new, empty store at {d} " in log.read_text()
    log.write_text("")
    srv = serve(port, log, "--data-dir", str(d), "--require-store")  # it holds one now
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()
    assert "created a new" not in log.read_text()


@pytest.mark.parametrize("exists", [False, True])
def test_require_store_refuses_a_data_dir_without_a_store(tmp_path: Path, exists: bool) -> None:
    d = tmp_path / "data"
    if exists:
        d.mkdir()
    line = one_line(kcoord("serve", "--port", str(free_port()), "--data-dir", str(d), "--require-store"), 1)
    assert line == (f"kcoord serve: --require-store: {d} holds no store ({STORE_FILE}): refusing to start with a "
                    "new, empty one")
    assert os.path.isdir(d) is exists  # nothing made


def test_require_store_without_a_data_dir_is_refused() -> None:
    line = one_line(kcoord("serve", "--port", str(free_port()), "--require-store"), 2)
    assert "--require-store needs --data-dir" in line


# ---- 0.0.0.0 is no address to advertise (Kafka refuses it in advertised.listeners) ----------------------------------

@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", ""])
def test_listening_on_every_address_needs_an_advertised_host(host: str) -> None:
    with pytest.raises(ValueError) as e:
        ServerConfig(host=host)
    assert "--advertised-host" in str(e.value) and "no address clients can connect to" in str(e.value)
    with pytest.raises(ValueError):
        ServerConfig.from_kafka({}, host=host)
    assert ServerConfig(host=host, advertised_host="kcoord-1.example").advertised_host == "kcoord-1.example"


@pytest.mark.parametrize("advertised", ["0.0.0.0", "::"])
def test_advertising_the_meta_address_is_refused(advertised: str) -> None:
    with pytest.raises(ValueError) as e:
        ServerConfig(host="127.0.0.1", advertised_host=advertised)
    assert f"--advertised-host {advertised}" in str(e.value) and "non-routable" in str(e.value)


def test_serve_on_0000_without_advertised_host_is_one_line() -> None:
    line = one_line(kcoord("serve", "--port", str(free_port()), "--host", "0.0.0.0"), 2)
    assert line == ("kcoord serve: --host 0.0.0.0 is no address clients can connect to: give --advertised-host with "
                    "the host name or address they should use")


def test_serve_on_0000_advertises_the_advertised_host(tmp_path: Path) -> None:
    port = free_port()
    srv = serve(port, tmp_path / "server.log", "--host", "0.0.0.0", "--advertised-host", "127.0.0.1")
    try:
        with Client(f"127.0.0.1:{port}") as c:
            meta = c.request(wire.MetadataRequest(topics=[]), 9)
        assert [(b.host, b.port) for b in meta.brokers] == [("127.0.0.1", port)]
    finally:
        srv.proc.terminate()
        assert srv.proc.wait(timeout=30) == 0, srv.log_tail()
