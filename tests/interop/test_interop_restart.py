"""A static group of real consumers outlives a restart of `kcoord serve --data-dir` (SIGTERM, and SIGKILL).

Three static confluent-kafka or kafka-python consumers form a stable group and commit offsets. The server is
stopped and started again on the same port and data directory. The consumers reconnect on their own; for longer
than a session timeout afterwards nobody is revoked, the generation and every member id are unchanged, each
member still holds its partitions, and the committed offsets read back intact.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from ..support.interop import FORM_TIMEOUT, PARTITIONS, TOPIC, Group, coverage, pretty, summary, wait_until
from ..support.interop_member import SESSION_TIMEOUT_MS
from ..support.servers import Server, free_port, serve

pytestmark = [
    pytest.mark.interop,
    pytest.mark.filterwarnings(r"ignore:(read|open)_text is deprecated:DeprecationWarning"),
]


def start_server(port: int, data_dir: Path, log: Path) -> Server:
    return serve(port, log, "--data-dir", str(data_dir), "--topic", f"{TOPIC}:{PARTITIONS}",
                 "--set", "group.initial.rebalance.delay.ms=300")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.parametrize("kind", ["confluent", "kafka-python"])
def test_static_group_survives_a_coordinator_restart(tmp_path, kind, how) -> None:
    port, data_dir, log = free_port(), tmp_path / "data", tmp_path / "server.log"
    server = start_server(port, data_dir, log)
    group = Group(server, kind, f"restart-{kind}")
    try:
        members = [group.start(f"c{i}", instance_id=f"i{i}") for i in range(3)]
        wait_until(lambda: coverage(members, group), FORM_TIMEOUT, f"3 static {kind} members forming", server)
        before = group.describe()
        assigned = {m.client_id: m.assigned for m in members}
        offsets = {}
        for i, m in enumerate(members):
            mine = {p: 1000 * (i + 1) + p for p in m.assigned}
            m.commit(mine)
            offsets.update(mine)
        stable_since = time.monotonic()

        server.proc.send_signal(how)
        rc = server.proc.wait(15)
        assert rc == (0 if how == signal.SIGTERM else -signal.SIGKILL), server.log_tail()
        group.server = server = start_server(port, data_dir, log)
        # start_server returned on the "listening" line, which the server writes after the "loaded" one
        assert "loaded 1 groups, 3 members, 12 offsets" in log.read_text(), server.log_tail()

        def unchanged() -> tuple[bool, dict]:
            ok, observed = coverage(members, group)
            d = group.describe()
            same = (d["generation"] == before["generation"]
                    and sorted(m["member_id"] for m in d["members"]) == sorted(m["member_id"] for m in before["members"])
                    and {m.client_id: m.assigned for m in members} == assigned)
            return ok and same, {**observed, "before": summary(before)}

        wait_until(unchanged, FORM_TIMEOUT, f"the {kind} group back on the restarted server", server)
        # Longer than a session timeout: had the server lost the group, the members would have been fenced,
        # evicted or made to rejoin by now.
        hold_until = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 2
        while time.monotonic() < hold_until:
            ok, observed = unchanged()
            assert ok, f"the {kind} group changed after the restart: {pretty(observed)}"
            time.sleep(0.5)
        revoked = {m.client_id: m.revocations_since(stable_since) for m in members}
        assert not any(revoked.values()), f"partitions were revoked across the restart: {revoked}"
        history = [h["trigger"] for h in group.describe()["history"]]
        assert history == [], f"the restarted server saw rebalance events: {history}"
        for m in members:
            got = m.committed(sorted(m.assigned))
            assert got == {p: offsets[p] for p in m.assigned}, f"{m.client_id}: committed offsets {got}"
    finally:
        group.close(*group.members)
        server.proc.terminate()
        assert server.proc.wait(15) == 0, server.log_tail()
