"""Settings refused or read in-process: GroupConfig's and ServerConfig's rules, Kafka-style value parsing, topic names
and specs, and the topic catalogue's partition accounting (kcoord.config, kcoord.topics).

Each refusal is a ValueError (TopicError for topics) whose message names the setting, the value and the rule; the
tests assert those parts, not whole sentences.
"""

from __future__ import annotations

import pytest

from kcoord.config import SETTINGS, GroupConfig, ServerConfig
from kcoord.topics import PartitionLimitError, Topic, TopicCatalogue, TopicError, parse_topic_spec, validate_name


def refusal(**kwargs: object) -> str:
    with pytest.raises(ValueError) as e:
        GroupConfig(**kwargs)  # type: ignore[arg-type]
    return str(e.value)


# --- GroupConfig: the rebalance protocols, assignors and migration policy -------------------------------------------


def test_rebalance_protocols_must_list_classic() -> None:
    for value in ("consumer", "consumer,connect", ""):
        msg = refusal(group_coordinator_rebalance_protocols=value)
        assert "group.coordinator.rebalance.protocols" in msg and f"{value!r} must list classic" in msg


def test_rebalance_protocols_refuse_an_unknown_protocol() -> None:
    msg = refusal(group_coordinator_rebalance_protocols="classic,share")
    assert "group.coordinator.rebalance.protocols" in msg and "'classic,share' must list classic" in msg
    for ok in ("classic", "classic,consumer", "classic, consumer, connect"):
        assert "classic" in GroupConfig(group_coordinator_rebalance_protocols=ok).rebalance_protocols()


def test_consumer_assignors_refused_when_empty_unknown_or_repeated() -> None:
    for value in ("", " , ", "uniform,sticky", "sticky", "range,range"):
        msg = refusal(group_consumer_assignors=value)
        assert "group.consumer.assignors" in msg and repr(value) in msg
        assert "uniform and/or range" in msg and "each once" in msg
    assert GroupConfig(group_consumer_assignors="range, uniform").consumer_assignors() == ("range", "uniform")


def test_migration_policy_refusal_lists_the_policies() -> None:
    msg = refusal(group_consumer_migration_policy="sideways")
    assert "group.consumer.migration.policy" in msg and "'sideways'" in msg
    assert "bidirectional, upgrade, downgrade, disabled" in msg
    assert GroupConfig(group_consumer_migration_policy=" Upgrade ").upgrade_enabled()


# --- GroupConfig: cross-setting rules, each naming both settings ------------------------------------------------------


def test_classic_min_session_timeout_above_max_is_refused() -> None:
    msg = refusal(group_min_session_timeout_ms=30_000, group_max_session_timeout_ms=20_000)
    assert "group.min.session.timeout.ms (30000)" in msg and "group.max.session.timeout.ms (20000)" in msg
    GroupConfig(group_min_session_timeout_ms=20_000, group_max_session_timeout_ms=20_000)


@pytest.mark.parametrize("kind", ["consumer", "connect"])
@pytest.mark.parametrize("pair,low,high", [("heartbeat.interval.ms", 16_000, 20_000),
                                           ("session.timeout.ms", 65_000, 70_000)])
def test_a_minimum_above_its_maximum_names_the_pair(kind: str, pair: str, low: int, high: int) -> None:
    # min > max is refused naming both (not a later rule that the same values also break)
    field = pair.replace(".", "_")
    msg = refusal(**{f"group_{kind}_min_{field}": high, f"group_{kind}_max_{field}": low})
    assert f"group.{kind}.min.{pair} ({high})" in msg and f"group.{kind}.max.{pair} ({low})" in msg


@pytest.mark.parametrize("kind", ["consumer", "connect"])
def test_heartbeat_interval_must_be_below_session_timeout(kind: str) -> None:
    # Kafka: heartbeat.interval.ms < session.timeout.ms, strictly; equal is refused.
    base = {f"group_{kind}_min_session_timeout_ms": 10_000, f"group_{kind}_session_timeout_ms": 10_000,
            f"group_{kind}_max_heartbeat_interval_ms": 15_000}
    msg = refusal(**base, **{f"group_{kind}_heartbeat_interval_ms": 10_000})
    assert f"group.{kind}.heartbeat.interval.ms (10000)" in msg and f"group.{kind}.session.timeout.ms (10000)" in msg
    assert "below" in msg
    GroupConfig(**base, **{f"group_{kind}_heartbeat_interval_ms": 9_999})  # type: ignore[arg-type]


