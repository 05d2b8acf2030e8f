"""The PostgreSQL store: the same Kafka-format records as the embedded store, in one database shared by the nodes of
a kcoord cluster, each write fenced by the lease epoch of its coordinator partition.

Groups are spread over `offsets.topic.num.partitions` coordinator partitions by Kafka's own rule
(`abs(groupId.hashCode()) % partitions`, GroupCoordinatorService.partitionFor). Each partition has one row in
`kcoord_leases`: the node that owns it, an epoch raised at every change of owner, and the database-clock time at
which the lease ends. Every write of a node names the partitions it touches with the epochs it holds; one stored
function (`kcoord_put`) checks them against the lease rows, row-locking them, and refuses the whole write when one
no longer matches (SQLSTATE KC001): a node that lost a lease (it paused past it, or was cut off) cannot write,
however late its write arrives. The fence is the database's, not a timer's.

Tables:
- `kcoord_meta`: magic, format and the partition count the database was made with (a node that disagrees is
  refused); `topics_version`, raised whenever a topic record changes, so nodes reread the catalogue only then.
- `kcoord_nodes`: live nodes, each with its advertised address and its own lease (`expires_at`).
- `kcoord_leases`: one row per coordinator partition (owner, epoch, expiry, write sequence number).
- `kcoord_records`: (partition, key) -> value and its CRC32, the latest value per key (a compacted topic).
  Topic records, which every node reads, are in partition -1 and carry no fence.
- `kcoord_writes`: one row per partition per committed write: its sequence number, the epoch the writer claimed
  (the one the fence compared, not the row's) and the node. It is the evidence that no partition ever had two
  writers (`kcoord cluster --check`), kept for an hour: a fence that let an old epoch through would show there as
  a write at an older epoch after a newer one.

One commit of the server's batch is one call of `kcoord_put`, one round trip and one transaction, made durable by
PostgreSQL (synchronous_commit) before it returns. A server makes it on its writer thread (the group commit, as
for SQLite): the batch and the epochs it is fenced by are taken on the event loop (`prepare`), the round trip runs
on the writer while the loop stages the next batch, and one batch at a time is in flight, so a node's writes reach
the database in the order they were staged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from . import records as R
from .store import CheckReport, StoreError, check_record, record_crc

try:  # the `cluster` extra; kcoord without it serves the embedded store only
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]  # a module or None: the checker types the name as the module

PG_MAGIC = "kcoord-cluster"
PG_FORMAT = 1
GLOBAL = -1  # the partition of records every node reads (topics)
FENCED = "KC001"
WRITES_RETENTION = "1 hour"
TABLES = ("kcoord_meta", "kcoord_nodes", "kcoord_leases", "kcoord_records", "kcoord_writes")
SCHEMA_LOCK = 0x6B636F6F7264  # pg_advisory_xact_lock key while creating the schema ("kcoord")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS kcoord_meta (name text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS kcoord_nodes (
    node_id int PRIMARY KEY, host text NOT NULL, port int NOT NULL, incarnation text NOT NULL,
    started_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
ALTER TABLE kcoord_nodes ADD COLUMN IF NOT EXISTS listeners text NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS kcoord_leases (
    partition int PRIMARY KEY, node_id int, epoch bigint NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity', seq bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS kcoord_records (
    partition int NOT NULL, key bytea NOT NULL, value bytea NOT NULL, crc bigint NOT NULL,
    PRIMARY KEY (partition, key));
CREATE TABLE IF NOT EXISTS kcoord_writes (
    partition int NOT NULL, seq bigint NOT NULL, epoch bigint NOT NULL, node_id int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (partition, seq));
CREATE OR REPLACE FUNCTION kcoord_put(me int, parts int[], epochs bigint[], dparts int[], dkeys bytea[],
                                      uparts int[], ukeys bytea[], uvalues bytea[], ucrcs bigint[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE n int; v int := -1;
BEGIN
    -- lease rows are locked in partition order by every statement that takes several: no two can deadlock
    PERFORM 1 FROM kcoord_leases WHERE partition = ANY(parts) ORDER BY partition FOR UPDATE;
    WITH fenced AS (
        UPDATE kcoord_leases l SET seq = l.seq + 1 FROM unnest(parts, epochs) AS m(p, e)
        WHERE l.partition = m.p AND l.epoch = m.e AND l.node_id = me RETURNING l.partition, l.seq, m.e AS epoch)
    INSERT INTO kcoord_writes (partition, seq, epoch, node_id) SELECT partition, seq, epoch, me FROM fenced;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> coalesce(array_length(parts, 1), 0) THEN
        RAISE EXCEPTION 'a coordinator partition''s lease epoch moved on' USING ERRCODE = '{FENCED}';
    END IF;
    DELETE FROM kcoord_records r USING unnest(dparts, dkeys) AS d(p, k) WHERE r.partition = d.p AND r.key = d.k;
    INSERT INTO kcoord_records (partition, key, value, crc) SELECT * FROM unnest(uparts, ukeys, uvalues, ucrcs)
        ON CONFLICT (partition, key) DO UPDATE SET value = excluded.value, crc = excluded.crc;
    IF {GLOBAL} = ANY(dparts) OR {GLOBAL} = ANY(uparts) THEN
        UPDATE kcoord_meta SET value = (value::bigint + 1)::text WHERE name = 'topics_version'
            RETURNING value::int INTO v;
    END IF;
    RETURN v;  -- the topics version this write made, or -1
END $$;
"""


