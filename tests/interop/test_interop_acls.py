"""Real Kafka clients against kcoord's authorization (issue 32): confluent-kafka (librdkafka) and kafka-python
consumers and admin clients, authenticated with SCRAM on a SASL_PLAINTEXT listener of one `kcoord serve` that runs
Kafka's StandardAuthorizer. The tests' administrator is User:ANONYMOUS on a PLAINTEXT listener, a super user: it
adds each test's SCRAM users (AlterUserScramCredentials) and ACLs (CreateAcls), and removes the ACLs when the test
ends (DeleteAcls, exactly the ones it made; then none is left).

What each library does with a refusal was read on the wire, against this server:
- GROUP_AUTHORIZATION_FAILED to a classic consumer: confluent-kafka's poll() returns a message whose error() is
  KafkaError code 30 ("FindCoordinator response error: Group authorization failed." when FindCoordinator is refused
  (no DESCRIBE on the group), "JoinGroup failed: Broker: Group authorization failed" when only JoinGroup is (DESCRIBE
  but no READ)), and, once it knows the coordinator, its synchronous commit() raises KafkaException(KafkaError 30)
  (the OffsetCommit refused); kafka-python's poll() raises GroupAuthorizationFailedError(group) in both cases.
- kafka-python's KafkaAdminClient.remove_group_members (LeaveGroup by instance id) raises
  GroupAuthorizationFailedError, LeaveGroup's top-level error.
- TOPIC_AUTHORIZATION_FAILED on a commit: confluent-kafka's synchronous commit() raises KafkaException(KafkaError
  29); kafka-python's commit() raises TopicAuthorizationFailedError({topic}).
- A KIP-848 consumer (confluent-kafka, group.protocol=consumer): a refused FindCoordinator is code 30 from poll() as
  above; a refused ConsumerGroupHeartbeat is fatal in librdkafka: poll() returns KafkaError _FATAL (-150), "Fatal
  error: Broker: Group authorization failed: ConsumerGroupHeartbeat fatal error: ...".
- Admin clients: confluent-kafka's describe_consumer_groups future raises KafkaException(KafkaError 30) (it asks
  FindCoordinator first, which is refused); kafka-python's describe_groups raises GroupAuthorizationFailedError from
  FindCoordinator, and, given the coordinator's node id, returns DescribeGroups' own answer for the group: error
  "[Error 30] GroupAuthorizationFailedError", no members. Both list_* calls list only the groups the caller may
  describe, with no error.

Each refusal is also checked on the server's side: its log names the API and operation it refused (the
authorization-denied event), and the group has no member of the refused consumer.
"""

from __future__ import annotations

import re
import time

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client
from kcoord.security.authorizer import ANY, OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES

from ..support.cli import kcoord, one_line
from ..support.interop import committed
from ..support.secured import add_users, groups
from ..support.servers import Server, free_port, serve
from ..support.waits import wait_until

pytestmark = [
    pytest.mark.interop,
    # kafka-python 3.0.12 loads its protocol schemas lazily through deprecated importlib.resources calls
    pytest.mark.filterwarnings(r"ignore:(read|open)_text is deprecated:DeprecationWarning"),
]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, PARTITIONS = "orders", 4
ALL = frozenset(range(PARTITIONS))
PASSWORD = "acl-test-secret"
MECHANISM = {"confluent": "SCRAM-SHA-512", "kafka-python": "SCRAM-SHA-256"}
KINDS = tuple(MECHANISM)
SESSION_MS, HEARTBEAT_MS = 6000, 1000
SETTLE_S = 2.0  # after a refusal, how long the consumer keeps polling to show no assignment comes after it
FATAL = -150  # librdkafka's RD_KAFKA_RESP_ERR__FATAL


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    internal, sasl = free_port(), free_port()
    log = tmp_path_factory.mktemp("acls") / "server.log"
    srv = serve(internal, log, "--topic", f"{TOPIC}:{PARTITIONS}",
                "--set", "group.initial.rebalance.delay.ms=0",
                "--set", f"listeners=INTERNAL://127.0.0.1:{internal},SASL://127.0.0.1:{sasl}",
                "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL:SASL_PLAINTEXT",
                "--set", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                "--set", f"authorizer.class.name={STANDARD_AUTHORIZER}",
                "--set", "super.users=User:ANONYMOUS",
                # KIP-848 timers short enough for a test
                "--set", "group.consumer.min.heartbeat.interval.ms=500",
                "--set", "group.consumer.heartbeat.interval.ms=500",
                "--set", "group.consumer.min.session.timeout.ms=2000",
                "--set", "group.consumer.session.timeout.ms=4000")
    srv.sasl = f"127.0.0.1:{sasl}"
    yield srv
    srv.proc.terminate()
    assert srv.proc.wait(30) == 0, srv.log_tail()
    text = log.read_text(errors="replace")
    assert PASSWORD not in text and "Traceback" not in text


