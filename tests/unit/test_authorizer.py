"""The authorizer's decisions and filters, case by case from Kafka's own tests (../shared/reference/kafka-security.md
§8: StandardAuthorizerTest "SAT", ResourcePatternFilterTest "RPF", AclControlManagerTest "ACM"), plus what the
cache must forget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    ANY,
    CLUSTER,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    LITERAL,
    MATCH,
    PREFIXED,
    READ,
    TOPIC,
    WRITE,
    Acl,
    AclFilter,
    Authorizer,
    acl_problem,
    parse_super_users,
)

from ..support.quick import examples

HOST = "127.0.0.1"


def acl(name: str, pattern: int, principal: str, op: int, perm: int = ALLOW, rtype: int = TOPIC,
        host: str = "*") -> Acl:
    p = principal if ":" in principal else f"User:{principal}"
    return Acl(rtype, name, pattern, p, host, op, perm)


def authorizer(*acls: Acl, allow_if_no_acl: bool = False, super_users=()) -> Authorizer:
    a = Authorizer(super_users, allow_if_no_acl)
    for x in acls:
        a.add(x)
    return a


def ok(a: Authorizer, who: str, op: int, name: str, rtype: int = TOPIC, host: str = HOST) -> bool:
    return a.authorize(who if ":" in who else f"User:{who}", host, op, rtype, name)


# ---- SAT testAllowEveryoneIfNoAclFound (cases 1, 2) -------------------------------------------------------------

@pytest.mark.parametrize("allow_if_no_acl", [True, False])
def test_allow_everyone_applies_only_to_a_resource_no_acl_covers(allow_if_no_acl: bool) -> None:
    a = authorizer(acl("topic1", LITERAL, "Alice", READ), allow_if_no_acl=allow_if_no_acl)
    assert not ok(a, "Bob", READ, "topic1")  # the resource has ACLs: Bob is matched by none
    assert ok(a, "Alice", READ, "topic1")
    assert ok(a, "Bob", READ, "topic2") is allow_if_no_acl


def test_allow_everyone_is_blocked_by_a_prefixed_or_wildcard_acl_of_another_principal() -> None:
    a = authorizer(acl("top", PREFIXED, "Alice", READ), allow_if_no_acl=True)
    assert not ok(a, "Bob", READ, "topic9")
    assert ok(a, "Bob", READ, "other")
    a = authorizer(acl("*", LITERAL, "Alice", READ, rtype=GROUP), allow_if_no_acl=True)
    assert not ok(a, "Bob", READ, "g", GROUP)
    assert ok(a, "Bob", READ, "g", TOPIC)  # another resource type is another resource


# ---- SAT testFindResultImplication (cases 3-5) ------------------------------------------------------------------

@pytest.mark.parametrize("op", [DESCRIBE, READ, WRITE, DELETE, ALTER])
def test_an_allow_on_read_write_delete_or_alter_implies_describe(op: int) -> None:
    assert ok(authorizer(acl("foo_", PREFIXED, "bob", op)), "bob", DESCRIBE, "foo_bar")


@pytest.mark.parametrize("op, perm", [(CREATE, ALLOW), (READ, DENY), (WRITE, DENY), (DELETE, DENY), (ALTER, DENY)])
def test_create_and_denials_imply_nothing(op: int, perm: int) -> None:
    a = authorizer(acl("foo_", PREFIXED, "bob", op, perm), allow_if_no_acl=False)
    assert not ok(a, "bob", DESCRIBE, "foo_bar")
    # no match at all: with allow.everyone on, a covered resource is still refused (it has ACLs)
    a.allow_if_no_acl = True
    a.replace(a.acls)
    assert not ok(a, "bob", DESCRIBE, "foo_bar")


def test_alter_configs_implies_describe_configs_only_when_allowed() -> None:
    assert ok(authorizer(acl("foo_", PREFIXED, "bob", ALTER_CONFIGS)), "bob", DESCRIBE_CONFIGS, "foo_bar")
    assert not ok(authorizer(acl("foo_", PREFIXED, "bob", ALTER_CONFIGS, DENY),
                             acl("foo_", PREFIXED, "bob", DESCRIBE_CONFIGS)), "bob", ALTER_CONFIGS, "foo_bar")
    denied_alter = authorizer(acl("foo_", PREFIXED, "bob", ALTER_CONFIGS, DENY), acl("foo_", PREFIXED, "bob",
                                                                                      DESCRIBE_CONFIGS))
    assert ok(denied_alter, "bob", DESCRIBE_CONFIGS, "foo_bar")  # a DENY on ALTER_CONFIGS denies no DESCRIBE_CONFIGS


# ---- SAT testFindResultPrincipalMatching (cases 6, 7) ------------------------------------------------------------

def test_principals_match_exactly_or_by_the_user_wildcard() -> None:
    assert not ok(authorizer(acl("foo_", PREFIXED, "bob", READ)), "alice", READ, "foo_bar")
    assert not ok(authorizer(acl("bar", LITERAL, "User:*", READ, DENY, GROUP), acl("bar", LITERAL, "alice", READ,
                                                                                     rtype=GROUP)),
                  "alice", READ, "bar", GROUP)
    assert not ok(authorizer(acl("foo", LITERAL, "Alice", READ)), "alice", READ, "foo")  # case-sensitive
    assert not ok(authorizer(acl("foo", LITERAL, "Group:x", READ)), "User:x", READ, "foo")  # the type counts


# ---- SAT testDenyPrecedenceWithOperationAll (cases 8, 9) -----------------------------------------------------------

def _deny_precedence() -> Authorizer:
    return authorizer(acl("foo", LITERAL, "alice", ALL, DENY), acl("foo", PREFIXED, "alice", READ),
                      acl("foo", LITERAL, "User:*", ALL, DENY), acl("foo", PREFIXED, "User:*", DESCRIBE))


@pytest.mark.parametrize("who, op, name, expected", [
    ("alice", WRITE, "foo", False), ("alice", READ, "foo", False), ("alice", DESCRIBE, "foo", False),
    ("alice", READ, "foobar", True),
    ("bob", DESCRIBE, "foo", False), ("bob", READ, "foo", False), ("bob", WRITE, "foo", False),
    ("bob", DESCRIBE, "foobaz", True), ("bob", READ, "foobaz", False),
])
def test_a_deny_on_all_wins_over_every_allow(who: str, op: int, name: str, expected: bool) -> None:
    assert ok(_deny_precedence(), who, op, name) is expected


# ---- SAT testTopicAclWithOperationAll (cases 10, 11) ---------------------------------------------------------------

@pytest.mark.parametrize("who, op, name, expected", [
    ("alice", WRITE, "foo", True), ("alice", DESCRIBE_CONFIGS, "bar", True), ("alice", DESCRIBE, "baz", False),
    ("malory", DESCRIBE, "foo", True), ("malory", WRITE, "bar", False), ("malory", READ, "baz", False),
])
def test_all_allows_every_operation(who: str, op: int, name: str, expected: bool) -> None:
    a = authorizer(acl("foo", LITERAL, "User:*", ALL), acl("bar", PREFIXED, "alice", ALL), acl("baz", LITERAL,
                                                                                              "bob", ALL))
    assert ok(a, who, op, name) is expected


# ---- SAT testHostAddressAclValidation (cases 12, 13) ---------------------------------------------------------------

def test_hosts_match_exactly_or_by_the_wildcard() -> None:
    a = authorizer(acl("foo", LITERAL, "alice", READ, DENY, host="192.168.1.1"), acl("foo", LITERAL, "alice", READ))
    assert not ok(a, "alice", READ, "foo", host="192.168.1.1")
    assert ok(a, "alice", READ, "foo", host="192.168.1.2")
    b = authorizer(acl("bar", LITERAL, "bob", READ, host="192.168.1.2"),
                   acl("bar", LITERAL, "User:*", DESCRIBE, host="127.0.0.1"))
    assert ok(b, "bob", READ, "bar", host="192.168.1.2")
    assert ok(b, "bob", DESCRIBE, "bar", host="192.168.1.2")  # implied by the READ
    assert not ok(b, "bob", READ, "bar", host="127.0.0.1")
    assert ok(b, "bob", DESCRIBE, "bar", host="127.0.0.1")


# ---- SAT testAuthorizationWithManyAcls (cases 14, 15) ---------------------------------------------------------------

def test_many_acls_of_mixed_types_patterns_and_permissions() -> None:
    a = authorizer(acl("green", PREFIXED, "bob", READ), acl("*", LITERAL, "bob", WRITE, rtype=GROUP),
                   acl("wheel", LITERAL, "User:*", WRITE, DENY, GROUP))
    assert ok(a, "bob", READ, "green1")
    assert not ok(a, "bob", WRITE, "wheel", GROUP)
    a.add(acl("alpha", PREFIXED, "User:*", READ))
    a.add(acl("alp", PREFIXED, "bob", READ, DENY))
    assert not ok(a, "bob", READ, "alpha")
    assert ok(a, "bob", WRITE, "arbitrary", GROUP)
    assert not ok(a, "bob", READ, "ala")


# ---- SAT testPrefixAcls (cases 16, 17) -------------------------------------------------------------------------

@pytest.mark.parametrize("who, op, name, expected", [
    ("bob", WRITE, "foobarr", True), ("bob", READ, "goobar", False), ("bob", READ, "fooa", True),
    ("alice", DESCRIBE, "fooa", True), ("alice", WRITE, "bar", False), ("alice", READ, "baz", False),
])
def test_prefixed_acls(who: str, op: int, name: str, expected: bool) -> None:
    a = authorizer(acl("fooa", PREFIXED, "alice", ALL), acl("foobar", LITERAL, "bob", ALL),
                   acl("f", PREFIXED, "bob", ALL))
    assert ok(a, who, op, name) is expected


def test_a_prefix_longer_than_the_name_covers_nothing_and_a_literal_star_covers_all() -> None:
    a = authorizer(acl("team-a-long", PREFIXED, "x", READ, rtype=GROUP), acl("*", LITERAL, "y", READ, rtype=GROUP))
    assert not ok(a, "x", READ, "team-a", GROUP)
    assert ok(a, "y", READ, "anything", GROUP)
    assert not ok(a, "y", READ, "anything", TOPIC)


# ---- super users (cases 18, 19) ----------------------------------------------------------------------------------

def test_a_super_user_is_allowed_everything_even_against_a_deny() -> None:
    a = authorizer(acl("*", LITERAL, "User:*", ALL, DENY), super_users={"User:superman"})
    assert ok(a, "superman", WRITE, "t")
    assert ok(a, "superman", ALTER, "kafka-cluster", CLUSTER)
    assert not ok(a, "bob", DESCRIBE, "t")


def test_super_users_are_parsed_as_kafka_parses_them() -> None:
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        parse_super_users("bob;:alice")
    with pytest.raises(ValueError, match="but got :alice"):
        parse_super_users("User:bob;:alice")


# ---- the cache ------------------------------------------------------------------------------------------------

def test_every_change_drops_the_cached_decisions() -> None:
    a = authorizer()
    assert not ok(a, "bob", READ, "g", GROUP)
    grant = acl("g", LITERAL, "bob", READ, rtype=GROUP)
    a.add(grant)
    assert ok(a, "bob", READ, "g", GROUP)
    deny = acl("g", PREFIXED, "bob", READ, DENY, GROUP)
    a.add(deny)
    assert not ok(a, "bob", READ, "g", GROUP)
    a.remove(deny)
    assert ok(a, "bob", READ, "g", GROUP)
    a.replace([])
    assert not ok(a, "bob", READ, "g", GROUP)
    assert a.add(grant) and not a.add(grant)  # a second add is a no-op
    assert a.remove(grant) and not a.remove(grant)


def test_the_cache_is_bounded() -> None:
    from kcoord.security import authorizer as mod
    a = authorizer(acl("g", PREFIXED, "bob", READ, rtype=GROUP))
    for i in range(mod.CACHE_MAX + 10):
        a.authorize("User:bob", HOST, READ, GROUP, f"g{i}")
    assert len(a._cache) <= mod.CACHE_MAX


def test_the_authorized_operations_bitfield() -> None:
    a = authorizer(acl("g", LITERAL, "bob", READ, rtype=GROUP))
    assert a.operations_bitfield("User:bob", HOST, GROUP, "g") == 264  # READ and the DESCRIBE it implies
    assert a.operations_bitfield("User:eve", HOST, GROUP, "g") == 0


# ---- filters (RPF, cases 31-33; ACM, case 35) -----------------------------------------------------------------------

def test_a_match_filter_finds_what_would_apply_to_the_name() -> None:
    lit, star, pre = acl("Name", LITERAL, "a", READ), acl("*", LITERAL, "a", READ), acl("Name", PREFIXED, "a", READ)
    f = AclFilter(TOPIC, "Name", MATCH)
    assert all(f.matches(x) for x in (lit, star, pre))
    g = AclFilter(TOPIC, "Name-something", MATCH)
    assert not g.matches(lit) and g.matches(pre)


def test_any_and_literal_filters_do_not_expand_the_wildcard_and_are_case_sensitive() -> None:
    star, lit = acl("*", LITERAL, "a", READ), acl("Name", LITERAL, "a", READ)
    assert not AclFilter(TOPIC, "Name", ANY).matches(star)
    assert not AclFilter(TOPIC, "Name", LITERAL).matches(star)
    assert not AclFilter(TOPIC, "NAME", LITERAL).matches(lit)
    assert AclFilter(TOPIC, "Name", ANY).matches(lit)


def test_principal_and_host_filters_are_exact_strings() -> None:
    x = acl("t", LITERAL, "User:*", READ)
    assert AclFilter(principal="User:*").matches(x)
    assert not AclFilter(principal="User:bob").matches(x)
    assert not AclFilter(host="127.0.0.1").matches(x)
    assert AclFilter(operation=READ, permission=ALLOW).matches(x)
    assert not AclFilter(operation=DESCRIBE).matches(x)
    assert not AclFilter(resource_type=GROUP).matches(x)


def test_matching_uses_the_literal_index_and_the_full_scan_alike() -> None:
    a = authorizer(acl("t", LITERAL, "a", READ), acl("t", PREFIXED, "a", READ), acl("u", LITERAL, "a", READ))
    assert a.matching(AclFilter(TOPIC, "t", LITERAL)) == [acl("t", LITERAL, "a", READ)]
    assert len(a.matching(AclFilter(TOPIC, "t", ANY))) == 2
    assert len(a.matching(AclFilter())) == 3


# ---- what may be stored (ACM validateNewAcl, AclApis; case 34) ----------------------------------------------------

@pytest.mark.parametrize("bad, message", [
    (Acl(0, "t", LITERAL, "User:a", "*", READ, ALLOW), "Invalid resourceType UNKNOWN"),
    (Acl(ANY, "t", LITERAL, "User:a", "*", READ, ALLOW), "Invalid resourceType ANY"),
    (Acl(TOPIC, "t", 0, "User:a", "*", READ, ALLOW), "Invalid patternType UNKNOWN"),
    (Acl(TOPIC, "t", MATCH, "User:a", "*", READ, ALLOW), "Invalid patternType MATCH"),
    (Acl(TOPIC, "t", LITERAL, "User:a", "*", ANY, ALLOW), "Invalid operation ANY"),
    (Acl(TOPIC, "t", LITERAL, "User:a", "*", READ, ANY), "Invalid permissionType ANY"),
    (Acl(TOPIC, "", LITERAL, "User:a", "*", READ, ALLOW), "Invalid empty resource name"),
    (Acl(CLUSTER, "c", LITERAL, "User:a", "*", ALTER, ALLOW), "The only valid name for the CLUSTER resource is "
                                                                 "kafka-cluster"),
    (Acl(TOPIC, "t", LITERAL, "alice", "*", READ, ALLOW), "Invalid principal 'alice'"),
])
def test_what_cannot_be_stored_is_named_in_kafkas_words(bad: Acl, message: str) -> None:
    assert message in (acl_problem(bad) or "")


def test_a_valid_acl_has_no_problem() -> None:
    assert acl_problem(Acl(CLUSTER, "kafka-cluster", LITERAL, "User:a", "*", ALTER, ALLOW)) is None
    assert acl_problem(Acl(GROUP, "team-a-", PREFIXED, "User:*", "10.0.0.1", READ, DENY)) is None


# ---- the indexes against the rule itself -------------------------------------------------------------------------

def brute_force(acls: set[Acl], super_users: frozenset[str], allow_if_no_acl: bool, principal: str, host: str,
                op: int, rtype: int, name: str) -> bool:
    """StandardAuthorizerData.authorize written as §5 states it, over every ACL: no index, no cache."""
    if principal in super_users:
        return True
    covering = [a for a in acls if a.resource_type == rtype and (
        (a.pattern == LITERAL and a.name in (name, "*")) or (a.pattern == PREFIXED and name.startswith(a.name)))]
    matching = [a for a in covering if a.principal in (principal, "User:*") and a.host in (host, "*") and (
        a.operation in (op, ALL) or (a.permission == ALLOW and (
            (op == DESCRIBE and a.operation in (READ, WRITE, DELETE, ALTER)) or
            (op == DESCRIBE_CONFIGS and a.operation == ALTER_CONFIGS))))]
    if any(a.permission == DENY for a in matching):
        return False
    if matching:
        return True
    return not covering and allow_if_no_acl


NAMES = st.text(alphabet="ab*", min_size=1, max_size=4)
ACLS = st.builds(Acl, st.sampled_from([TOPIC, GROUP]), NAMES, st.sampled_from([LITERAL, PREFIXED]),
                 st.sampled_from(["User:a", "User:b", "User:*"]), st.sampled_from(["*", "10.0.0.1"]),
                 st.sampled_from([ALL, READ, WRITE, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS, CREATE]),
                 st.sampled_from([ALLOW, DENY]))


FILTERS = st.builds(AclFilter, st.sampled_from([ANY, TOPIC, GROUP]), st.none() | NAMES,
                    st.sampled_from([ANY, MATCH, LITERAL, PREFIXED]), st.none() | st.sampled_from(["User:a", "User:*"]),
                    st.none() | st.just("*"), st.sampled_from([ANY, READ, ALL]), st.sampled_from([ANY, ALLOW, DENY]))


@settings(max_examples=examples(300), deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.lists(ACLS, max_size=6)), min_size=1, max_size=8),
       allow_if_no_acl=st.booleans(), filters=st.lists(FILTERS, max_size=4))
def test_decisions_and_filters_match_the_rule_over_every_acl_through_adds_and_removes(
        steps, allow_if_no_acl: bool, filters) -> None:
    a = Authorizer({"User:root"}, allow_if_no_acl)
    held: set[Acl] = set()
    for adding, batch in steps:
        if adding:
            a.update(add=batch)
            held |= set(batch)
        else:
            a.update(remove=batch + sorted(held, key=repr)[:2])
            held -= set(batch) | set(sorted(held, key=repr)[:2])
        assert a.acls == held
        for flt in filters:  # the indexed lookups find what a walk over every ACL finds
            assert set(a.matching(flt)) == {x for x in held if flt.matches(x)}, flt
        for who in ("User:a", "User:b", "User:root"):
            for host in ("10.0.0.1", "10.0.0.2"):
                for op in (READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS, CREATE):
                    for rtype in (TOPIC, GROUP):
                        for name in ("a", "ab", "abb", "b", "*", "ba"):
                            assert a.authorize(who, host, op, rtype, name) == brute_force(
                                held, a.super_users, allow_if_no_acl, who, host, op, rtype, name), (who, host, op,
                                                                                                   rtype, name)