class FencedError(StoreError):
    """A write named a partition whose lease this node no longer holds at that epoch: nothing was written."""

    def __init__(self, message: str, partitions: set[int]) -> None:
        super().__init__(message)
        self.partitions = partitions


class Superseded(StoreError):
    """Another process registered this node's node.id while this one's registration had run out: it must stop."""


def java_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit overflow)."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's GroupCoordinatorService.partitionFor: Utils.abs(groupId.hashCode()) % partitions."""
    h = java_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Partitioner:
    """group id -> coordinator partition, cached (a group's requests keep coming; the cache is bounded)."""

    MAX_CACHED = 200_000

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.cache: dict[str, int] = {}

    def __call__(self, group_id: str) -> int:
        p = self.cache.get(group_id)
        if p is None:
            if len(self.cache) >= self.MAX_CACHED:
                self.cache.clear()
            p = self.cache[group_id] = partition_for(group_id, self.partitions)
        return p

    def of_key(self, key: bytes) -> int:
        """The partition a record belongs to: its group's, read from the key (every group and offset key starts
        with the record type and the group id as a Kafka string); topic, SCRAM credential and ACL records are GLOBAL."""
        if len(key) < 4 or R.record_type(key) in (R.KCOORD_TOPIC, R.KCOORD_SCRAM_CREDENTIAL, R.KCOORD_ACL):
            return GLOBAL
        n = key[2] << 8 | key[3]
        return self(key[4:4 + n].decode("utf-8", "surrogateescape"))


LOCK_LEASES = "SELECT 1 FROM kcoord_leases WHERE partition = ANY(%s) ORDER BY partition FOR UPDATE"


def locked(conn, parts, sql: str, params: tuple):
    """`sql` in a transaction that first locks the lease rows of `parts` in partition order (as kcoord_put does),
    so a lease round and a write of the same node, or two nodes, never wait on each other in a cycle."""
    with conn.transaction():
        conn.execute(LOCK_LEASES, (list(parts),))
        return conn.execute(sql, params).fetchall()


def safe_url(url: str) -> str:
    """A postgresql:// URL without its password, to log or print."""
    return re.sub(r"^(\w+://[^:/@]*):[^@/]*@", r"\1:***@", url)


def require_psycopg() -> None:
    if psycopg is None:
        raise StoreError("--store postgresql:// needs psycopg 3: pip install 'kcoord[cluster]'")


