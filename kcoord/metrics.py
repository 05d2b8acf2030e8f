"""The Prometheus endpoint of `kcoord serve --metrics-port`: /metrics, /healthz and /readyz.

The exposition (text format, or OpenMetrics when the scraper asks for it) is prometheus_client's; the values are
read at scrape time from what the server already keeps: plain counters the request path and the groups add to
(kcoord.events), the groups and connections themselves for the gauges. So serving a request costs a few integer
additions whether or not anyone scrapes, and a scrape costs one pass over the groups.

The HTTP side is a small asyncio protocol on the server's own event loop rather than prometheus_client's thread:
a scrape then reads the coordinator between two of its turns, never while a turn changes it.

Names follow Prometheus's conventions (`_total` counters, base units, `kcoord_` prefix) and, where Kafka's group
coordinator has a metric, its name: `group-count` (kcoord_groups), `group-rebalance-count`
(kcoord_group_rebalances_started_total), `group-completed-rebalance-count` (..._completed_total),
`offset-commit-count` (kcoord_offset_commits_total), `offset-expiration-count`
(kcoord_offset_expirations_total), RequestMetrics' `RequestsPerSec`, `ErrorsPerSec` and
`TotalTimeMs` (kcoord_requests_total, kcoord_request_errors_total, kcoord_request_duration_seconds).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from . import errors as E
from . import gcpolicy, wire
from ._core._stats import RequestStats
from .coordinator import Coordinator
from .events import LATENCY_BUCKETS, Histogram

log = logging.getLogger("kcoord.metrics")

MAX_REQUEST_HEAD = 8192  # an HTTP request head longer than this is refused (431) and the connection closed


@dataclass(frozen=True)
class ClusterStats:
    """A cluster node's figures (kcoord.cluster)."""

    partitions_held: int
    nodes: int
    lease_rounds: int
    lease_rounds_failed: int
    step_downs: int


@dataclass(frozen=True)
class ServerStats:
    """What a scrape shows of a server, taken at the scrape (kcoord.server.Server.stats): the coordinator, read
    and never changed, and the server's own figures as plain values. The endpoint knows nothing more of the
    server than this and whether it is ready."""

    coordinator: Coordinator
    requests: RequestStats | None
    store_commit_seconds: Histogram
    store_fsyncs: int
    store_full: bool
    connections: int
    connections_accepted: int
    connections_refused: Mapping[str, int]
    authentications: Mapping[tuple[str, str, str], int]  # (listener, mechanism, result) -> count
    # (API, operation, resource type) -> requests refused by the authorizer; None: no authorizer configured
    authorization_denials: Mapping[tuple[str, str, str], int] | None
    queued_request_bytes: int
    queued_request_bytes_peak: int
    muted_connections: int
    received_bytes: int
    sent_bytes: int
    parked_requests: int
    ready: bool
    cluster: ClusterStats | None


def api_name(key: int) -> str:
    cls = wire.REQUEST_TYPES.get(key)
    return cls.__name__.removesuffix("Request") if cls is not None else str(key)


def _histogram(name: str, doc: str, labels: list[str], items: Iterator[tuple[list[str], Histogram]]) -> Metric:
    m = HistogramMetricFamily(name, doc, labels=labels)
    for values, h in items:
        m.add_metric(values, h.cumulative(), h.sum)
    return m