# ---- the administrator: users and ACLs -------------------------------------------------------------------------

def users(srv: Server, *kinds_and_names: tuple[str, str]) -> None:
    """SCRAM users, each with its kind's mechanism: (kind, name) pairs."""
    add_users(srv.bootstrap, {name: (MECHANISM[kind], PASSWORD) for kind, name in kinds_and_names})


def _filter(resource: str, name: str, pattern: str, principal: str, op: str, permission: str):
    return dict(resource_type_filter=RESOURCE_TYPES[resource], resource_name_filter=name,
                pattern_type_filter=PATTERN_TYPES[pattern], principal_filter=principal, host_filter="*",
                operation=OPERATIONS[op], permission_type=PERMISSIONS[permission])


class Acls:
    """The ACLs one test makes (through CreateAcls as the super user), all removed when it ends."""

    def __init__(self, srv: Server) -> None:
        self.srv = srv
        self.made: list[tuple[str, str, str, str, str, str]] = []

    def allow(self, resource: str, name: str, op: str, principal: str, pattern: str = "LITERAL") -> None:
        self._create(resource, name, pattern, principal, op, "ALLOW")

    def deny(self, resource: str, name: str, op: str, principal: str, pattern: str = "LITERAL") -> None:
        self._create(resource, name, pattern, principal, op, "DENY")

    def _create(self, resource, name, pattern, principal, op, permission) -> None:
        principal = principal if ":" in principal else f"User:{principal}"
        with Client(self.srv.bootstrap) as c:
            r = c.call(30, 3, wire.CreateAclsRequest(creations=[wire.CreateAclsRequestAclCreation(
                resource_type=RESOURCE_TYPES[resource], resource_name=name,
                resource_pattern_type=PATTERN_TYPES[pattern], principal=principal, host="*",
                operation=OPERATIONS[op], permission_type=PERMISSIONS[permission])]))
        assert [x.error_code for x in r.results] == [E.NONE], r
        self.made.append((resource, name, pattern, principal, op, permission))

    def clear(self) -> None:
        with Client(self.srv.bootstrap) as c:
            if self.made:
                r = c.call(31, 3, wire.DeleteAclsRequest(filters=[
                    wire.DeleteAclsRequestDeleteAclsFilter(**_filter(*acl)) for acl in self.made]))
                assert [(f.error_code, len(f.matching_acls)) for f in r.filter_results] == [(E.NONE, 1)] * len(
                    self.made), r
            left = c.call(29, 3, wire.DescribeAclsRequest(
                resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
                host_filter=None, operation=ANY, permission_type=ANY))
        assert left.error_code == E.NONE and left.resources == [], left  # no test leaves an ACL behind


@pytest.fixture
def acls(server):
    a = Acls(server)
    yield a
    a.clear()


def denials(srv: Server, resource: str, name: str, principal: str) -> list[tuple[str, str]]:
    """(API, operation) of each refusal the server logged for `principal` on the resource, in order."""
    pattern = re.compile(rf"denied (\w+) (\w+) on {resource} '{re.escape(name)}' to {re.escape(principal)} from ")
    return [(m[1], m[2]) for m in pattern.finditer(srv.log.read_text(errors="replace"))]


