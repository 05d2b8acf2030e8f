"""Every CLI and setting mistake is one line on stderr naming the input and the problem, with a non-zero exit
(2: the command line or its input, 1: refused at run time), never a traceback. Each case runs the real CLI as a
subprocess; the tests are named after the findings of issue #16 ("Hardening")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kcoord import wire
from kcoord.client import Client
from kcoord.config import BOUNDS, SERVER_BOUNDS, GroupConfig, ServerConfig
from kcoord.config import SERVER_SETTINGS as SERVER_SETTINGS
from kcoord.config import SETTINGS as GROUP_SETTINGS

from ..support.cli import kcoord, one_line
from ..support.servers import ROOT, free_port, serve

STATES = ("Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "Dead")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("cli-errors") / "server.log"
    srv = serve(free_port(), log, "--set", "group.initial.rebalance.delay.ms=0")
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(timeout=30) == 0, srv.log_tail()


def serve_refusal(*args: str, code: int = 2) -> str:
    """`kcoord serve` on a free port with `args`, which it must refuse at once (not start serving)."""
    return one_line(kcoord("serve", "--port", str(free_port()), *args, timeout=30), code)


# ---- 1. tracebacks instead of messages ----------------------------------------------------------------

def test_topics_create_bad_name_is_one_line(server) -> None:
    line = one_line(kcoord("topics", "--create", "bad name!:3", "--bootstrap", server.bootstrap), 2, "bad name!")
    assert line.startswith("kcoord topics: ") and "invalid topic name" in line


def test_topics_create_zero_partitions_is_one_line(server) -> None:
    line = one_line(kcoord("topics", "--create", "orders2:0", "--bootstrap", server.bootstrap), 2, "orders2:0")
    assert "at least one partition" in line
    listed = kcoord("topics", "--json", "--bootstrap", server.bootstrap)
    assert "orders2" not in [t["topic"] for t in json.loads(listed.stdout)["topics"]]


def test_topics_refused_by_the_server_is_one_line(server) -> None:
    r = kcoord("topics", "--grow", "never-created:3", "--bootstrap", server.bootstrap)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_line(r, 1, "never-created")


# ---- 2. the data dir is named with its real problem ------------------------------------------------------

def test_data_dir_that_is_a_file_is_named(tmp_path) -> None:
    f = tmp_path / "data"
    f.write_text("not a directory")
    line = serve_refusal("--data-dir", str(f), code=1)
    assert str(f) in line and "not a directory" in line and "cannot listen" not in line


def test_data_dir_under_a_file_is_named(tmp_path) -> None:
    (tmp_path / "file").write_text("")
    d = tmp_path / "file" / "data"
    line = serve_refusal("--data-dir", str(d), code=1)
    assert str(d) in line and "cannot be created" in line and "cannot listen" not in line


def test_data_dir_read_only_is_named(tmp_path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    port = str(free_port())
    if os.geteuid() != 0:
        d.chmod(0o500)
        r = kcoord("serve", "--port", port, "--data-dir", str(d), timeout=30)
    else:  # root writes through permissions: a read-only bind mount, in a private mount namespace
        assert shutil.which("unshare"), "unshare (util-linux) is needed to make a read-only directory as root"
        script = f'mount --bind "{d}" "{d}" && mount -o remount,bind,ro "{d}" && exec "$@"'
        r = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "kcoord.cli",
                            "serve", "--port", port, "--data-dir", str(d)],
                           capture_output=True, text=True, timeout=30, check=False, cwd=ROOT)
    line = one_line(r, 1, str(d))
    assert "not writable" in line and "cannot listen" not in line


def test_listen_failure_names_the_address(server) -> None:
    line = one_line(kcoord("serve", "--port", str(server.port), timeout=30), 1, f"127.0.0.1:{server.port}")
    assert "cannot listen" in line


# ---- 3. malformed settings and config files --------------------------------------------------------------

def test_set_malformed_int_names_the_setting() -> None:
    line = serve_refusal("--set", "group.min.session.timeout.ms=abc")
    assert "group.min.session.timeout.ms" in line and "'abc'" in line


def test_set_without_a_value_is_one_line() -> None:
    assert "group.max.size" in serve_refusal("--set", "group.max.size")


def test_binary_config_file_names_the_file(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_bytes(bytes(range(256)) * 4)
    assert str(props) in serve_refusal("--config", str(props))


def test_non_utf8_config_file_names_the_file_and_line(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_bytes(b"num.partitions=3\n\x82\xff=1\n")
    assert f"{props}:2" in serve_refusal("--config", str(props))


def test_missing_config_file_names_the_file(tmp_path) -> None:
    props = tmp_path / "absent.properties"
    line = serve_refusal("--config", str(props))
    assert str(props) in line and "No such file" in line


def test_config_line_without_a_value_names_file_and_line(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# settings\nnum.partitions=3\ngroup.max.size\n")
    assert f"{props}:3" in serve_refusal("--config", str(props))


def test_bad_value_in_config_file_names_the_setting(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=0\n")
    assert "num.partitions: 0 is below the minimum 1" in serve_refusal("--config", str(props))


# ---- 4. values Kafka rejects ------------------------------------------------------------------------------

def test_port_out_of_range_is_refused() -> None:
    line = one_line(kcoord("serve", "--port", "99999", timeout=30), 2, "--port", "99999")
    assert "0..65535" in line


def test_advertised_port_out_of_range_is_refused() -> None:
    one_line(kcoord("serve", "--port", "0", "--advertised-port", "70000", timeout=30), 2, "--advertised-port", "70000")


def test_auto_create_topics_perhaps_is_refused() -> None:
    line = serve_refusal("--set", "auto.create.topics.enable=perhaps")
    assert "auto.create.topics.enable" in line and "perhaps" in line and "true or false" in line


def test_num_partitions_zero_is_refused() -> None:
    assert "num.partitions: 0 is below the minimum 1" in serve_refusal("--set", "num.partitions=0")


@pytest.mark.parametrize("name", ["group.min.session.timeout.ms", "group.max.session.timeout.ms",
                                  "group.consumer.session.timeout.ms", "group.connect.session.timeout.ms"])
def test_negative_session_timeout_is_refused(name) -> None:
    assert f"{name}: -5 is below the minimum 1" in serve_refusal("--set", f"{name}=-5")


def test_min_session_timeout_above_max_names_both() -> None:
    line = serve_refusal("--set", "group.min.session.timeout.ms=10000", "--set", "group.max.session.timeout.ms=5000")
    assert "group.min.session.timeout.ms (10000)" in line and "group.max.session.timeout.ms (5000)" in line


@pytest.mark.parametrize("setting,rule", [
    ("socket.request.max.bytes=0", "socket.request.max.bytes: 0 is below the minimum 1"),
    ("max.connections=-1", "max.connections: -1 is below the minimum 0"),
    ("connections.max.idle.ms=0", "connections.max.idle.ms: 0 is below the minimum 1"),
    ("topic.max.partitions=0", "topic.max.partitions: 0 is below the minimum 1"),
    ("max.partitions=0", "max.partitions: 0 is below the minimum 1"),
    ("node.id=-1", "node.id: -1 is below the minimum 0"),
    ("group.max.size=0", "group.max.size: 0 is below the minimum 1"),
    ("group.max.size=2147483648", "group.max.size: 2147483648 is above the maximum 2147483647"),
    ("group.initial.rebalance.delay.ms=-1", "group.initial.rebalance.delay.ms: -1 is below the minimum 0"),
    ("offset.metadata.max.bytes=-1", "offset.metadata.max.bytes: -1 is below the minimum 0"),
    ("group.consumer.heartbeat.interval.ms=0", "group.consumer.heartbeat.interval.ms: 0 is below the minimum 1"),
    ("group.consumer.max.size=0", "group.consumer.max.size: 0 is below the minimum 1"),
    ("group.connect.api.key.base=40000", "group.connect.api.key.base: 40000 is above the maximum 32764"),
    ("group.max.size=1_000", "group.max.size: '1_000' is not an integer"),
    ("group.consumer.assignors=range,range", "group.consumer.assignors: 'range,range'"),
    ("store.fsync=sometimes", "store.fsync: 'sometimes'"),
])
def test_each_setting_is_checked_with_kafkas_rule(setting, rule) -> None:
    assert rule in serve_refusal("--set", setting)


@pytest.mark.parametrize("settings,names", [
    (["group.consumer.heartbeat.interval.ms=15000", "group.consumer.session.timeout.ms=15000",
      "group.consumer.min.session.timeout.ms=15000"],
     ("group.consumer.heartbeat.interval.ms (15000)", "group.consumer.session.timeout.ms (15000)")),
    (["group.consumer.session.timeout.ms=70000"],
     ("group.consumer.session.timeout.ms (70000)", "group.consumer.max.session.timeout.ms (60000)")),
    (["group.connect.min.heartbeat.interval.ms=20000"],
     ("group.connect.min.heartbeat.interval.ms (20000)", "group.connect.max.heartbeat.interval.ms (15000)")),
    (["num.partitions=11", "topic.max.partitions=10"], ("num.partitions (11)", "topic.max.partitions (10)")),
])
def test_cross_setting_rules_name_both_settings(settings, names) -> None:
    line = serve_refusal(*[a for s in settings for a in ("--set", s)])
    for name in names:
        assert name in line


def test_every_numeric_setting_has_a_rule() -> None:
    # A new numeric setting needs its Kafka rule in kcoord.config (BOUNDS / SERVER_BOUNDS).
    group = {name for name, attr in GROUP_SETTINGS.items() if type(getattr(GroupConfig(), attr)) is int}
    server = {name for name, attr in SERVER_SETTINGS.items() if type(getattr(ServerConfig(), attr)) is int}
    assert group == set(BOUNDS) and server == set(SERVER_BOUNDS)


def test_the_edges_kafka_accepts_are_accepted() -> None:
    cfg = ServerConfig.from_kafka({
        "max.connections": "0", "group.initial.rebalance.delay.ms": "0", "offset.metadata.max.bytes": "0",
        "group.min.session.timeout.ms": "1", "group.max.session.timeout.ms": "1", "group.max.size": "2147483647",
        "node.id": "0", "num.partitions": "1", "topic.max.partitions": "1", "max.partitions": "1",
        "auto.create.topics.enable": " FALSE ", "group.consumer.heartbeat.interval.ms": "44999",
        "group.consumer.max.heartbeat.interval.ms": "44999", "group.connect.api.key.base": "32764",
        "group.consumer.migration.policy": "UPGRADE"}, port=65535)
    assert (cfg.max_connections, cfg.auto_create_topics, cfg.group.group_consumer_heartbeat_interval_ms) == \
        (0, False, 44999)


# ---- 5. describe of a group that does not exist ----------------------------------------------------------

@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_describe_missing_group_is_an_error(server, json_flag) -> None:
    r = kcoord("describe", "no-such-group", *json_flag, "--bootstrap", server.bootstrap)
    assert "does not exist" in one_line(r, 1, "no-such-group")
    assert r.stdout == ""


# ---- 6. groups --state -----------------------------------------------------------------------------------

def test_groups_bogus_state_is_refused_listing_states(server) -> None:
    line = one_line(kcoord("groups", "--state", "Bogus", "--bootstrap", server.bootstrap), 2, "Bogus", *STATES)
    assert line.startswith("kcoord groups: ")


def test_groups_state_is_case_insensitive(server) -> None:
    join(server, "state-case")
    r = kcoord("groups", "--state", "completingrebalance", "--json", "--bootstrap", server.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "state-case" in [g["group"] for g in json.loads(r.stdout)]


def test_groups_without_a_server_is_one_line() -> None:
    port = free_port()
    line = one_line(kcoord("groups", "--bootstrap", f"127.0.0.1:{port}"), 1, f"127.0.0.1:{port}")
    assert "cannot connect" in line and "refused" in line


def test_bad_bootstrap_is_one_line() -> None:
    one_line(kcoord("describe", "g", "--bootstrap", "localhost"), 2, "--bootstrap", "localhost")


def test_usage_mistakes_are_one_line() -> None:
    one_line(kcoord("bogus"), 2, "bogus")
    one_line(kcoord("describe"), 2, "group")
    one_line(kcoord("store", "check"), 2, "DIR|URL")
    one_line(kcoord("serve", "--nope"), 2, "--nope")


def test_store_check_of_a_missing_dir_is_one_line(tmp_path) -> None:
    one_line(kcoord("store", "check", str(tmp_path / "absent")), 2, str(tmp_path / "absent"))


# ---- 7. a closed stdout ----------------------------------------------------------------------------------

def join(server, group: str) -> None:
    """A static member joins `group` (the server's initial delay is 0: the join completes at once)."""
    with Client(server.bootstrap) as c:
        r = c.call(11, 9, wire.JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=60_000, member_id="",
            group_instance_id="i-1", protocol_type="consumer",
            protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        assert r.error_code == 0


def into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reader has already gone (`| head` after it exits): every write fails."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "kcoord.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=60, cwd=ROOT, check=False)
    finally:
        os.close(write)


@pytest.mark.parametrize("command", [["describe", "piped"], ["describe", "piped", "--json"], ["groups"],
                                     ["topics"], ["apis"]])
def test_closed_stdout_exits_quietly(server, command) -> None:
    join(server, "piped")
    args = [*command, "--bootstrap", server.bootstrap] if command[0] != "apis" else command
    assert kcoord(*args).returncode == 0  # the command itself works
    r = into_closed_pipe(*args)
    assert (r.returncode, r.stderr) == (141, "")


# ---- 8. the same topic twice ----------------------------------------------------------------------------

def test_serve_conflicting_topic_counts_is_refused() -> None:
    line = serve_refusal("--topic", "a:3", "--topic", "a:6")
    assert "'a'" in line and "3" in line and "6" in line


def test_serve_same_topic_twice_is_refused() -> None:
    assert "'a'" in serve_refusal("--topic", "a:3", "--topic", "a:3")


def test_serve_bad_topic_names_it() -> None:
    assert "--topic bad name!:3" in serve_refusal("--topic", "bad name!:3")


def test_serve_topic_above_topic_max_partitions_is_refused() -> None:
    line = serve_refusal("--topic", "big:11", "--set", "topic.max.partitions=10")
    assert "big:11" in line and "topic.max.partitions" in line


def test_topics_create_conflicting_counts_is_refused(server) -> None:
    r = kcoord("topics", "--create", "twice:3", "--create", "twice:6", "--bootstrap", server.bootstrap)
    line = one_line(r, 2, "twice", "3", "6")
    assert line.startswith("kcoord topics: --create")


# ---- 9 and 10. kcoord plan checks its input before Spark starts ------------------------------------------

@pytest.fixture
def no_java(tmp_path):
    """An environment whose Java only leaves a mark: a test sees whether `kcoord plan` started Spark."""
    home = tmp_path / "java-home"
    (home / "bin").mkdir(parents=True)
    mark = tmp_path / "java-started"
    java = home / "bin" / "java"
    java.write_text(f'#!/bin/sh\necho "$@" > "{mark}"\nexit 1\n')
    java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
    return {**env, "JAVA_HOME": str(home)}, mark


def write_inputs(d: Path) -> tuple[Path, Path]:
    members, topics = d / "members.json", d / "topics.json"
    members.write_text('{"group_id": "g", "member_id": "m1", "topics": ["t"]}\n'
                       '{"group_id": "g", "member_id": "m2", "topics": ["t"]}\n')
    topics.write_text('{"topic": "t", "partitions": 3}\n')
    return members, topics


def plan(env, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return kcoord("plan", *args, "--quiet", env=env, cwd=cwd, timeout=120)


def test_the_java_trap_sees_spark_start(no_java, tmp_path) -> None:
    # The trap works: good input gets as far as starting Spark, which finds no Java and says so in one line.
    env, mark = no_java
    members, topics = write_inputs(tmp_path)
    r = plan(env, tmp_path, "--members", str(members), "--topics", str(topics), "--out", "plans")
    assert mark.exists()
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1].startswith("kcoord plan: Spark did not start")


def test_plan_empty_members_file_is_one_line(no_java, tmp_path) -> None:
    env, mark = no_java
    _, topics = write_inputs(tmp_path)
    (tmp_path / "empty.json").write_text("")
    r = plan(env, tmp_path, "--members", "empty.json", "--topics", str(topics), "--out", "plans")
    assert "empty" in one_line(r, 2, "--members empty.json")
    assert not mark.exists()


@pytest.mark.parametrize("content,where,problem", [
    ("group_id,member_id\ng,m1\n", "members.txt:1", "not JSON"),
    ('{"group_id": "g", "member_id": "m1", "topics": ["t"]}\n{"group_id": "g", "topics": ["t"]}\n',
     "members.txt:2", "member_id is missing"),
    ('{"group_id": "g", "member_id": "m1", "topics": ["t"]}\n\n{"group_id": "g", "member_id": 7}\n',
     "members.txt:3", "member_id is 7"),
    ('[{"group_id": "g", "member_id": "m1"},\n {"group_id": "g", "member_id": "m2", "owned": [1]}]',
     "members.txt: row 2", "owned holds 1"),
    ('[{"group_id": "g", "member_id": "m1"},\n {"group_id": "g", "member_id": }]', "members.txt:2", "not JSON"),
    ('{"group": "g", "type": "classic", "state": "Dead", "members": []}', "members.txt", "no members"),
    ("[]", "members.txt", "no member rows"),
])
def test_plan_bad_members_named_by_file_and_line_before_spark(no_java, tmp_path, content, where,
                                                               problem) -> None:
    env, mark = no_java
    _, topics = write_inputs(tmp_path)
    (tmp_path / "members.txt").write_text(content)
    r = plan(env, tmp_path, "--members", "members.txt", "--topics", str(topics), "--out", "plans")
    assert problem in one_line(r, 2, where)
    assert not mark.exists()


@pytest.mark.parametrize("content,where,problem", [
    ('{"topic": "t", "partitions": "six"}\n', "topics.json: row 1", 'partitions is "six"'),
    ('{"topic": "t", "partitions": 3}\n{"topic": "u", "partitions": -1}\n', "topics.json:2", "below 0"),
    ('{"topics": [{"topic": "t"}], "errors": []}', "topics.json: row 1", "partitions is missing"),
])
def test_plan_bad_topics_named_before_spark(no_java, tmp_path, content, where, problem) -> None:
    env, mark = no_java
    members, _ = write_inputs(tmp_path)
    (tmp_path / "topics.json").write_text(content)
    r = plan(env, tmp_path, "--members", str(members), "--topics", "topics.json", "--out", "plans")
    assert problem in one_line(r, 2, where)
    assert not mark.exists()


def test_plan_missing_and_unparquet_inputs_named_before_spark(no_java, tmp_path) -> None:
    env, mark = no_java
    members, topics = write_inputs(tmp_path)
    r = plan(env, tmp_path, "--members", "absent.json", "--topics", str(topics), "--out", "plans")
    one_line(r, 2, "--members absent.json", "no such file")
    (tmp_path / "fake.parquet").write_text("{}")
    r = plan(env, tmp_path, "--members", str(members), "--topics", str(topics), "--baseline", "fake.parquet",
             "--out", "plans")
    one_line(r, 2, "fake.parquet", "not a Parquet file")
    (tmp_path / "emptydir").mkdir()
    r = plan(env, tmp_path, "--members", "emptydir", "--topics", str(topics), "--out", "plans")
    one_line(r, 2, "emptydir", "without Parquet files")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"group_id": ["g"], "topics": [["t"]]}), tmp_path / "members.bin")  # Parquet, no suffix
    r = plan(env, tmp_path, "--members", "members.bin", "--topics", str(topics), "--out", "plans")
    one_line(r, 2, "members.bin", "no column member_id")
    assert not mark.exists()


