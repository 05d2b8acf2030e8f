"""The compiled offsets path (kcoord._core._offsets, `Offsets.handle_commit` / `handle_fetch`) against the general
Python path (`Offsets.offset_commit` / `offset_fetch`, its oracle): two coordinators built alike, one with the
quick path and one without, are given the same random requests (OffsetCommit of every form and version, bad
generations and epochs, unknown members and groups, metadata at and above offset.metadata.max.bytes, unknown topics
and partitions out of range, null and empty metadata, commits above message.max.bytes; OffsetFetch of listed and of
all partitions, old and groups forms), and must answer byte for byte alike and stage the same records. Also: which
commits the quick path takes, and that what it leaves it leaves untouched."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord import errors as E
from kcoord import wire
from kcoord._core._offsets import QUICK_COMMIT_MAX

from ..support.harness import ClassicHarness
from ..support.quick import examples

LIMIT = 12  # offset.metadata.max.bytes, small so that the limit is easy to reach
MESSAGE_MAX = 400  # message.max.bytes: a commit of a few partitions with metadata passes it
TOPICS = {"t": 8, "u": 3}
METADATA = (None, "", "ok", "x" * LIMIT, "x" * (LIMIT + 1), "é" * LIMIT, "é" * (LIMIT + 1),
            "\U0001F600" * (LIMIT // 2), "\U0001F600" * (LIMIT // 2 + 1), "€" * 5)
GROUPS = ("g", "cg", "simple", "", "other")  # classic (member A), consumer (member m1), none yet, empty, unknown


class Side:
    """One coordinator of the pair, its staged records logged, its members' ids by role."""

    def __init__(self, quick: bool, catalogue=None) -> None:
        self.h = ClassicHarness(TOPICS if catalogue is None else {}, catalogue=catalogue,
                                offset_metadata_max_bytes=LIMIT, message_max_bytes=MESSAGE_MAX)
        c = self.h.c
        c.offsets.quick = quick
        self.members = {"g": self.h.form("A")["A"], "cg": "m1"}
        r = c.handle(wire.ConsumerGroupHeartbeatRequest(
            group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"], topic_partitions=[]), 1)
        assert r.error_code == 0 and r.member_epoch == 1
        self.staged: list[tuple[bytes, bytes | None]] = []
        store = c.store
        stage = store.stage

        def logged(key: bytes, value: bytes | None) -> None:
            self.staged.append((key, value))
            stage(key, value)

        store.stage = logged  # type: ignore[method-assign]

    def member(self, gid: str, choice: str) -> str:
        return {"right": self.members.get(gid, "x"), "stranger": "stranger", "": ""}[choice]


def pair() -> tuple[Side, Side]:
    quick = Side(True)
    return quick, Side(False, quick.h.c.topics)


# weighted toward what the quick path takes (known topics, partitions in range, short metadata), the rest mixed in
topic = st.sampled_from(("t", "t", "u", "u", "nope"))
partition = st.tuples(topic, st.one_of(st.integers(0, 2), st.integers(0, 2), st.integers(-1, 9)), st.integers(-1, 1 << 40),
                      st.integers(-1, 5), st.one_of(st.sampled_from((None, "", "ok")), st.sampled_from(METADATA)))
commit_op = st.tuples(st.just("commit"), st.integers(0, 10), st.sampled_from(GROUPS),
                      st.sampled_from((-1, 1, 1, 0, 2)), st.sampled_from(("right", "right", "stranger", "")),
                      st.sampled_from((None, None, "A", "B")),
                      st.one_of(st.lists(partition, min_size=1, max_size=2), st.lists(partition, max_size=6)))
wanted = st.one_of(st.none(), st.lists(st.tuples(topic,
                                                 st.lists(st.integers(-1, 9), max_size=5)), max_size=3))
fetch_op = st.one_of(
    st.tuples(st.just("fetch"), st.integers(0, 7), st.sampled_from(GROUPS), wanted),
    st.tuples(st.just("fetch-groups"), st.integers(8, 10), st.lists(st.tuples(
        st.sampled_from(GROUPS), st.sampled_from((None, "right", "stranger")), st.sampled_from((-1, 0, 1, 2)), wanted),
        min_size=1, max_size=3)))
advance_op = st.tuples(st.just("advance"), st.integers(1, 5_000))
ops = st.lists(st.one_of(commit_op, commit_op, fetch_op, advance_op), min_size=1, max_size=25)


def topic_id(side: Side, name: str) -> bytes:
    topic = side.h.c.topics.get(name)
    return topic.topic_id if topic is not None else b"\x07" * 16


def request(side: Side, op) -> tuple[int, int, wire.Message]:
    kind, v = op[0], op[1]
    if kind == "commit":
        _, v, gid, gen, member, iid, parts = op
        topics: dict[str, list] = {}
        for name, p, offset, epoch, meta in parts:
            topics.setdefault(name, []).append(wire.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=offset, committed_leader_epoch=epoch if v >= 6 else -1,
                committed_metadata=meta if v >= 8 or meta is not None else ""))
        return 8, v, wire.OffsetCommitRequest(
            group_id=gid, generation_id_or_member_epoch=gen if v >= 1 else -1,
            member_id=side.member(gid, member) if v >= 1 else "", group_instance_id=iid if v >= 7 else None,
            topics=[wire.OffsetCommitRequestTopic(name=name if v < 10 else "",
                                                  topic_id=topic_id(side, name) if v >= 10 else wire.ZERO_UUID,
                                                  partitions=ps) for name, ps in topics.items()])
    if kind == "fetch":
        _, v, gid, want = op
        return 9, v, wire.OffsetFetchRequest(group_id=gid, topics=None if want is None else [
            wire.OffsetFetchRequestTopic(name=name, partition_indexes=ps) for name, ps in want],
            require_stable=v >= 7)
    _, v, groups = op
    return 9, v, wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(
        group_id=gid, member_id=None if member is None or v < 9 else side.member(gid, member),
        member_epoch=epoch if v >= 9 else -1, topics=None if want is None else [
            wire.OffsetFetchRequestTopics(name=name if v < 10 else "",
                                          topic_id=topic_id(side, name) if v >= 10 else wire.ZERO_UUID,
                                          partition_indexes=ps) for name, ps in want])
        for gid, member, epoch, want in groups])