def members_of(srv: Server, group: str) -> list[str]:
    """The principals of the group's members, as the super user describes it ([] for a group that does not exist)."""
    return [m["principal"] for m in srv.describe(group)["members"]]


def static_member(srv: Server, group: str, instance: str) -> None:
    """A static member (session 2 min) of a classic group, joined and synced by the super user on PLAINTEXT."""
    with Client(srv.bootstrap) as c:
        j = c.call(11, 5, wire.JoinGroupRequest(
            group_id=group, session_timeout_ms=120_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id=instance, protocol_type="consumer",
            protocols=[wire.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        assert j.error_code == E.NONE, j
        s = c.call(14, 5, wire.SyncGroupRequest(
            group_id=group, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=instance,
            protocol_type="consumer", protocol_name="range",
            assignments=[wire.SyncGroupRequestAssignment(member_id=j.member_id, assignment=b"")]))
        assert s.error_code == E.NONE, s


def instances(srv: Server, group: str) -> list[str | None]:
    return [m["group_instance_id"] for m in srv.describe(group)["members"]]


# ---- consumers, driven from the test's own thread ------------------------------------------------------------

class Confluent:
    """A confluent-kafka consumer of TOPIC as `user` (SCRAM-SHA-512). Every error poll() returns or error_cb is
    given is kept; so is every assignment its on_assign callback is given."""

    kind = "confluent"

    def __init__(self, srv: Server, user: str, group: str, protocol: str = "classic") -> None:
        from confluent_kafka import Consumer

        self.user, self.group = user, group
        self.errors: list = []
        self.assigned: list[frozenset[int]] = []  # what on_assign was given, each call
        conf = {"bootstrap.servers": srv.sasl, "group.id": group, "client.id": f"{user}@{group}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM[self.kind],
                "sasl.username": user, "sasl.password": PASSWORD, "group.protocol": protocol,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000, "error_cb": self.errors.append}
        if protocol == "classic":
            conf.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
        self.c = Consumer(conf)
        self.c.subscribe([TOPIC], on_assign=lambda _c, ps: self.assigned.append(frozenset(p.partition for p in ps)))

    def poll(self) -> None:
        msg = self.c.poll(0.05)
        if msg is not None and msg.error() is not None:
            self.errors.append(msg.error())

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.c.assignment())

    def refusals(self, code: int) -> list:
        """The errors that are the library's form of broker error `code`: a KafkaError with that code."""
        return [e for e in self.errors if e.code() == code]

    def commit(self, offsets: dict[int, int]):
        """A synchronous commit; the exception it raised, or None."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            res = self.c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                asynchronous=False)
        except KafkaException as e:
            return e
        bad = [tp for tp in res or () if tp.error]
        assert not bad, f"a commit that raised nothing has errors: {bad}"
        return None

    @staticmethod
    def is_refusal(exc, code: int) -> bool:
        from confluent_kafka import KafkaException

        return type(exc) is KafkaException and exc.args[0].code() == code

    def close(self) -> None:
        self.c.close()

    def __repr__(self) -> str:
        return (f"<{self.kind} {self.user}@{self.group} assignment={sorted(self.assignment())} "
                f"on_assign={self.assigned} errors={[str(e) for e in self.errors][-3:]}>")


class KafkaPython:
    """A kafka-python consumer of TOPIC as `user` (SCRAM-SHA-256). What poll() raises is kept; so is every
    non-empty assignment its rebalance listener is given."""

    kind = "kafka-python"

    def __init__(self, srv: Server, user: str, group: str) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        self.user, self.group = user, group
        self.errors: list = []
        self.assigned: list[frozenset[int]] = []
        record = self.assigned.append

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, assigned):
                if assigned:  # kafka-python calls it with an empty set too (before the first join)
                    record(frozenset(tp.partition for tp in assigned))

        self.c = KafkaConsumer(bootstrap_servers=srv.sasl, group_id=group, client_id=f"{user}@{group}",
                               security_protocol="SASL_PLAINTEXT", sasl_mechanism=MECHANISM[self.kind],
                               sasl_plain_username=user, sasl_plain_password=PASSWORD,
                               session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                               enable_auto_commit=False, auto_offset_reset="earliest", request_timeout_ms=10_000)
        self.c.subscribe([TOPIC], listener=Listener())
        # the first join waits for the topic's metadata (see tests/support/interop_member.py's _await_metadata)
        deadline = time.monotonic() + 10
        while not self.c.partitions_for_topic(TOPIC) and time.monotonic() < deadline:
            time.sleep(0.05)

    def poll(self) -> None:
        from kafka.errors import KafkaError

        try:
            self.c.poll(timeout_ms=50)
        except KafkaError as e:
            self.errors.append(e)
            time.sleep(0.05)  # it raises again at once on the next poll

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.c.assignment())

    def refusals(self, code: int) -> list:
        """The errors that are the library's form of broker error `code`: its class for that code, exactly."""
        return [e for e in self.errors if type(e) is _kafka_python_class(code)]

    def commit(self, offsets: dict[int, int]):
        from kafka import OffsetAndMetadata, TopicPartition
        from kafka.errors import KafkaError

        try:
            self.c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()},
                          timeout_ms=10_000)
        except KafkaError as e:
            return e
        return None

    @staticmethod
    def is_refusal(exc, code: int) -> bool:
        return type(exc) is _kafka_python_class(code)

    def close(self) -> None:
        self.c.close(autocommit=False)

    def __repr__(self) -> str:
        return (f"<{self.kind} {self.user}@{self.group} assignment={sorted(self.assignment())} "
                f"on_assign={self.assigned} errors={self.errors[-3:]!r}>")


