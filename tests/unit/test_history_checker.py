"""The fault harness's history checker (tests/support/history.py) on hand-made histories: a valid concurrent one
passes; each promise has a history that breaks it, reported on the right key with its values, times, nodes and
clients; the unavailability figure is what the rule says; and, as a property, histories served by a correct
register pass while the same history with one read made stale gives exactly that one stale read."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from ..support.history import Fault, History, Op, Ownership, check
from ..support.quick import examples

LEASE, BOUND = 3.0, 2.0
G, H = "g1", "g2"


def commit(h: History, client: str, node: int, key: tuple[str, str, int], value: int, sent: float,
           answered: float | None, outcome: str = "ok", error: str = "") -> Op:
    op = Op("commit", client, node, *key, value, sent, answered, outcome, error)
    h.record(op)
    return op


def fetch(h: History, client: str, node: int, key: tuple[str, str, int], value: int | None, sent: float,
          answered: float | None, outcome: str = "ok", error: str = "") -> Op:
    op = Op("fetch", client, node, *key, value, sent, answered, outcome, error)
    h.record(op)
    return op


def run(h: History, write_log=(), lease_s: float = LEASE, bound_s: float = BOUND):
    return check(h, write_log=write_log, lease_s=lease_s, bound_s=bound_s)


def valid_history() -> History:
    """Two groups, three keys, interleaved clients on three nodes, with every allowed oddity."""
    h = History()
    a, b, c = (G, "t", 0), (G, "t", 1), (H, "u", 0)
    h.own(Ownership("m1", G, "t", 0, "assigned", 100.0))
    h.own(Ownership("m1", G, "t", 0, "assigned", 100.5))  # called back again: the same interval
    h.own(Ownership("m2", G, "t", 1, "assigned", 100.0))
    fetch(h, "r1", 1, a, -1, 100.0, 100.1)  # nothing committed yet
    commit(h, "w1", 1, a, 10, 100.2, 100.4)
    commit(h, "w2", 2, b, 5, 100.3, None, "info", "TimeoutError")  # never shows up: allowed
    commit(h, "w1", 1, a, 11, 100.5, 101.5)  # a slow commit, and two fetches concurrent with it:
    fetch(h, "r1", 1, a, 11, 100.6, 101.2)  # sees the new value before the commit's answer
    fetch(h, "r2", 2, a, 10, 100.7, 101.3)  # overlaps the read of 11: may still see 10
    fetch(h, "r2", 2, b, -1, 100.8, 100.9)
    commit(h, "w2", 2, b, 6, 101.0, 101.1, "fail", "NOT_COORDINATOR")  # refused, never shows up
    commit(h, "w3", 3, c, 1, 101.0, 101.2)
    commit(h, "w2", 3, b, 7, 101.3, None, "info", "ConnectionResetError")  # shows up below: it was applied
    fetch(h, "r3", 3, b, 7, 101.4, 101.6)
    fetch(h, "r3", 3, c, 1, 101.7, 101.8)
    h.own(Ownership("m1", G, "t", 0, "revoked", 102.0))
    h.own(Ownership("m3", G, "t", 0, "assigned", 102.0))  # a handoff at the same instant
    h.fault(Fault("pause-past-lease", (1,), 102.0, 104.0))
    commit(h, "w1", 1, a, 12, 102.5, 104.5, "fail", "NOT_COORDINATOR")
    commit(h, "w1", 2, a, 13, 104.6, 105.0)
    commit(h, "w3", 3, c, 2, 104.1, 104.3)
    fetch(h, "r1", 2, a, 13, 105.2, 105.3)
    fetch(h, "r3", 3, c, 2, 105.2, 105.4)
    fetch(h, "end", 0, a, 13, 106.0, 106.0)
    fetch(h, "end", 0, b, 7, 106.0, 106.0)
    fetch(h, "end", 0, c, 2, 106.0, 106.0)
    return h


VALID_LOG = [(1, 3, 2, 1), (0, 1, 1, 1), (0, 2, 1, 1), (1, 1, 1, 2), (0, 3, 2, 2), (1, 2, 1, 2), (0, 4, 2, 2)]


def test_a_valid_concurrent_history_has_no_violation() -> None:
    report = run(valid_history(), VALID_LOG)
    assert report.violations == []
    assert (report.ops, report.ok, report.failed, report.indeterminate) == (20, 16, 2, 2)
    assert report.faults == {"pause-past-lease": 1}
    assert "violations: 0" in report.text()


def test_a_read_older_than_an_acknowledged_commit_is_a_stale_read() -> None:
    h = valid_history()
    fetch(h, "r9", 3, (G, "t", 0), 11, 105.5, 105.6)  # 13 was acknowledged at 105.0
    fetch(h, "r9", 1, (H, "u", 0), -1, 105.7, 105.8)  # 2 was acknowledged at 104.3: lost
    v = run(h).violations
    assert v == [
        "stale read: group g1 t/0: fetch by r9 at node 3 (sent 5.500, answered 5.600) answered 11, but 13 was "
        "acknowledged to w1 by node 2 at 5.000 (sent 4.600) before the fetch was sent",
        "stale read: group g2 u/0: fetch by r9 at node 1 (sent 5.700, answered 5.800) answered -1 (nothing "
        "committed), but 2 was acknowledged to w3 by node 3 at 4.300 (sent 4.100) before the fetch was sent"]


def test_a_commit_lost_in_the_database_is_a_stale_read_of_the_final_fetch() -> None:
    h = History()
    key = (G, "t", 3)
    commit(h, "w", 1, key, 1, 0.0, 0.1)
    commit(h, "w", 1, key, 2, 0.2, 0.3)
    fetch(h, "end", 0, key, 1, 9.0, 9.0)
    assert run(h).violations == [
        "stale read: group g1 t/3: fetch by end at the database (sent 9.000, answered 9.000) answered 1, but 2 was "
        "acknowledged to w by node 1 at 0.300 (sent 0.200) before the fetch was sent"]


def test_a_read_concurrent_with_the_acknowledgement_may_see_the_older_value() -> None:
    h = History()
    key = (G, "t", 0)
    commit(h, "w", 1, key, 1, 0.0, 0.1)
    commit(h, "w", 1, key, 2, 0.2, 0.5)
    fetch(h, "r", 2, key, 1, 0.49, 0.6)  # sent before the answer at 0.5
    fetch(h, "r", 3, key, 1, 0.5, 0.6)  # sent at the instant of the answer: still concurrent
    assert run(h).violations == []
    fetch(h, "r", 2, key, 1, 0.51, 0.6)  # sent after it
    assert [v.split(":")[0:2] for v in run(h).violations] == [["stale read", " group g1 t/0"]]


def test_a_read_older_than_an_earlier_read_is_a_stale_read() -> None:
    h = History()
    key = (H, "u", 2)
    commit(h, "w", 1, key, 1, 0.0, 0.1)
    commit(h, "w", 1, key, 2, 0.2, None, "info", "TimeoutError")  # applied: r1 reads it
    fetch(h, "r1", 1, key, 2, 0.3, 0.4)
    fetch(h, "r2", 2, key, 1, 0.5, 0.6)  # sent after 2 was read: 2 cannot have gone away
    assert run(h).violations == [
        "stale read: group g2 u/2: fetch by r2 at node 2 (sent 0.500, answered 0.600) answered 1, but 2 had been "
        "answered to r1 by node 1 at 0.400 (a read went back)"]


def test_a_value_never_sent_is_a_phantom_read() -> None:
    h = valid_history()
    fetch(h, "r9", 2, (G, "t", 1), 99, 105.5, 105.6)
    assert run(h).violations == [
        "phantom read: group g1 t/1: fetch by r9 at node 2 (sent 5.500, answered 5.600) answered 99, which no commit "
        "sent"]


def test_a_value_only_a_refused_commit_sent_is_reported() -> None:
    h = valid_history()
    fetch(h, "r9", 1, (G, "t", 0), 12, 104.7, 104.8)  # 12's commit failed with NOT_COORDINATOR
    assert run(h).violations == [
        "refused value read: group g1 t/0: fetch by r9 at node 1 (sent 4.700, answered 4.800) answered 12, sent only "
        "by w1's commit to node 1 at 2.500, which failed (NOT_COORDINATOR)"]


def test_a_value_sent_after_the_fetch_was_answered_is_reported() -> None:
    h = valid_history()
    fetch(h, "r9", 2, (G, "t", 0), 13, 104.0, 104.2)  # 13 is sent at 104.6
    assert run(h).violations == [
        "future value read: group g1 t/0: fetch by r9 at node 2 (sent 4.000, answered 4.200) answered 13, sent by "
        "w1's commit to node 2 only at 4.600, after the fetch was answered"]


def test_the_write_log_shows_an_older_epoch_and_an_epoch_of_two_nodes() -> None:
    back = [*VALID_LOG, (0, 5, 1, 1)]  # node 1 writes at its old epoch after node 2's epoch 2
    twice = [*VALID_LOG, (1, 4, 2, 3)]  # node 3 writes at node 1's epoch 2 of partition 1
    assert run(valid_history(), back).violations == [
        "two writers: partition 0: write 5 by node 1 at epoch 1 after epoch 2"]
    assert run(valid_history(), twice).violations == [
        "two writers: partition 1: epoch 2 written by nodes 1 and 3 (write 4)"]
    assert run(valid_history(), list(reversed(twice))).violations == run(valid_history(), twice).violations


def test_two_members_owning_one_partition_at_once_are_reported() -> None:
    h = valid_history()
    h.own(Ownership("m4", G, "t", 1, "assigned", 103.0))  # m2 has held g1 t/1 since 0.000 and never let it go
    h.own(Ownership("m4", G, "t", 1, "revoked", 104.0))
    h.own(Ownership("m5", H, "t", 1, "assigned", 103.0))  # another group's t/1: no conflict
    assert run(h).violations == [
        "two owners: group g1 t/1: member m2 from 0.000 to 6.000 and member m4 from 3.000 to 4.000"]


def test_a_repeated_assignment_is_one_interval_and_a_revoke_ends_it() -> None:
    h = History()
    fetch(h, "r", 1, (G, "t", 0), -1, 0.0, 0.1)
    for member, event, at in [("a", "assigned", 0.0), ("a", "assigned", 1.0), ("a", "revoked", 2.0),
                              ("b", "assigned", 2.0), ("b", "revoked", 3.0), ("a", "assigned", 3.5),
                              ("a", "revoked", 4.0), ("a", "revoked", 4.5), ("b", "assigned", 4.2)]:
        h.own(Ownership(member, G, "t", 0, event, at))
    assert run(h).violations == []
    h.own(Ownership("b", G, "t", 0, "assigned", 3.9))  # b again before a let go at 4.0
    assert run(h).violations == ["two owners: group g1 t/0: member a from 3.500 to 4.000 and member b from 3.900 "
                                 "to 4.500"]


def served(h: History, group: str, times: list[float], node: int = 1, sent_before: float = 0.05) -> None:
    for t in times:
        fetch(h, f"c-{group}", node, (group, "t", 0), -1, t - sent_before, t)


def test_a_group_served_again_late_after_a_heal_is_reported() -> None:
    h = History()
    served(h, G, [0.0, 1.0, 2.0, 12.0, 13.0])  # healed at 3, deadline 3 + 3 + 2 = 8: g1 waited until 12
    served(h, H, [0.0, 1.0, 4.0, 5.0])  # g2 back at 4
    fetch(h, "c-g1", 1, (G, "t", 0), None, 5.0, 6.0, "fail", "NOT_COORDINATOR")
    h.fault(Fault("pg-drop", (1, 2), 2.5, 3.0))
    report = run(h)
    assert report.violations == [
        "not served again: pg-drop of nodes 1,2 (from 2.550, healed 3.050): group g1 first answered ok at 12.050, "
        "9.000 s after the heal (lease 3.0 s + bound 2.0 s)"]
    assert report.unavailable == {"pg-drop": 10.0}


def test_a_group_never_served_again_is_reported_only_if_it_kept_trying_and_the_history_went_on() -> None:
    short = History()
    served(short, G, [0.0, 1.0])
    fetch(short, "c-g1", 1, (G, "t", 0), None, 2.5, 2.6, "fail", "NOT_COORDINATOR")
    short.fault(Fault("pg-reset", (1,), 1.5, 2.0))
    assert run(short).violations == []  # the history ends at 2.6, before the deadline 7.0: not judged
    h = History()
    served(h, G, [0.0, 1.0])
    served(h, H, [0.0, 1.0, 4.0, 20.0])
    h.fault(Fault("same-id-restart", (2,), 1.5, 2.0))
    assert run(h).violations == []  # g1's clients had stopped: not judged
    fetch(h, "c-g1", 2, (G, "t", 0), None, 6.0, 7.0, "fail", "COORDINATOR_NOT_AVAILABLE")
    assert run(h).violations == [
        "not served again: same-id-restart of nodes 2 (from 1.550, healed 2.050): group g1 never answered ok after "
        "the heal (history ends 20.050; lease 3.0 s + bound 2.0 s)"]


def test_a_request_hanging_across_the_window_counts_as_trying_and_the_database_is_not_service() -> None:
    h = History()
    served(h, G, [0.0, 1.0])
    fetch(h, "c-g1", 1, (G, "t", 0), -1, 1.5, 30.0)  # sent before the fault, answered long after the deadline
    fetch(h, "end", 0, (G, "t", 0), -1, 4.0, 4.0)  # the database read at node 0 does not count as served
    h.fault(Fault("pause-past-lease", (1,), 2.0, 3.0))
    assert run(h).violations == [
        "not served again: pause-past-lease of nodes 1 (from 2.050, healed 3.050): group g1 first answered ok at "
        "30.050, 27.000 s after the heal (lease 3.0 s + bound 2.0 s)"]


def test_a_fault_overlapped_by_a_later_one_is_judged_through_it() -> None:
    h = History()
    served(h, G, [0.0, 1.0, 11.0, 12.0])
    h.fault(Fault("pause-short", (1,), 2.0, 3.0))  # deadline 8, but pg-stall starts at 7 and heals at 10
    h.fault(Fault("pg-stall", (1,), 7.0, 10.0))
    fetch(h, "c-g1", 1, (G, "t", 0), None, 5.0, 5.1, "fail", "NOT_COORDINATOR")  # g1 tried in pause-short's window
    report = run(h)
    assert report.violations == []
    # the 1 -> 11 gap is charged to pg-stall, the last fault to hit the group before it was served again
    assert report.unavailable == {"pause-short": 0.0, "pg-stall": 10.0}
    h.fault(Fault("pg-restart", (), 3.5, 4.0))  # nested in neither: pause-short is still judged via pg-stall
    assert run(h).violations == []


def test_unavailability_is_the_longest_ok_gap_overlapping_the_fault_and_its_window() -> None:
    h = History()
    served(h, G, [0.0, 1.0, 1.5, 4.0, 5.0, 30.0, 31.0])
    served(h, H, [0.0, 2.5, 6.0, 8.0, 30.0], node=2)
    h.fault(Fault("pause-short", (1,), 2.0, 3.0))  # window [2.0, 3.0 + 0.5 + 0.5 = 4.0]
    h.fault(Fault("pause-short", (2,), 16.0, 16.5))  # window [16.0, 17.5]: g1's 25-s gap and g2's 22-s gap
    h.fault(Fault("clock-jump", (2,), 40.0, 41.0))  # after every answer: no gap overlaps
    report = run(h, lease_s=0.5, bound_s=0.5)
    # g1's gaps touching [2, 4]: 1.5 -> 4.0 (2.5 s); g2's: 0.0 -> 2.5 (2.5), 2.5 -> 6.0 (3.5 s)
    assert report.unavailable == {"pause-short": 25.0, "clock-jump": 0.0}
    assert report.violations == []  # late, but their clients sent nothing in the windows: not judged
    fetch(h, "c-g2", 2, (H, "t", 0), None, 3.5, 3.6, "fail", "NOT_COORDINATOR")  # g2 tried in [3.0, 4.0]
    assert run(h, lease_s=0.5, bound_s=0.5).violations == [
        "not served again: pause-short of nodes 1 (from 2.050, healed 3.050): group g2 first answered ok at 6.050, "
        "3.000 s after the heal (lease 0.5 s + bound 0.5 s)"]
    only_first = History()
    for op in h.ops:
        only_first.record(op)
    only_first.fault(h.faults[0])
    assert run(only_first, lease_s=0.5, bound_s=0.5).unavailable == {"pause-short": 3.5}


def test_the_text_has_the_counts_the_faults_and_each_violation() -> None:
    h = valid_history()
    h.fault(Fault("pg-drop", (2,), 105.0, 105.1))
    fetch(h, "r9", 2, (G, "t", 1), 99, 105.5, 105.6)
    text = run(h).text()
    assert text.splitlines()[:2] == ["operations: 21 (ok 17, failed 2, indeterminate 2)", "faults: 2"]
    assert "  pause-past-lease: 1\n  pg-drop: 1\n" in text
    assert "longest unavailability per fault kind:\n  pause-past-lease: " in text
    assert text.endswith("violations: 1\n  phantom read: group g1 t/1: fetch by r9 at node 2 (sent 5.500, answered "
                         "5.600) answered 99, which no commit sent")


def test_many_threads_record_at_once() -> None:
    h = History()

    def client(n: int) -> None:
        for i in range(500):
            fetch(h, f"c{n}", 1, (G, "t", n), -1, float(i), float(i))
            h.own(Ownership(f"m{n}", G, "t", n, "assigned", float(i)))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(h.ops), len(h.ownership)) == (4000, 4000)
    assert run(h).violations == []


# -- property: a correct register's histories pass; one stale read among them is found, alone -------------------

@st.composite
def register_history(draw):
    """Sequential writers (one per key) and concurrent readers against a simulated correct register: each op takes
    effect at one instant between its send and its answer (an indeterminate commit at most a timeout after its send,
    or never), and a fetch answers the register's value at its instant. Returns the ops and the register's commits
    acknowledged per key. Key 0's first two commits are acknowledged, so there is always an older acknowledged value
    for the final database read to be replaced with."""
    keys = [(f"g{k % 2}", "t", k) for k in range(draw(st.integers(1, 3)))]
    gaps = st.floats(0.001, 1.0)
    ops: list[tuple[float, Op]] = []  # (the instant it takes effect, op)
    end = 0.0
    for n, key in enumerate(keys):
        t, value = draw(gaps), 0
        for i in range(draw(st.integers(2 if n == 0 else 0, 8))):
            value += draw(st.integers(1, 5))
            outcome = "ok" if n == 0 and i < 2 else draw(st.sampled_from(["ok", "ok", "fail", "info"]))
            at, answered = t + draw(gaps), None
            if outcome == "ok":
                answered = at + draw(gaps)
            elif outcome == "fail":
                answered, at = at + draw(gaps), None
            elif draw(st.booleans()):
                at = None  # an indeterminate commit never applied
            ops.append((at if at is not None else -1.0,
                        Op("commit", f"w{n}", draw(st.integers(1, 3)), *key, value, t, answered, outcome,
                           "" if outcome == "ok" else "E")))
            t = (answered if answered is not None else t + 1.0) + draw(gaps)  # the writer's timeout is 1 s
        end = max(end, t)
    for r in range(draw(st.integers(1, 25))):
        key = draw(st.sampled_from(keys))
        sent = draw(st.floats(0.0, end))
        at = sent + draw(gaps)
        answered = at + draw(gaps)
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
        ops.append((at, Op("fetch", f"r{r % 3}", draw(st.integers(1, 3)), *key, None, sent,
                           None if outcome == "info" else answered, outcome)))
    for key in keys:
        ops.append((end + 10.0, Op("fetch", "end", 0, *key, None, end + 10.0, end + 10.0, "ok")))
    register: dict[tuple[str, str, int], int] = {}
    for at, op in sorted((e for e in ops if e[0] >= 0), key=lambda e: e[0]):
        if op.kind == "commit" and op.value is not None:
            register[op.key] = op.value
        elif op.outcome == "ok":
            op.value = register.get(op.key, -1)
    return [op for _, op in ops]


@settings(max_examples=examples(300), deadline=None)
@given(register_history(), st.data())
def test_a_correct_register_passes_and_one_stale_read_is_found_alone(ops, data) -> None:
    h = History()
    for op in ops:
        h.record(op)
    assert run(h).violations == []
    acked = [c for c in ops if c.kind == "commit" and c.outcome == "ok"]
    candidates = []
    for f in ops:
        if f.kind == "fetch" and f.outcome == "ok":
            before = [c.value for c in acked if c.key == f.key and c.answered < f.sent]
            older = sorted(v for v in before if v < max(before)) if before else []
            if older:
                candidates.append((f, older))
    assert candidates  # the final database read of key 0 at least
    f, older = data.draw(st.sampled_from(candidates))
    f.value = data.draw(st.sampled_from(older))
    violations = run(h).violations
    assert len(violations) == 1
    assert violations[0].startswith(f"stale read: group {f.group} {f.topic}/{f.partition}: fetch by {f.client} at ")
    assert f"answered {f.value}, but {max(c.value for c in acked if c.key == f.key and c.answered < f.sent)} was " \
           f"acknowledged" in violations[0]