def apply(side: Side, op) -> bytes:
    """The encoded response to `op` (b"" for a clock move), with the records it staged."""
    if op[0] == "advance":
        side.h.advance(op[1])
        return b""
    key, v, req = request(side, op)
    return wire.encode_response(key, v, 7, side.h.c.handle(req, v, "client", "/127.0.0.1"))


@settings(max_examples=examples(300), deadline=None)
@given(ops)
def test_quick_path_answers_and_stages_as_the_general_path(ops) -> None:
    quick, general = pair()
    for op in ops:
        quick.staged.clear()
        general.staged.clear()
        assert apply(quick, op) == apply(general, op), op
        assert quick.staged == general.staged, op
        assert quick.h.c.offsets.by_group == general.h.c.offsets.by_group, op
        assert quick.h.c.offsets.commit_count == general.h.c.offsets.commit_count, op
        assert set(quick.h.c.groups) == set(general.h.c.groups), op
    stored = [[(k, v) for k, v in side.h.records.scan() if k[:2] == b"\x00\x01"] for side in (quick, general)]
    assert stored[0] == stored[1]  # the committed offset records


def commit_request(side: Side, gid: str, parts, v: int = 9, gen: int = -1, member: str = ""):
    return request(side, ("commit", v, gid, gen, member, None, parts))[2]