def _kafka_python_class(code: int) -> type:
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    return {E.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationFailedError,
            E.TOPIC_AUTHORIZATION_FAILED: TopicAuthorizationFailedError}[code]


CONSUMERS = {"confluent": Confluent, "kafka-python": KafkaPython}


def poll_until(consumers, check, what: str, timeout: float = 30.0):
    """Poll every consumer in turn until check() holds."""
    def step():
        for m in consumers:
            m.poll()
        return check(), consumers
    return wait_until(step, timeout, what, interval=0, show=repr)


def poll_for(consumers, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in consumers:
            m.poll()


def assigned(m) -> bool:
    return m.assignment() == ALL and ALL in m.assigned


def refused_and_never_assigned(srv: Server, m, others=()) -> None:
    """`m` gets its library's GROUP_AUTHORIZATION_FAILED and, polled on for SETTLE_S more, never an assignment;
    the group has no member of its principal."""
    poll_until([m, *others], lambda: m.refusals(E.GROUP_AUTHORIZATION_FAILED), f"{m.kind}: no group refusal")
    poll_for([m, *others], SETTLE_S)
    assert m.assigned == [] and m.assignment() == frozenset(), m
    assert f"User:{m.user}" not in members_of(srv, m.group)


@pytest.fixture
def consumers():
    made: list = []

    def start(kind: str, srv: Server, user: str, group: str, **kw):
        m = CONSUMERS[kind](srv, user, group, **kw)
        made.append(m)
        return m
    yield start
    for m in made:
        m.close()


# ---- 1. no READ on the group: the library's group-authorization error, never an assignment -----------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grant", ["nothing", "DESCRIBE"])
def test_a_consumer_without_read_on_its_group_is_refused_and_never_assigned(server, acls, consumers, kind,
                                                                            grant) -> None:
    user = group = f"noread-{grant.lower()}-{kind}"
    users(server, (kind, user))
    acls.allow("TOPIC", TOPIC, "DESCRIBE", user)
    if grant == "DESCRIBE":  # enough to find the coordinator (FindCoordinator), not to join
        acls.allow("GROUP", group, "DESCRIBE", user)
    m = consumers(kind, server, user, group)
    refused_and_never_assigned(server, m)
    expected = {("FindCoordinator", "DESCRIBE")} if grant == "nothing" else {("JoinGroup", "READ")}
    # nor can it commit to the group: librdkafka, which knows the coordinator, sends the OffsetCommit (refused with
    # 30: KafkaException 30; without a coordinator it waits for one, then raises _WAIT_COORD itself: not tried);
    # kafka-python raises GroupAuthorizationFailedError again (FindCoordinator) or, while it is still joining,
    # RebalanceInProgressError
    if (kind, grant) != ("confluent", "nothing"):
        attempt = m.commit({0: 1})
        if kind == "confluent":
            assert m.is_refusal(attempt, E.GROUP_AUTHORIZATION_FAILED), attempt
            expected.add(("OffsetCommit", "READ"))
        assert attempt is not None and committed(server, group) == {}
    refused = set(denials(server, "GROUP", group, f"User:{user}"))
    assert refused == expected, refused
    assert server.describe(group)["state"] == "Dead"  # neither the refused join nor the commit made a group


# ---- 2. READ on the group, not on the topic: the commit is refused with TOPIC_AUTHORIZATION_FAILED -----------

@pytest.mark.parametrize("kind", KINDS)
def test_a_commit_needs_read_on_the_topic_describe_or_write_is_not_enough(server, acls, consumers, kind) -> None:
    user = group = f"commit-{kind}"
    users(server, (kind, user))
    acls.allow("GROUP", group, "READ", user)
    acls.allow("TOPIC", TOPIC, "DESCRIBE", user)  # for Metadata, which lists only describable topics
    m = consumers(kind, server, user, group)
    poll_until([m], lambda: assigned(m), f"{kind}: never assigned")
    assert members_of(server, group) == [f"User:{user}"]

    refused = m.commit({0: 5})
    assert m.is_refusal(refused, E.TOPIC_AUTHORIZATION_FAILED), refused
    acls.allow("TOPIC", TOPIC, "WRITE", user)
    refused = m.commit({0: 5})
    assert m.is_refusal(refused, E.TOPIC_AUTHORIZATION_FAILED), refused
    assert committed(server, group) == {}  # nothing of a refused commit is kept
    # (only OffsetCommit's: Fetch, which needs READ too, may be refused as well)
    assert [d for d in denials(server, "TOPIC", TOPIC, f"User:{user}") if d[0] == "OffsetCommit"] == [
        ("OffsetCommit", "READ")] * 2

    acls.allow("TOPIC", TOPIC, "READ", user)
    assert m.commit({0: 5, 3: 7}) is None
    assert committed(server, group) == {0: 5, 3: 7}
    assert m.assignment() == ALL  # still a member, of the same assignment


# ---- 3. a PREFIXED ACL admits the groups under its prefix only ------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_prefixed_acl_admits_the_groups_under_its_prefix_only(server, acls, consumers, kind) -> None:
    user = f"team-{kind}"
    users(server, (kind, user))
    acls.allow("GROUP", "team-a-", "READ", user, pattern="PREFIXED")
    acls.allow("TOPIC", TOPIC, "DESCRIBE", user)
    inside = consumers(kind, server, user, f"team-a-{kind}")
    poll_until([inside], lambda: assigned(inside), f"{kind}: never assigned in team-a-{kind}")
    assert members_of(server, f"team-a-{kind}") == [f"User:{user}"]
    # another team's group, and "team-a" itself ("team-a-" is not a prefix of it)
    outside = [consumers(kind, server, user, g) for g in (f"team-b-{kind}", "team-a")]
    for m in outside:
        refused_and_never_assigned(server, m, others=[x for x in (inside, *outside) if x is not m])
        assert denials(server, "GROUP", m.group, f"User:{user}")[0] == ("FindCoordinator", "DESCRIBE")
    assert inside.assignment() == ALL


# ---- 4. DENY overrides ALLOW --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_deny_overrides_allow(server, acls, consumers, kind) -> None:
    group, ok, barred = f"deny-{kind}", f"deny-ok-{kind}", f"deny-no-{kind}"
    users(server, (kind, ok), (kind, barred))
    acls.allow("GROUP", group, "READ", "User:*")
    acls.deny("GROUP", group, "READ", barred)
    acls.allow("TOPIC", TOPIC, "DESCRIBE", "User:*")
    member = consumers(kind, server, ok, group)
    poll_until([member], lambda: assigned(member), f"{kind}: the allowed user is never assigned")
    m = consumers(kind, server, barred, group)
    refused_and_never_assigned(server, m, others=[member])
    # User:*'s READ implies DESCRIBE (FindCoordinator passes); the DENY is on READ: JoinGroup is refused
    assert set(denials(server, "GROUP", group, f"User:{barred}")) == {("JoinGroup", "READ")}
    assert members_of(server, group) == [f"User:{ok}"] and member.assignment() == ALL
    assert member.assigned == [ALL]  # the refused join caused no rebalance


# ---- 5. ListGroups and describe show only what the caller may see ------------------------------------------

def test_confluent_admin_lists_and_describes_only_what_the_caller_may_describe(server, acls) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    user, mine, others = "lister-ck", "vis-ck-mine", ["vis-ck-other1", "vis-ck-other2"]
    users(server, ("confluent", user))
    for g in (mine, *others):
        static_member(server, g, f"{g}-i")
    assert {mine, *others} <= groups(server)  # the super user lists them all
    acls.allow("GROUP", mine, "DESCRIBE", user)
    admin = AdminClient({"bootstrap.servers": server.sasl, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": MECHANISM["confluent"], "sasl.username": user, "sasl.password": PASSWORD})
    try:
        listed = admin.list_consumer_groups(request_timeout=10).result()
        futures = admin.describe_consumer_groups([mine, *others], request_timeout=10,
                                                 include_authorized_operations=True)
        described = futures[mine].result()
        refusals = []
        for g in others:
            with pytest.raises(KafkaException) as refused:
                futures[g].result()
            refusals.append(refused.value.args[0].code())
    finally:
        del admin  # (it has no close: its threads end when it is freed, not after the module's server)
    assert ([g.group_id for g in listed.valid], listed.errors) == ([mine], [])
    assert [m.group_instance_id for m in described.members] == [f"{mine}-i"]
    assert [op.name for op in described.authorized_operations] == ["DESCRIBE"]  # what the caller may do
    assert refusals == [E.GROUP_AUTHORIZATION_FAILED] * 2
    # librdkafka finds each group's coordinator first: that is what is refused
    assert [denials(server, "GROUP", g, f"User:{user}") for g in others] == [[("FindCoordinator", "DESCRIBE")]] * 2


def test_kafka_python_admin_lists_and_describes_only_what_the_caller_may_describe(server, acls) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupAuthorizationFailedError

    user, mine, other = "lister-kp", "vis-kp-mine", "vis-kp-other"
    users(server, ("kafka-python", user))
    for g in (mine, other):
        static_member(server, g, f"{g}-i")
    assert {mine, other} <= groups(server)
    acls.allow("GROUP", mine, "DESCRIBE", user)
    admin = KafkaAdminClient(bootstrap_servers=server.sasl, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=MECHANISM["kafka-python"], sasl_plain_username=user,
                             sasl_plain_password=PASSWORD, request_timeout_ms=10_000)
    try:
        assert [g["group_id"] for g in admin.list_groups()] == [mine]
        with pytest.raises(GroupAuthorizationFailedError):  # FindCoordinator, refused
            admin.describe_groups([other])
        # with the coordinator named, DescribeGroups itself answers: the refused group first, with no members
        node = admin.describe_cluster()["brokers"][0]["broker_id"]
        described = admin.describe_groups([mine, other], group_coordinator_id=node, include_authorized_operations=True)
    finally:
        admin.close()
    assert [m["group_instance_id"] for m in described[mine]["members"]] == [f"{mine}-i"]
    assert (described[mine]["error"], described[mine]["authorized_operations"]) == (None, ["DESCRIBE"])
    refused = described[other]
    assert (refused["members"], refused["group_state"], refused["protocol_type"]) == ([], "", "")
    assert refused["error"].startswith("[Error 30] GroupAuthorizationFailedError"), refused
    assert denials(server, "GROUP", other, f"User:{user}") == [("FindCoordinator", "DESCRIBE"),
                                                               ("DescribeGroups", "DESCRIBE")]


# ---- 6. `kcoord remove-members` needs READ on the group (Seed 004) -----------------------------------------

def test_remove_members_needs_read_on_the_group(server, acls, tmp_path) -> None:
    user, group, instance = "remover", "rm-static", "rm-static-i"
    users(server, ("confluent", user))
    config = tmp_path / "remover.properties"
    config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM['confluent']}\n"
                      f"sasl.username={user}\nsasl.password={PASSWORD}\n")
    static_member(server, group, instance)
    argv = ("remove-members", group, "--instance-id", instance, "--bootstrap", server.sasl,
            "--command-config", str(config))

    for grant in (None, "DESCRIBE"):  # nothing, then DESCRIBE: neither is READ
        if grant:
            acls.allow("GROUP", group, grant, user)
        r = kcoord(*argv)
        line = one_line(r, 1, group, "LeaveGroup", "GROUP_AUTHORIZATION_FAILED")
        assert line == f"kcoord remove-members: group '{group}': LeaveGroup: GROUP_AUTHORIZATION_FAILED"
        assert r.stdout == ""
        assert instances(server, group) == [instance]  # the static member stays
    # kafka-python's admin removal (LeaveGroup v3+ by instance id) is refused as well: the top-level error raised
    from kafka.admin import KafkaAdminClient, MemberToRemove
    from kafka.errors import GroupAuthorizationFailedError

    users(server, ("kafka-python", f"{user}-kp"))
    acls.allow("GROUP", group, "DESCRIBE", f"{user}-kp")
    admin = KafkaAdminClient(bootstrap_servers=server.sasl, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=MECHANISM["kafka-python"], sasl_plain_username=f"{user}-kp",
                             sasl_plain_password=PASSWORD, request_timeout_ms=10_000)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            admin.remove_group_members(group, [MemberToRemove(group_instance_id=instance)])
    finally:
        admin.close()
    assert instances(server, group) == [instance]
    assert denials(server, "GROUP", group, f"User:{user}") == [("LeaveGroup", "READ")] * 2
    assert denials(server, "GROUP", group, f"User:{user}-kp") == [("LeaveGroup", "READ")]

    acls.allow("GROUP", group, "READ", user)
    r = kcoord(*argv)
    assert (r.returncode, r.stderr) == (0, ""), r
    assert r.stdout.split() == ["INSTANCE-ID", "RESULT", instance, "NONE"]
    assert instances(server, group) == []


# ---- 7. KIP-848 (group.protocol=consumer) -------------------------------------------------------------------

def test_a_kip848_consumer_needs_read_on_its_group(server, acls, consumers) -> None:
    user = "kip848"
    users(server, ("confluent", user))
    acls.allow("TOPIC", TOPIC, "DESCRIBE", user)
    acls.allow("GROUP", "k848-describe", "DESCRIBE", user)
    acls.allow("GROUP", "k848-read", "READ", user)
    nothing = consumers("confluent", server, user, "k848-nothing", protocol="consumer")
    describe = consumers("confluent", server, user, "k848-describe", protocol="consumer")
    # no DESCRIBE: FindCoordinator is refused, code 30 from poll(); DESCRIBE only: the ConsumerGroupHeartbeat is,
    # which librdkafka makes a fatal error naming it
    poll_until([nothing, describe], lambda: nothing.refusals(E.GROUP_AUTHORIZATION_FAILED)
               and describe.refusals(FATAL), "no refusal of each")
    poll_for([nothing, describe], SETTLE_S)
    assert "Group authorization failed" in describe.refusals(FATAL)[0].str(), describe
    for m in (nothing, describe):
        assert m.assigned == [] and m.assignment() == frozenset(), m
        assert members_of(server, m.group) == []
    assert set(denials(server, "GROUP", "k848-nothing", f"User:{user}")) == {("FindCoordinator", "DESCRIBE")}
    assert set(denials(server, "GROUP", "k848-describe", f"User:{user}")) == {("ConsumerGroupHeartbeat", "READ")}

    reader = consumers("confluent", server, user, "k848-read", protocol="consumer")
    poll_until([reader], lambda: reader.assignment() == ALL, "the KIP-848 consumer with READ is never assigned")
    assert server.describe("k848-read")["type"] == "consumer"
    assert members_of(server, "k848-read") == [f"User:{user}"]
