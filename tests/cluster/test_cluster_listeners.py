"""A cluster's nodes register every listener (issue 31): Metadata lists each live node at its address on the listener
the request came in on, and FindCoordinator names the owner's address on that listener."""

from __future__ import annotations

from kcoord import errors as E
from kcoord import wire
from kcoord.client import Client

from ..support.cluster_nodes import FAST, KCluster, Node, free_port, wait_until


def test_each_node_is_advertised_on_the_listener_a_request_came_in_on(pg_dsn, tmp_path) -> None:
    with KCluster(pg_dsn, tmp_path, nodes=0) as cluster:
        for i in (1, 2):
            host = f"127.0.0.{i}"
            internal, external = free_port(host), free_port(host)
            n = Node(cluster, i, (*FAST, "--set", f"listeners=INTERNAL://{host}:{internal},EXTERNAL://{host}:{external}",
                                  "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                                  "--set", f"advertised.listeners=EXTERNAL://node{i}.example.com:{9090 + i}"))
            n.port, n.external = internal, external
            cluster.nodes.append(n.start())
        internal = {1: ("127.0.0.1", cluster.node(1).port), 2: ("127.0.0.2", cluster.node(2).port)}
        external = {1: ("node1.example.com", 9091), 2: ("node2.example.com", 9092)}

        def brokers(port: int) -> dict[int, tuple[str, int]]:
            with Client(f"127.0.0.1:{port}") as c:
                md = c.call(3, 12, wire.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            return {b.node_id: (b.host, b.port) for b in md.brokers}

        wait_until(lambda: len(brokers(cluster.node(1).port)) == 2, 20, "the nodes never saw each other")
        assert brokers(cluster.node(1).port) == internal
        assert brokers(cluster.node(1).external) == external
        wait_until(lambda: cluster.balanced([1, 2]), 20, "leases never balanced")
        group = next(g for g in (f"g{i}" for i in range(1000)) if cluster.owner_of(g) == 2)

        def coordinator(port: int) -> tuple:
            with Client(f"127.0.0.1:{port}") as c:
                (fc,) = c.call(10, 4, wire.FindCoordinatorRequest(key_type=0, coordinator_keys=[group])).coordinators
            return fc.error_code, fc.node_id, fc.host, fc.port

        # node 1 learns node 2's leases at its next lease round
        wait_until(lambda: coordinator(cluster.node(1).port)[0] == E.NONE, 20, "node 1 never saw the owner")
        assert coordinator(cluster.node(1).external) == (E.NONE, 2, *external[2])
        assert coordinator(cluster.node(1).port) == (E.NONE, 2, *internal[2])


def test_a_node_is_registered_with_its_listeners_before_its_first_lease_round(pg_dsn) -> None:
    """A node made visible to the others by its registration (before its first lease round, while it loads its
    groups) is registered with every listener's advertised address already when their ports are known: another
    node's Metadata on one listener never names it by another listener's address (a race CI once caught: node 2's
    EXTERNAL view answered with node 1's INTERNAL address)."""
    from kcoord.cluster import parse_listeners_text
    from kcoord.config import ServerConfig
    from kcoord.server import Server

    internal, external = free_port("127.0.0.1"), free_port("127.0.0.1")
    srv = Server(ServerConfig(
        port=0, store_url=pg_dsn, node_id=7, listeners=f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        advertised_listeners="EXTERNAL://node7.example.com:9097"))
    try:
        (text,) = srv.cluster.lease_conn.execute("SELECT listeners FROM kcoord_nodes WHERE node_id = 7").fetchone()
        assert parse_listeners_text(text) == {"INTERNAL": ("127.0.0.1", internal),
                                              "EXTERNAL": ("node7.example.com", 9097)}
    finally:
        srv.cluster.lease_conn.close()
        srv.store.close()