# --- check_bounds: types ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [True, "5", 5.0, None])
def test_a_bounded_setting_that_is_not_an_integer_is_refused(value: object) -> None:
    msg = refusal(group_max_size=value)
    assert "group.max.size" in msg and repr(value) in msg and "not an integer" in msg


# --- kafka_settings / parse_setting: reading Kafka-style values -------------------------------------------------------


def test_unknown_group_setting_names_it_and_the_closest_name_only() -> None:
    # one short line (issue #30), not the list of every known name
    with pytest.raises(ValueError) as e:
        GroupConfig.from_kafka({"group.max.sise": "3"})
    assert str(e.value) == "unknown setting 'group.max.sise' (did you mean group.max.size?)"
    assert sum(name in str(e.value) for name in SETTINGS) == 1


def test_a_kafka_broker_setting_given_to_group_config_is_left_out() -> None:
    assert GroupConfig.from_kafka({"group.max.size": "3", "log.dirs": "/tmp/x"}) == GroupConfig(group_max_size=3)


def test_malformed_integer_names_the_setting() -> None:
    for text in ("abc", "1_000", "1e3", "10.0", ""):
        with pytest.raises(ValueError) as e:
            GroupConfig.from_kafka({"group.max.size": text})
        msg = str(e.value)
        assert "group.max.size" in msg and repr(text) in msg and "not an integer" in msg
    assert GroupConfig.from_kafka({"group.max.size": " +12 "}).group_max_size == 12
    assert GroupConfig.from_kafka({"group.initial.rebalance.delay.ms": "0"}).group_initial_rebalance_delay_ms == 0


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("TRUE", True), (" True ", True), ("false", False),
                                                ("FALSE", False), ("False", False)])
def test_booleans_read_as_kafka_reads_them(text: str, expected: bool) -> None:
    assert ServerConfig.from_kafka({"auto.create.topics.enable": text}).auto_create_topics is expected


@pytest.mark.parametrize("text", ["yes", "1", "", "truee"])
def test_a_boolean_that_is_not_true_or_false_is_refused(text: str) -> None:
    with pytest.raises(ValueError) as e:
        ServerConfig.from_kafka({"auto.create.topics.enable": text})
    msg = str(e.value)
    assert "auto.create.topics.enable" in msg and repr(text) in msg and "true or false" in msg


def test_a_text_setting_given_a_number_is_read_as_its_text() -> None:
    with pytest.raises(ValueError) as e:
        ServerConfig.from_kafka({"store.fsync": 1})
    assert "store.fsync" in str(e.value) and "'1'" in str(e.value)
    assert ServerConfig.from_kafka({"store.fsync": "off"}).store_fsync == "off"


# --- topic names and specs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a b", "a/b", "caf\u00e9", "t\u0663", "a:b"])
def test_invalid_topic_names_are_refused(name: str) -> None:
    with pytest.raises(TopicError) as e:
        validate_name(name)
    assert repr(name) in str(e.value)


@pytest.mark.parametrize("name", ["a", "a" * 249, "...", "Orders.v2_final-X9", "X"])
def test_valid_topic_names(name: str) -> None:
    validate_name(name)
    assert TopicCatalogue().create(name, 1).name == name


def test_parse_topic_spec() -> None:
    assert parse_topic_spec("orders:12") == ("orders", 12)
    assert parse_topic_spec("orders:1") == ("orders", 1)
    assert parse_topic_spec("orders") == ("orders", 1)
    for spec, rule in (("orders:x", "NAME:PARTITIONS"), ("a:b:3", "NAME:PARTITIONS"), ("orders:0", "at least one"),
                       ("orders:-2", "at least one")):
        with pytest.raises(TopicError) as e:
            parse_topic_spec(spec)
        assert repr(spec) in str(e.value) and rule in str(e.value)
    with pytest.raises(TopicError, match="'a b'"):
        parse_topic_spec("a b:3")