def test_plan_bad_out_named_before_spark(no_java, tmp_path) -> None:
    env, mark = no_java
    members, topics = write_inputs(tmp_path)
    (tmp_path / "afile").write_text("")
    for out, problem in (("afile", "not a directory"), ("afile/plans", "cannot be created"),
                         ("plans[1]", "glob")):
        r = plan(env, tmp_path, "--members", str(members), "--topics", str(topics), "--out", out)
        one_line(r, 2, f"--out {out}", problem)
    r = plan(env, tmp_path, "--members", str(members), "--topics", str(topics), "--out", "plans",
             "--baseline", "plans/before")
    one_line(r, 2, "--baseline plans/before")  # absent: named before anything is overwritten
    assert not mark.exists()


def test_plan_out_with_a_colon_reaches_spark_as_an_absolute_path(tmp_path, monkeypatch) -> None:
    # Hadoop reads a relative "plans:v2" as the URI scheme "plans" (a Java traceback at HEAD): kcoord plan hands
    # Spark the absolute path, which Hadoop reads as a path.
    from kcoord.cli import plan as plan_cli

    monkeypatch.chdir(tmp_path)
    assert plan_cli.check_out("plans:v2", []) == str(tmp_path / "plans:v2")
    assert plan_cli.spark_path("--members", "in:put.json") == str(tmp_path / "in:put.json")


@pytest.mark.spark
def test_plan_out_with_a_colon_is_written(tmp_path) -> None:
    members, topics = write_inputs(tmp_path)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    r = kcoord("plan", "--members", "members.json", "--topics", "topics.json", "--out", "plans:v2", "--json",
               "--quiet", "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2", env=env, cwd=tmp_path,
               timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)["out"] == "plans:v2"
    for name in ("before", "after", "diff"):
        assert list((tmp_path / "plans:v2" / name).glob("*.parquet")), name
