"""ACLs on a cluster (issue 32): a change made at one node applies at every other node within one lease round, and a
node that starts later loads them. Two nodes over the suite's PostgreSQL; the principal is User:ANONYMOUS
(PLAINTEXT), which may manage ACLs because no ACL covers the CLUSTER resource until it grants itself ALTER on it
(allow.everyone.if.no.acl.found=true)."""

from __future__ import annotations

import pytest

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client

from ..support.cluster_nodes import FAST, KCluster, wait_until
from ..support.metrics import scrape, value
from ..support.servers import free_port

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GROUP = "guarded"


def heartbeat(bootstrap: str) -> int:
    with Client(bootstrap) as c:
        return c.request(wire.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m"), 4).error_code


def create(bootstrap: str, *creations) -> list[int]:
    with Client(bootstrap) as c:
        r = c.request(wire.CreateAclsRequest(creations=list(creations)), 3)
    return [x.error_code for x in r.results]


def acl(rtype: int, name: str, op: int, perm: int) -> wire.CreateAclsRequestAclCreation:
    return wire.CreateAclsRequestAclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=3,
                                             principal="User:ANONYMOUS", host="*", operation=op,
                                             permission_type=perm)


def test_an_acl_made_at_one_node_applies_at_the_other_within_one_lease_round_and_is_loaded_later(
        pg_dsn, tmp_path) -> None:
    metrics = free_port()  # the same port on each node's own address (127.0.0.N)
    args = (*FAST, "--metrics-port", str(metrics),
            "--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--set", "allow.everyone.if.no.acl.found=true")
    with KCluster(pg_dsn, tmp_path, nodes=2, args=args) as cl:
        one, two = cl.node(1), cl.node(2)
        assert heartbeat(two.bootstrap) != E.GROUP_AUTHORIZATION_FAILED  # no ACL on the group: allowed
        assert create(one.bootstrap, acl(4, "kafka-cluster", 7, 3)) == [E.NONE]  # CLUSTER ALTER for itself

        def rounds() -> float:
            return value(scrape_node(two.node_id, metrics), "kcoord_cluster_lease_rounds_total")

        assert create(one.bootstrap, acl(3, GROUP, 3, 2)) == [E.NONE]  # DENY READ on the group: acknowledged
        assert heartbeat(one.bootstrap) == E.GROUP_AUTHORIZATION_FAILED  # at once where it was made
        r0 = rounds()
        # a round that began after the change was acknowledged (the second to end from now) has brought it
        wait_until(lambda: rounds() >= r0 + 2, 10, "node 2 completes two more lease rounds")
        assert heartbeat(two.bootstrap) == E.GROUP_AUTHORIZATION_FAILED
        samples = scrape_node(two.node_id, metrics)
        assert value(samples, "kcoord_acls") == 2
        two.stop()
        two.start()
        assert heartbeat(two.bootstrap) == E.GROUP_AUTHORIZATION_FAILED  # loaded at start
        with Client(two.bootstrap) as c:  # and removed at node 2, gone at node 1 within a round as well
            r = c.request(wire.DeleteAclsRequest(filters=[wire.DeleteAclsRequestDeleteAclsFilter(
                resource_type_filter=3, resource_name_filter=GROUP, pattern_type_filter=3, principal_filter=None,
                host_filter=None, operation=1, permission_type=1)]), 3)
        assert len(r.filter_results[0].matching_acls) == 1
        r1 = value(scrape_node(one.node_id, metrics), "kcoord_cluster_lease_rounds_total")
        wait_until(lambda: value(scrape_node(one.node_id, metrics), "kcoord_cluster_lease_rounds_total") >= r1 + 2,
                   10, "node 1 completes two more lease rounds")
        assert heartbeat(one.bootstrap) != E.GROUP_AUTHORIZATION_FAILED


def scrape_node(node_id: int, port: int) -> dict:
    return scrape(port, host=f"127.0.0.{node_id}")