# --- the catalogue ----------------------------------------------------------------------------------------------------


def test_catalogue_defaults_are_kafkas() -> None:
    # auto.create.topics.enable defaults to true and num.partitions to 1, as on Kafka.
    cat = TopicCatalogue()
    assert cat.auto_create is True and cat.default_partitions == 1


def test_create_refusals_name_the_topic() -> None:
    cat = TopicCatalogue(topic_max_partitions=10, max_partitions=12)
    cat.create("orders", 3)
    with pytest.raises(TopicError, match="'orders'.*already exists"):
        cat.create("orders", 3)
    with pytest.raises(TopicError) as e:
        cat.create("empty", 0)
    assert "'empty'" in str(e.value) and "at least one partition" in str(e.value)
    with pytest.raises(PartitionLimitError) as e:
        cat.create("wide", 11)
    assert "'wide'" in str(e.value) and "topic.max.partitions (10)" in str(e.value)
    with pytest.raises(PartitionLimitError) as e:
        cat.create("more", 10)
    assert "'more'" in str(e.value) and "13 in all" in str(e.value) and "max.partitions (12)" in str(e.value)


def test_grow_refusals_and_a_same_count_grow_is_a_no_op() -> None:
    cat = TopicCatalogue(topic_max_partitions=10)
    t = cat.create("orders", 4)
    v = cat.version
    assert cat.grow("orders", 4) is t and t.partitions == 4 and cat.version == v
    with pytest.raises(TopicError) as e:
        cat.grow("orders", 3)
    assert "'orders'" in str(e.value) and "only grow" in str(e.value)
    with pytest.raises(PartitionLimitError) as e:
        cat.grow("orders", 11)
    assert "'orders'" in str(e.value) and "topic.max.partitions (10)" in str(e.value)


def test_version_never_repeats_across_changes() -> None:
    # Groups compare the version for equality to notice new topics and partitions: a value seen before a change
    # must never come back after one.
    cat = TopicCatalogue()
    seen = [cat.version]

    def changed() -> None:
        assert cat.version not in seen
        seen.append(cat.version)

    cat.create("a", 1)
    changed()
    cat.delete("a")
    changed()
    cat.create("b", 1)
    changed()
    cat.grow("b", 2)
    changed()
    cat.restore(Topic("c", bytes(16), 1))
    changed()
    cat.restore(Topic("c", bytes([1]) * 16, 2))
    changed()
    cat.delete("c")
    changed()


def test_restore_replaces_a_topic_of_the_same_name() -> None:
    cat = TopicCatalogue(topic_max_partitions=10, max_partitions=12)
    cat.create("keep", 2)
    cat.restore(Topic("orders", b"\x01" * 16, 4))
    assert cat.total_partitions == 6
    cat.restore(Topic("orders", b"\x02" * 16, 7))
    assert cat.names_by_id() == {cat.get("keep").topic_id: "keep", b"\x02" * 16: "orders"}
    assert cat.get("orders").partitions == 7 and cat.total_partitions == 9
    assert cat.over_limits() is None
    cat.create("more", 3)  # 12 in all: exactly max.partitions
    with pytest.raises(PartitionLimitError):
        cat.create("one", 1)


def test_over_limits_at_and_past_the_bounds() -> None:
    cat = TopicCatalogue()
    cat.restore(Topic("orders", b"\x01" * 16, 5))
    cat.restore(Topic("events", b"\x02" * 16, 3))
    cat.topic_max_partitions, cat.max_partitions = 5, 8  # exactly at both bounds: nothing is over
    assert cat.over_limits() is None
    cat.topic_max_partitions = 4
    msg = cat.over_limits()
    assert msg is not None and "'orders'" in msg and "topic.max.partitions (4)" in msg
    cat.topic_max_partitions, cat.max_partitions = 5, 7
    msg = cat.over_limits()
    assert msg is not None and "8 partitions" in msg and "max.partitions (7)" in msg