def connect(dsn: str, *, timeout_s: float = 5.0, node_id: int | None = None, idle_in_transaction_s: float = 0.0):
    """An autocommit connection; a StoreError names what failed (never the password). A node's connections are
    named after it in pg_stat_activity (application_name kcoord-node-N). With `idle_in_transaction_s`, PostgreSQL
    ends the session when it idles that long inside a transaction: a node stopped between two statements of one
    (SIGSTOP, a frozen VM) would otherwise hold its row locks, and every node waiting on them, until it resumed."""
    require_psycopg()
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(timeout_s)),
                               application_name="kcoord" if node_id is None else f"kcoord-node-{node_id}")
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to the PostgreSQL store: {_first_line(e)}") from None
    except Exception as e:  # a malformed DSN (psycopg.ProgrammingError is a psycopg.Error; this is the rest)
        raise StoreError(f"cannot connect to the PostgreSQL store: {e}") from None
    if idle_in_transaction_s > 0:
        try:
            conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                         (str(max(1, int(idle_in_transaction_s * 1000))),))
        except psycopg.Error as e:
            conn.close()
            raise StoreError(f"cannot set up the PostgreSQL session: {_first_line(e)}") from None
    return conn


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def init_schema(conn, partitions: int) -> None:
    """Create the tables and the lease rows if they are missing (under an advisory lock: nodes start together),
    and refuse a database that is not kcoord's or was made with another partition count."""
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            conn.execute(SCHEMA)
            meta = dict(conn.execute("SELECT name, value FROM kcoord_meta").fetchall())
            if not meta:
                conn.execute("INSERT INTO kcoord_meta VALUES ('magic', %s), ('format', %s), ('partitions', %s), "
                             "('topics_version', '0')", (PG_MAGIC, str(PG_FORMAT), str(partitions)))
                conn.execute("INSERT INTO kcoord_leases (partition) SELECT generate_series(0, %s - 1) "
                             "ON CONFLICT DO NOTHING", (partitions,))
                return
            if meta.get("magic") != PG_MAGIC:
                raise StoreError(f"the database is not a kcoord store (magic {meta.get('magic')!r})")
            if meta.get("format") != str(PG_FORMAT):
                raise StoreError(f"the database has store format {meta.get('format')!r}; this kcoord reads "
                                 f"{PG_FORMAT}")
            if meta.get("partitions") != str(partitions):
                raise StoreError(f"the database was made with offsets.topic.num.partitions={meta.get('partitions')}"
                                 f"; this node is set to {partitions} (the count cannot change)")
    except psycopg.Error as e:
        raise StoreError(f"the PostgreSQL store cannot be set up: {_first_line(e)}") from None


@dataclass
class PgWrite:
    """One batch as `kcoord_put` takes it, with the epochs it is fenced by, made on the event loop (`prepare`)."""
    parts: list[int]
    epochs: list[int]
    missing: set[int]  # partitions of the batch this node held no lease on when it was made
    dparts: list[int]
    dkeys: list[bytes]
    uparts: list[int]
    ukeys: list[bytes]
    uvalues: list[bytes]
    ucrcs: list[int]
    touches_global: bool  # it writes a record every node reads (a topic, a credential, an ACL)


