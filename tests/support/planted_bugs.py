"""Bugs planted by hand, each of which the suite must catch: `make planted`
(python -m tests.support.planted_bugs [NAME...]).

An audit planted 29 deliberate bugs in kcoord and found that 8 of them passed the whole suite, all at its edges
(settings a running server ignored, broker answers never checked over the wire, CLI exits, a consistency check, a
deadline off by one millisecond). Each is kept here as an edit of one product line, with the tests that must fail
once it is made (where that line occurs more than once in its file, `old` carries the lines next to it that make it
unique, unchanged in `new`). Issue 30's audit added the rest: 8 more of its 26 had survived. For each bug in turn
this script:
1. runs those tests on the tree as it is: they must pass (so a failure below is the bug's doing);
2. makes the edit (the line must occur exactly once, so an edit that no longer applies is reported, not skipped);
3. runs the same tests again, with a fresh bytecode cache: at least one must fail;
4. restores the file byte for byte, whatever happened.
It prints one line per bug and exits 1 if any bug went uncaught or any edit no longer applies.

    python -m tests.support.planted_bugs           every bug (a few minutes)
    python -m tests.support.planted_bugs NAME...   only these (a name as --list prints it, or a part of one naming one
                                                   or more bugs: "connect" runs every bug whose name says connect)
    python -m tests.support.planted_bugs --list    the names, one a line
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Bug:
    name: str
    path: str  # relative to the repository
    old: str  # the product text, which must occur exactly once
    new: str  # the bug
    tests: tuple[str, ...]  # pytest node ids; at least one must fail with the bug in place


# issue 30's tests, named by more than one bug below
ONCE = "tests/server/test_memory_bounds.py::test_an_id_named_10000_times_in_one_request_is_answered_once"
RESET = "tests/interop/test_admin_cli.py::test_reset_is_refused_in_every_state_with_members"
SILENT = ("tests/unit/test_migration.py::"
          "test_a_converted_classic_member_that_goes_silent_is_fenced_at_its_own_session_timeout")
LEAVE_2 = "tests/unit/test_consumer.py::test_a_static_member_leaving_with_minus_2_mid_revocation_frees_what_it_was_revoking"
EXPIRY = "tests/server/test_metrics.py::test_a_consumer_member_fenced_by_its_rebalance_timeout_counts_as_an_expiration"
# The general offsets path (kcoord/offsets.py, and the group's Python check) is the compiled path's oracle: a bug in
# it that the compiled path does not share shows as a difference between the two (issue 33)
QUICK = "tests/unit/test_offsets_quick.py::test_quick_path_answers_and_stages_as_the_general_path"
HARNESS = "tests/cluster/test_fault_harness.py::test_each_kind_of_fault_under_load_breaks_no_promise"

BUGS = [
    Bug("socket.request.max.bytes ignored", "kcoord/server.py",
        "self.reader = wire.FrameReader(server.config.max_frame_size)",
        "self.reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE)",
        ("tests/server/test_settings_server.py::test_socket_request_max_bytes_reads_a_frame_of_the_limit_and_closes_above",)),
    Bug("offset.metadata.max.bytes ignored", "kcoord/offsets.py",
        "limit = self.metadata_max_bytes",
        "limit = 4096",
        ("tests/server/test_settings_server.py::test_offset_metadata_max_bytes_at_the_limit_and_one_above",)),
    Bug("auto.create.topics.enable ignored", "kcoord/broker.py",
        "if t is None and name is not None and allow_create and cat.auto_create:",
        "if t is None and name is not None and allow_create:",
        ("tests/server/test_settings_server.py::test_auto_create_topics_enable_false_creates_nothing",)),
    Bug("num.partitions ignored", "kcoord/broker.py",
        "t = cat.create(name, cat.default_partitions)",
        "t = cat.create(name, 1)",
        ("tests/server/test_settings_server.py::test_num_partitions_is_what_a_created_topic_gets",)),
    Bug("node.id ignored", "kcoord/broker.py",
        "return [wire.MetadataResponseBroker(node_id=self.node_id, host=self.host, port=self.port)]",
        "return [wire.MetadataResponseBroker(node_id=0, host=self.host, port=self.port)]",
        ("tests/server/test_settings_server.py::test_node_id_is_the_broker_controller_and_coordinator",)),
    Bug("Produce accepted", "kcoord/broker.py",
        "index=p.index, error_code=E.INVALID_REQUEST, base_offset=-1, error_message=NO_RECORDS)",
        "index=p.index, error_code=E.NONE, base_offset=0, error_message=None)",
        ("tests/server/test_broker_wire.py",)),
    Bug("describe of an unknown group exits 0", "kcoord/cli/__init__.py",
        'if d["state"] == "Dead":',
        'if d["state"] == "Dead" and False:',
        ("tests/server/test_cli_paths.py::test_describe_of_an_unknown_group_exits_1_on_every_describe_path",)),
    Bug("groups --state ignored", "kcoord/cli/__init__.py",
        "states_filter=args.state or []",
        "states_filter=[]",
        ("tests/server/test_cli_paths.py::test_groups_state_lists_exactly_the_groups_in_that_state",)),
    Bug("the stored group's consistency check disabled", "kcoord/coordinator.py",
        "issue = R.problem(rec)",
        "issue = None",
        ("tests/unit/test_store.py::test_an_inconsistent_stored_group_is_refused_by_load_and_by_store_check",)),
    Bug("a session deadline 1 ms late", "kcoord/groups/classic.py",
        "self.timers.arm(m.timer, m.session_timeout_ms)",
        "self.timers.arm(m.timer, m.session_timeout_ms + 1)",
        ("tests/server/test_settings_group.py::test_classic_session_deadline_to_the_millisecond",)),
    # issue 30: the refused connect Install's fix, and the tests the suite lacked
    Bug("a refused connect Install leaves its units in the cached id arrays", "kcoord/groups/connect.py",
        "self._conn, self._task = self._conn[:n_units], self._task[:n_units]",
        "pass",
        ("tests/unit/test_connect.py::test_connect_install_after_a_refused_one_gives_every_worker_its_units_by_name",)),
    Bug("a -2 leave keeps the partitions it was revoking", "kcoord/groups/modern.py",
        "m.pending = EMPTY_IDS",
        "m.pending = m.pending",
        (LEAVE_2,)),
    Bug("an online upgrade arms no session for the converted members", "kcoord/groups/migration.py",
        "cg.arm_session(m)",
        "pass",
        (SILENT,)),
    Bug("a converted classic member gets the consumer session timeout", "kcoord/groups/consumer.py",
        "return m.classic.session_timeout_ms if m.classic is not None else self.config.group_consumer_session_timeout_ms",
        "return self.config.group_consumer_session_timeout_ms",
        (SILENT,)),
    Bug("connect selection without cover takes the highest minimum", "kcoord/groups/connect.py",
        "-hi, mid != self.last_computing",
        "-lo, mid != self.last_computing",
        ("tests/unit/test_connect.py::test_connect_select_without_cover_takes_the_highest_maximum",)),
    Bug("DescribeGroups answers a repeated id each time", "kcoord/coordinator.py",
        "for gid in dict.fromkeys(req.groups):",
        "for gid in req.groups:",
        (f"{ONCE}[DescribeGroups]",)),
    Bug("ConsumerGroupDescribe answers a repeated id each time", "kcoord/coordinator.py",
        "for gid in dict.fromkeys(req.group_ids):  # each once: a repeated id cannot multiply the answer\n"
        "            g = self.groups.get(gid)\n            if not self.consumer_protocol:",
        "for gid in req.group_ids:  # each once: a repeated id cannot multiply the answer\n"
        "            g = self.groups.get(gid)\n            if not self.consumer_protocol:",
        (f"{ONCE}[ConsumerGroupDescribe]",)),
    Bug("ConnectGroupDescribe answers a repeated id each time", "kcoord/coordinator.py",
        "for gid in dict.fromkeys(req.group_ids):  # each once: a repeated id cannot multiply the answer\n"
        "            g = self.groups.get(gid)\n            if isinstance(g, ConnectGroup)",
        "for gid in req.group_ids:  # each once: a repeated id cannot multiply the answer\n"
        "            g = self.groups.get(gid)\n            if isinstance(g, ConnectGroup)",
        (f"{ONCE}[ConnectGroupDescribe]",)),
    Bug("OffsetFetch v8+ answers a repeated group each time", "kcoord/offsets.py",
        "seen.add(rg.group_id)",
        "pass",
        (f"{ONCE}[OffsetFetch v8]", f"{ONCE}[OffsetFetch v10]", QUICK)),
    Bug("Metadata answers a repeated topic each time", "kcoord/broker.py",
        "wanted = list(dict.fromkeys((t.name, t.topic_id) for t in req.topics))",
        "wanted = [(t.name, t.topic_id) for t in req.topics]",
        (f"{ONCE}[Metadata]",)),
    Bug("a rebalance-timeout fence is not an expiration", "kcoord/events.py",
        '"sync-timeout", "rebalance-timeout"})',
        '"sync-timeout"})',
        (EXPIRY,)),
    Bug("a rebalance-timeout fence noted as a leave", "kcoord/groups/modern.py",
        'self.note("rebalance-timeout", member_id, m.instance_id)',
        'self.note("leave", member_id, m.instance_id)',
        (EXPIRY,)),
    Bug("offsets --reset refuses only the classic active states", "kcoord/cli/admin.py",
        "if state not in INACTIVE_STATES:",
        'if state in ("PreparingRebalance", "CompletingRebalance", "Stable"):',
        (RESET,)),
    Bug("an admin OffsetCommit accepted by a consumer group with members", "kcoord/groups/consumer.py",
        "return E.UNKNOWN_MEMBER_ID if self.members else E.NONE",
        "return E.NONE",
        (RESET, QUICK)),
    Bug("an admin OffsetCommit accepted by a classic group rebalancing", "kcoord/groups/classic.py",
        "elif state is not EMPTY:",
        "elif state is State.STABLE:",
        (RESET,)),
    Bug("a store one acknowledged commit behind its witness is served", "kcoord/store.py",
        "elif witness is not None and witness > state.seq:",
        "elif witness is not None and witness > state.seq + 1:",
        ("tests/server/test_store_damage.py::test_a_store_exactly_one_acknowledged_commit_behind_its_witness_is_refused",)),
    # issue 34: the records and the memory diverge; the random models compare a rebuild from the records with the
    # live groups (tests/support/snapshots.py)
    Bug("a consumer member's record carries its epoch as its previous epoch", "kcoord/groups/consumer.py",
        "member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,",
        "member_epoch=m.member_epoch, previous_member_epoch=m.member_epoch,",
        ("tests/unit/test_consumer.py::test_random_groups_never_assign_a_partition_twice_and_converge",
         "tests/unit/test_migration.py::"
         "test_random_mixes_of_classic_and_consumer_members_never_share_a_partition_and_converge")),
    Bug("a classic member's record carries its rebalance timeout as its session timeout", "kcoord/groups/classic.py",
        "rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,",
        "rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.rebalance_timeout_ms,",
        ("tests/unit/test_classic_model.py",)),
    Bug("a connect worker's record forgets when it joined", "kcoord/groups/connect.py",
        "rebalance_timeout_ms=m.rebalance_timeout_ms, joined=m.joined, client_assignors=[",
        "rebalance_timeout_ms=m.rebalance_timeout_ms, joined=0, client_assignors=[",
        ("tests/unit/test_connect.py::test_connect_random_model_one_computer_and_no_unit_held_twice",)),
    # issue 35: the cluster's promises under faults. The fault harness's checker comes first: each must be caught
    # by it (as well as by its direct test)
    Bug("a cluster node answers from memory past its lease deadline", "kcoord/cluster.py",
        "return p in self.epochs and self.deadline.get(p, 0) > lease_clock()",
        "return p in self.epochs",
        (HARNESS, "tests/cluster/test_cluster_faults.py::"
         "test_a_resumed_node_answers_not_coordinator_for_groups_that_moved_even_to_what_it_read_while_stopped")),
    Bug("the write fence lets an older epoch of the same node id through", "kcoord/pgstore.py",
        "WHERE l.partition = m.p AND l.epoch = m.e AND l.node_id = me",
        "WHERE l.partition = m.p AND l.epoch >= m.e AND l.node_id = me",
        (HARNESS, "tests/cluster/test_cluster_faults.py::"
         "test_a_write_at_an_older_epoch_of_the_same_node_id_is_fenced_and_logged_at_the_epoch_claimed")),
    Bug("a cluster node keeps its lease deadlines on its wall clock", "kcoord/cluster.py",
        "return time.clock_gettime(BOOTTIME)",
        "return time.time()",
        (HARNESS, "tests/cluster/test_cluster_faults.py::"
         "test_a_node_cut_from_postgresql_stops_answering_at_its_lease_deadline_whatever_its_wall_clock_says"
         "[clock-an-hour-back]")),
]


def run_tests(tests: tuple[str, ...]) -> tuple[int, str]:
    """pytest on `tests` in a fresh process with a fresh bytecode cache (an edit within the same second as the
    cached bytecode, of the same size, would otherwise not be seen); returns its status and last lines."""
    with tempfile.TemporaryDirectory(prefix="kcoord-planted-") as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                               "--benchmark-disable", "-m", "not slow", *tests], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)
    return proc.returncode, "\n".join(proc.stdout.splitlines()[-3:])


def check(bug: Bug) -> tuple[bool, str]:
    path = ROOT / bug.path
    original = path.read_bytes()
    text = original.decode()
    if text.count(bug.old) != 1:
        return False, f"the edit no longer applies: {bug.old!r} occurs {text.count(bug.old)} times in {bug.path}"
    rc, out = run_tests(bug.tests)
    if rc != 0:
        return False, f"the tests fail without the bug (exit {rc}):\n{out}"
    try:
        path.write_text(text.replace(bug.old, bug.new))
        rc, out = run_tests(bug.tests)
    finally:
        path.write_bytes(original)
    if rc == 0:
        return False, "NOT CAUGHT: the tests pass with the bug in place"
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    return True, failed[0] if failed else out.splitlines()[-1]


def select(names: list[str]) -> list[Bug]:
    """The bugs named: each name exactly as listed, or a part of one or more names; every bug when none is given.
    A ValueError names a word that matches no bug (a typo must not run nothing and say all were caught)."""
    if not names:
        return list(BUGS)
    chosen: dict[str, Bug] = {}
    for name in names:
        exact = [b for b in BUGS if b.name == name]
        found = exact or [b for b in BUGS if name.lower() in b.name.lower()]
        if not found:
            raise ValueError(f"no planted bug is named {name!r} "
                             "(python -m tests.support.planted_bugs --list names them)")
        chosen.update((b.name, b) for b in found)
    return [b for b in BUGS if b.name in chosen]


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv[:1] == ["--list"]:
        print("\n".join(b.name for b in BUGS))
        return 0
    try:
        bugs = select(argv)
    except ValueError as e:
        print(f"planted_bugs: {e}", file=sys.stderr)
        return 2
    bad = 0
    for bug in bugs:
        t0 = time.monotonic()
        caught, detail = check(bug)
        bad += not caught
        print(f"{'caught' if caught else 'MISSED'}  {bug.name}  ({time.monotonic() - t0:.0f} s): {detail}",
              flush=True)
    print(f"{len(bugs) - bad} of {len(bugs)} planted bugs caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