class ServerCollector:
    """prometheus_client's custom-collector protocol over a server's ServerStats, taken at each scrape."""

    def __init__(self, snapshot: Callable[[], ServerStats]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        srv = self.snapshot()
        coord = srv.coordinator
        stats = srv.requests or RequestStats(LATENCY_BUCKETS)
        ev = coord.events

        requests = CounterMetricFamily("kcoord_requests", "Requests answered, by API and version",
                                       labels=["api", "version"])
        errors = CounterMetricFamily("kcoord_request_errors", "Responses with a top-level error code, by API, "
                                     "version and Kafka error name", labels=["api", "version", "error"])
        for (key, version), n in sorted(stats.requests().items()):
            requests.add_metric([api_name(key), str(version)], n)
        for (key, version, code), n in sorted(stats.errors.items()):
            errors.add_metric([api_name(key), str(version), E.name(code)], n)
        yield requests
        yield errors
        latency = HistogramMetricFamily("kcoord_request_duration_seconds", "Time from reading a request to its "
                                        "response being ready (a parked JoinGroup, SyncGroup or Fetch included), "
                                        "by API", labels=["api"])
        bounds = (*map(str, stats.latency_bounds), "+Inf")
        for key, (counts, total) in sorted(stats.latency().items()):
            latency.add_metric([api_name(key)], list(zip(bounds, itertools.accumulate(counts), strict=True)), total)
        yield latency

        groups: dict[tuple[str, str], int] = {}
        members: dict[str, int] = {}
        for g in coord.groups.values():
            t = g.GROUP_TYPE
            k = (t, g.state_name)
            groups[k] = groups.get(k, 0) + 1
            members[t] = members.get(t, 0) + len(g.members)
        gauge = GaugeMetricFamily("kcoord_groups", "Groups by type and state", labels=["group_type", "state"])
        for (t, state), n in sorted(groups.items()):
            gauge.add_metric([t, state], n)
        yield gauge
        gauge = GaugeMetricFamily("kcoord_group_members", "Members of groups, by group type", labels=["group_type"])
        for t, n in sorted(members.items()):
            gauge.add_metric([t], n)
        yield gauge

        c = CounterMetricFamily("kcoord_group_rebalances_started", "Rebalances begun (a classic join phase, or a "
                                "consumer or connect group's epoch bump), by group type and trigger (the class of "
                                "KIP-800 reason)", labels=["group_type", "trigger"])
        for (t, trigger), n in sorted(ev.rebalances_started.items()):
            c.add_metric([t, trigger], n)
        yield c
        c = CounterMetricFamily("kcoord_group_rebalances_completed", "Classic rebalances ended (the group Stable "
                                "again, or Empty)", labels=["group_type"])
        for t, n in sorted(ev.rebalances_completed.items()):
            c.add_metric([t], n)
        yield c
        yield _histogram("kcoord_group_rebalance_duration_seconds", "Classic rebalances, from PreparingRebalance to "
                         "Stable (or Empty)", ["group_type"],
                         (([t], h) for t, h in sorted(ev.rebalance_seconds.items())))
        c = CounterMetricFamily("kcoord_member_expirations", "Members removed because a deadline passed (session, "
                                "join, sync or rebalance timeout), by group type and deadline",
                                labels=["group_type", "trigger"])
        for (t, trigger), n in sorted(ev.expiries.items()):
            c.add_metric([t, trigger], n)
        yield c
        for name, doc, by_type in (
                ("kcoord_static_member_replacements", "Static members (KIP-345) taken over by a new instance",
                 ev.static_replacements),
                ("kcoord_admin_member_removals", "Members removed by an admin (LeaveGroup by instance id)",
                 ev.admin_removals)):
            c = CounterMetricFamily(name, doc, labels=["group_type"])
            for t, n in sorted(by_type.items()):
                c.add_metric([t], n)
            yield c
        yield CounterMetricFamily("kcoord_offset_commits", "Offsets accepted by OffsetCommit",
                                  value=coord.offsets.commit_count)
        yield CounterMetricFamily("kcoord_offset_expirations", "Committed offsets expired by offsets.retention.minutes",
                                  value=coord.offsets.expired_count)
        yield CounterMetricFamily("kcoord_group_expirations", "Empty groups deleted by the offset retention check",
                                  value=coord.groups_expired)

        yield _histogram("kcoord_store_commit_duration_seconds", "Store commits (one transaction per batch of "
                         "staged records, on the store's writer thread for SQLite), fsync included", [],
                         iter([([], srv.store_commit_seconds)]))
        yield CounterMetricFamily("kcoord_store_fsyncs", "fsyncs of the store's write-ahead log (one per commit "
                                  "under store.fsync=always)", value=srv.store_fsyncs)
        yield GaugeMetricFamily("kcoord_store_full", "1 while the store cannot write for want of space: writes are "
                                "refused (COORDINATOR_NOT_AVAILABLE), heartbeats and reads served",
                                value=int(srv.store_full))

        yield GaugeMetricFamily("kcoord_connections", "Open client connections", value=srv.connections)
        yield CounterMetricFamily("kcoord_connections_accepted", "Client connections accepted",
                                  value=srv.connections_accepted)
        refused = CounterMetricFamily("kcoord_connections_refused", "Client connections closed at once, by the "
                                      "limit they met", labels=["limit"])
        for limit, n in sorted(srv.connections_refused.items()):
            refused.add_metric([limit], n)
        yield refused
        auth = CounterMetricFamily("kcoord_authentications", "SASL authentications on each listener, by mechanism "
                                   "and result (success, failure)", labels=["listener", "mechanism", "result"])
        for (listener, mechanism, result), n in sorted(srv.authentications.items()):
            auth.add_metric([listener, mechanism, result], n)
        yield auth
        if srv.authorization_denials is not None:
            denied = CounterMetricFamily("kcoord_authorization_denials", "Requests (or parts of them) the authorizer "
                                         "refused, by API, operation and resource type",
                                         labels=["api", "operation", "resource_type"])
            for (api, op, rtype), n in sorted(srv.authorization_denials.items()):
                denied.add_metric([api, op, rtype], n)
            yield denied
            yield GaugeMetricFamily("kcoord_acls", "ACLs the authorizer holds", value=len(srv.coordinator.acls.authorizer))
        yield GaugeMetricFamily("kcoord_queued_request_bytes", "Bytes held by requests not yet whole, on all "
                                "connections (bounded by queued.max.request.bytes)", value=srv.queued_request_bytes)
        yield GaugeMetricFamily("kcoord_queued_request_bytes_peak", "The most bytes requests not yet whole held at "
                                "once since start", value=srv.queued_request_bytes_peak)
        yield GaugeMetricFamily("kcoord_muted_connections", "Connections not read for now: queued.max.request.bytes "
                                "is held by others' unfinished requests", value=srv.muted_connections)
        yield CounterMetricFamily("kcoord_network_received_bytes", "Bytes read from clients", value=srv.received_bytes)
        yield CounterMetricFamily("kcoord_network_sent_bytes", "Bytes written to clients", value=srv.sent_bytes)
        parked = srv.parked_requests
        yield GaugeMetricFamily("kcoord_parked_requests", "Requests waiting for their answer (JoinGroup, "
                                "SyncGroup, a held Fetch)", value=parked)
        yield GaugeMetricFamily("kcoord_ready", "1 when the store is loaded and the server listens", value=int(
            srv.ready))
        yield GaugeMetricFamily("kcoord_gc_frozen_objects", "Objects the garbage collector no longer scans: what "
                                "survived a full collection (kcoord.gcpolicy). It follows the groups, members and "
                                "connections; one that grows while they do not is a leak", value=gc.get_freeze_count())
        cluster = srv.cluster
        if cluster is not None:  # a node of a cluster on PostgreSQL (kcoord.cluster)
            yield GaugeMetricFamily("kcoord_cluster_partitions_held", "Coordinator partitions this node holds and "
                                    "serves (of offsets.topic.num.partitions)", value=cluster.partitions_held)
            yield GaugeMetricFamily("kcoord_cluster_nodes", "Live nodes, by this node's last lease round",
                                    value=cluster.nodes)
            yield CounterMetricFamily("kcoord_cluster_lease_rounds", "Lease rounds this node completed (each one "
                                      "also adopts what other nodes changed of the topics, users and ACLs)",
                                      value=cluster.lease_rounds)
            yield CounterMetricFamily("kcoord_cluster_lease_rounds_failed", "Lease rounds that could not reach the "
                                      "database", value=cluster.lease_rounds_failed)
            yield CounterMetricFamily("kcoord_cluster_step_downs", "Coordinator partitions this node stopped "
                                      "serving (moved, lost, or a refused write)", value=cluster.step_downs)


class HttpConnection(asyncio.Protocol):
    """One HTTP/1.1 connection: GET /metrics, /healthz or /readyz; anything else 404 (405 for other methods)."""

    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self.endpoint = endpoint
        self.buf = b""
        # set by connection_made, which asyncio calls before any other method
        self.transport: asyncio.Transport = None  # type: ignore[assignment]

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        gcpolicy.release_transport(self.transport)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, _, self.buf = self.buf.partition(b"\r\n\r\n")
            if not self.answer(head):
                self.transport.close()
                return
        if len(self.buf) > MAX_REQUEST_HEAD:
            self.send(431, "text/plain", b"request header too large\n", close=True)

    def answer(self, head: bytes) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self.send(400, "text/plain", b"bad request\n", close=True)
            return False
        method, target, proto = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        close = headers.get("connection", "").lower() == "close" or proto == "HTTP/1.0"
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            self.send(405, "text/plain", b"method not allowed\n", close, head_only=False)
        elif path == "/metrics":
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            try:
                body = encoder(self.endpoint.registry)
            except Exception:
                log.exception("a metrics scrape failed")
                self.send(500, "text/plain", b"scrape failed\n", close, method == "HEAD")
            else:
                self.send(200, content_type, body, close, method == "HEAD")
        elif path == "/healthz":
            self.send(200, "text/plain", b"ok\n", close, method == "HEAD")
        elif path == "/readyz":
            ready = self.endpoint.ready()
            self.send(200 if ready else 503, "text/plain", b"ready\n" if ready else b"not ready\n", close,
                      method == "HEAD")
        else:
            self.send(404, "text/plain", b"not found: /metrics, /healthz, /readyz\n", close, method == "HEAD")
        return not close

    def send(self, status: int, content_type: str, body: bytes, close: bool, head_only: bool = False) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  431: "Request Header Fields Too Large", 500: "Internal Server Error",
                  503: "Service Unavailable"}[status]
        connection = "Connection: close\r\n" if close else ""
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                f"{connection}\r\n").encode()
        self.transport.write(head if head_only else head + body)
        if close:
            self.transport.close()


class MetricsEndpoint:
    """The HTTP listener, started and stopped with the server."""

    def __init__(self, snapshot: Callable[[], ServerStats], ready: Callable[[], bool]) -> None:
        self.ready = ready
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ServerCollector(snapshot))
        self._listener: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(lambda: HttpConnection(self), host, port, reuse_address=True)
        self.port = self._listener.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None