def test_the_quick_path_takes_the_common_commits_and_leaves_the_rest_untouched() -> None:
    side = Side(True)
    offsets = side.h.c.offsets
    # taken: a simple consumer's commit, a classic member's, a consumer member's, and a refused one (answered whole)
    for gid, gen, member in (("simple", -1, ""), ("g", 1, "right"), ("cg", 1, "right"), ("g", 7, "right")):
        req = commit_request(side, gid, [("t", 1, 5, 0, None), ("u", 2, 6, 0, "ok")], gen=gen, member=member)
        assert offsets.quick_commit(req, 9) is not None
    assert offsets.committed("cg")[("u", 2)][:3] == (6, 0, "ok")
    assert offsets.committed("g")[("t", 1)][2] == ""  # a null metadata is kept as ""
    before = (dict(offsets.by_group["simple"]), offsets.commit_count, list(side.staged))
    # left: an unknown topic, a partition out of range, metadata above the limit, a partition named twice, no group
    # id, a commit whose records pass message.max.bytes, one the server planned off the loop
    for parts, gid in (([("nope", 0, 1, 0, None)], "simple"), ([("u", 3, 1, 0, None)], "simple"),
                       ([("t", 0, 1, 0, "x" * (LIMIT + 1))], "simple"), ([("t", 0, 1, 0, None)] * 2, "simple"),
                       ([("t", 0, 1, 0, None)], ""), ([("t", p, 1, 0, "x" * LIMIT) for p in range(8)], "simple")):
        assert offsets.quick_commit(commit_request(side, gid, parts), 9) is None, parts
    req = commit_request(side, "simple", [("t", 0, 1, 0, None)])
    offsets.planned = (req, None)
    assert offsets.quick_commit(req, 9) is None
    offsets.planned = None
    assert (offsets.by_group["simple"], offsets.commit_count, side.staged) == before


def test_a_commit_longer_than_the_quick_bound_takes_the_general_path() -> None:
    side = Side(True)
    side.h.c.offsets.message_max_bytes = 1 << 20  # the default: a commit of a thousand partitions fits
    side.h.c.topics.create("big", QUICK_COMMIT_MAX + 1)
    req = wire.OffsetCommitRequest(group_id="simple", topics=[wire.OffsetCommitRequestTopic(name="big", partitions=[
        wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=p) for p in range(QUICK_COMMIT_MAX + 1)])])
    assert side.h.c.offsets.quick_commit(req, 9) is None
    # ... and a commit of QUICK_COMMIT_MAX partitions (past the small inline table) is taken whole
    req.topics[0].partitions.pop()
    r = side.h.c.offsets.quick_commit(req, 9)
    assert [p.error_code for p in r.topics[0].partitions] == [E.NONE] * QUICK_COMMIT_MAX
    assert len(side.h.c.offsets.committed("simple")) == QUICK_COMMIT_MAX


def test_fetch_of_every_partition_of_a_large_member_is_in_order() -> None:
    side = Side(True)
    offsets = side.h.c.offsets
    offsets.message_max_bytes = 1 << 20
    side.h.c.topics.create("big", 2_000)
    order = list(range(2_000))
    side.h.c.handle(wire.OffsetCommitRequest(group_id="simple", topics=[
        wire.OffsetCommitRequestTopic(name=name, partitions=[
            wire.OffsetCommitRequestPartition(partition_index=p, committed_offset=p * 2) for p in reversed(order)])
        for name in ("big", "t")]), 9)  # "t" has 8 of them: the rest are out of range (the general path)
    every = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="simple", topics=None)])
    r = side.h.c.handle(every, 9)
    [group] = r.groups
    assert [t.name for t in group.topics] == ["big", "t"]
    assert [(p.partition_index, p.committed_offset) for p in group.topics[0].partitions] == [(p, p * 2) for p in order]
    assert [p.partition_index for p in group.topics[1].partitions] == list(range(8))
    listed = wire.OffsetFetchRequest(groups=[wire.OffsetFetchRequestGroup(group_id="simple", topics=[
        wire.OffsetFetchRequestTopics(name="big", partition_indexes=[*reversed(order), 5_000])])])
    for req in (every, listed):
        quick = wire.encode_response(9, 9, 1, offsets.handle_fetch(req, 9))
        offsets.quick = False
        assert wire.encode_response(9, 9, 1, offsets.handle_fetch(req, 9)) == quick
        offsets.quick = True