@dataclass
class PgRecords:
    """The store backend of one cluster node: `put` fenced by the epochs in `epochs` (partition -> the epoch this
    node holds), `scan_partitions` for the partitions a node takes over. Under a server, `prepare` runs on the
    event loop and `put` on the server's writer thread, which is then the only user of the connection after start
    (the lease loop has its own)."""

    write_off_loop = True  # a write waits for the database's commit: the server makes it on its writer thread

    dsn: str
    node_id: int
    partitioner: Partitioner
    idle_in_transaction_s: float = 0.0  # see connect(): the cluster gives its lease

    def __post_init__(self) -> None:
        self.epochs: dict[int, int] = {}
        self.conn = None
        self.commits = 0
        self.failed_partitions: set[int] = set()  # what the last failed put touched
        self.topics_written = -1  # the topics version this node's last topic write made (kcoord_meta)
        # A write of a record every node reads is under way (set on the loop by `prepare`, cleared once it ended and
        # `topics_written` holds what it made): a lease round's catalogue may predate it and is not adopted.
        self.global_in_flight = False

    def _conn(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            self.conn = connect(self.dsn, node_id=self.node_id, idle_in_transaction_s=self.idle_in_transaction_s)
        return self.conn

    def prepare(self, batch: dict[bytes, bytes | None]) -> PgWrite:
        """The batch as one `kcoord_put` call, fenced by the epochs this node holds now (on the event loop, where
        `epochs` changes)."""
        of_key = self.partitioner.of_key
        touched: dict[int, None] = {}
        dparts, dkeys, uparts, ukeys, uvalues, ucrcs = [], [], [], [], [], []
        touches_global = False
        for k, v in batch.items():
            p = of_key(k)
            if p != GLOBAL:
                touched[p] = None
            else:
                touches_global = True
            if v is None:
                dparts.append(p)
                dkeys.append(k)
            else:
                uparts.append(p)
                ukeys.append(k)
                uvalues.append(v)
                ucrcs.append(record_crc(k, v))
        epochs = self.epochs
        parts = list(touched)
        missing = {p for p in parts if p not in epochs}
        if touches_global:
            self.global_in_flight = True
        return PgWrite(parts, [epochs.get(p, -1) for p in parts], missing, dparts, dkeys, uparts, ukeys, uvalues,
                       ucrcs, touches_global)

    def put(self, batch: dict[bytes, bytes | None] | PgWrite) -> None:
        w = batch if isinstance(batch, PgWrite) else self.prepare(batch)
        try:
            self._put(w)
        finally:
            if w.touches_global:
                self.global_in_flight = False

    def _put(self, w: PgWrite) -> None:
        self.failed_partitions = set(w.parts)
        if w.missing:
            raise FencedError(f"this node holds no lease on coordinator partition(s) {sorted(w.missing)}", w.missing)
        try:
            (version,) = self._conn().execute("SELECT kcoord_put(%s, %s, %s, %s, %s, %s, %s, %s, %s)", (
                self.node_id, w.parts, w.epochs, w.dparts, w.dkeys, w.uparts, w.ukeys, w.uvalues, w.ucrcs)
            ).fetchone()
        except psycopg.Error as e:
            if getattr(e, "sqlstate", None) == FENCED:
                lost = self._lost(w.parts, dict(zip(w.parts, w.epochs)))
                raise FencedError(f"fenced: coordinator partition(s) {sorted(lost)} have a newer lease epoch; "
                                  f"nothing was written", lost) from None
            raise StoreError(f"PostgreSQL store write failed: {_first_line(e)}") from None
        self.failed_partitions = set()
        self.topics_written = max(self.topics_written, version)
        self.commits += 1

    def _lost(self, parts: list[int], held: dict[int, int]) -> set[int]:
        try:
            rows = self._conn().execute("SELECT partition, node_id, epoch FROM kcoord_leases WHERE partition = "
                                        "ANY(%s)", (parts,)).fetchall()
        except (psycopg.Error, StoreError):
            return set(parts)
        return {p for p, node, epoch in rows if node != self.node_id or epoch != held.get(p)}

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """The global records (topics); a group's records come with its partition (scan_partitions)."""
        return self.scan_partitions([GLOBAL])

    def scan_partitions(self, parts: Iterable[int], conn=None) -> Iterator[tuple[bytes, bytes]]:
        try:
            rows = (conn or self._conn()).execute(
                "SELECT key, value, crc FROM kcoord_records WHERE partition = ANY(%s) ORDER BY key",
                (list(parts),)).fetchall()
        except psycopg.Error as e:
            raise StoreError(f"PostgreSQL store read failed: {_first_line(e)}") from None
        return checked(rows)

    @property
    def fsyncs(self) -> int:
        return self.commits  # each commit is one PostgreSQL transaction, flushed to its WAL before it returns

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def checked(rows: list[tuple[bytes, bytes, int]]) -> Iterator[tuple[bytes, bytes]]:
    for key, value, crc in rows:
        key, value = bytes(key), bytes(value)
        if record_crc(key, value) != crc:
            raise StoreError(f"PostgreSQL store: record with key {key[:64].hex()} fails its checksum")
        yield key, value


# ---------------------------------------------------------------------------------------------------------------
# kcoord cluster: what the database says about the nodes


def describe_cluster(dsn: str) -> dict:
    """Nodes (live or not yet removed), each partition's owner and epoch, and the write log's verdict, read from
    the database by its own clock."""
    conn = connect(dsn)
    try:
        meta = read_meta(conn, dsn)
        nodes = [{"node": n, "host": h, "port": p, "live": live, "lease_left_ms": max(0, int(left))}
                 for n, h, p, live, left in conn.execute(
                     "SELECT node_id, host, port, expires_at > clock_timestamp(), "
                     "extract(epoch FROM expires_at - clock_timestamp()) * 1000 FROM kcoord_nodes ORDER BY node_id")]
        leases = conn.execute("SELECT partition, node_id, epoch, expires_at > clock_timestamp(), seq "
                              "FROM kcoord_leases ORDER BY partition").fetchall()
        counts = dict(conn.execute("SELECT partition, count(*) FROM kcoord_records GROUP BY partition").fetchall())
        return {"partitions": int(meta.get("partitions", 0)), "nodes": nodes,
                "leases": [{"partition": p, "node": n if live else None, "epoch": e, "writes": seq,
                            "records": counts.get(p, 0)} for p, n, e, live, seq in leases],
                "topic_records": counts.get(GLOBAL, 0), "problems": writer_problems(conn)}
    except psycopg.Error as e:
        raise StoreError(f"cannot read the PostgreSQL store: {_first_line(e)}") from None
    finally:
        conn.close()


def read_meta(conn, dsn: str) -> dict[str, str]:
    """kcoord_meta, once the database is seen to hold kcoord's tables and magic (StoreError naming the database
    otherwise)."""
    missing = [t for (t,) in conn.execute("SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NULL",
                                           (list(TABLES),)).fetchall()]
    if len(missing) == len(TABLES):
        raise StoreError(f"{safe_url(dsn)} is not a kcoord store (no kcoord tables; the first node started with "
                         f"--store creates them)")
    if missing:
        raise StoreError(f"{safe_url(dsn)} is not a whole kcoord store (missing: {', '.join(missing)})")
    meta = dict(conn.execute("SELECT name, value FROM kcoord_meta").fetchall())
    if meta.get("magic") != PG_MAGIC:
        raise StoreError(f"{safe_url(dsn)} is not a kcoord store (magic {meta.get('magic')!r})")
    return meta


def check_pg_store(dsn: str, max_problems: int = 50) -> CheckReport:
    """`kcoord store check postgresql://...`: the database read end to end without changing it, in one snapshot.
    Its schema and settings; one lease row per coordinator partition; every record's checksum, bytes and
    consistency (as the embedded store's check), and that it is filed under its group's partition (a record under
    another is replayed by the wrong node, or by none); the write log's one writer per partition at a time. A
    database it cannot connect to is a StoreError, not a report."""
    report = CheckReport(safe_url(dsn))

    def problem(text: str) -> None:
        report.ok = False
        if len(report.problems) < max_problems:
            report.problems.append(text)

    conn = connect(dsn)  # a StoreError: nothing was read, so there is no report
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            meta = read_meta(conn, dsn)
            if meta.get("format") != str(PG_FORMAT):
                problem(f"store format {meta.get('format')!r}; this kcoord reads {PG_FORMAT}")
                return report
            try:
                partitions = int(meta.get("partitions", ""))
                if partitions < 1:
                    raise ValueError
            except ValueError:
                problem(f"kcoord_meta partitions is {meta.get('partitions')!r}, not a partition count")
                return report
            if not (meta.get("topics_version") or "").lstrip("-").isdigit():
                problem(f"kcoord_meta topics_version is {meta.get('topics_version')!r}, not a number")
            leases = {p for (p,) in conn.execute("SELECT partition FROM kcoord_leases").fetchall()}
            if leases != set(range(partitions)):
                lacking, extra = set(range(partitions)) - leases, leases - set(range(partitions))
                problem(f"kcoord_leases holds {len(leases)} partitions for {partitions}"
                        + (f"; missing {sorted(lacking)[:10]}" if lacking else "")
                        + (f"; not partitions {sorted(extra)[:10]}" if extra else ""))
            report.bytes = conn.execute("SELECT sum(pg_total_relation_size(t::regclass))::bigint "
                                        "FROM unnest(%s::text[]) AS t", (list(TABLES),)).fetchone()[0] or 0
            of_key = Partitioner(partitions).of_key
            with conn.cursor(name="kcoord_check") as cur:  # server-side: the records are streamed, not held
                cur.itersize = 2000
                cur.execute("SELECT partition, key, value, crc FROM kcoord_records ORDER BY partition, key")
                for part, key, value, crc in cur:
                    key, value = bytes(key), bytes(value)
                    if check_record(key, value, crc, report, problem) and of_key(key) != part:
                        problem(f"record with key {key[:64].hex()} is filed under partition {part}; "
                                f"its group's is {of_key(key)}")
            for issue in writer_problems(conn):
                problem(f"write log: {issue}")
    except StoreError as e:
        problem(str(e))
    except psycopg.Error as e:
        problem(f"cannot read the PostgreSQL store: {_first_line(e)}")
    finally:
        conn.close()
    return report


def writer_problems(conn) -> list[str]:
    """What the write log says against "one writer per partition at a time": a write at an older epoch after a
    newer one, or one epoch written by two nodes."""
    rows = conn.execute("""
        WITH w AS (SELECT partition, seq, epoch, node_id,
                          max(epoch) OVER (PARTITION BY partition ORDER BY seq
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                   FROM kcoord_writes)
        SELECT 'partition ' || partition || ': write ' || seq || ' at epoch ' || epoch || ' after epoch ' || before
        FROM w WHERE epoch < before
        UNION ALL
        SELECT 'partition ' || partition || ': epoch ' || epoch || ' written by nodes ' ||
               string_agg(DISTINCT node_id::text, ', ')
        FROM kcoord_writes GROUP BY partition, epoch HAVING count(DISTINCT node_id) > 1""").fetchall()
    return [r[0] for r in rows][:50]
