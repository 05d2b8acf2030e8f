"""The connect groups' client-side assignor (kcoord.client.worker_assignor) at 1,000 workers x 100,000 tasks.

Steady state: the members' targets are a previous output of the same assignor, listed as a computing worker gets
them (the wire objects of ConnectGroupPrepareAssignment); then one worker joins (1,001 members), or one leaves
(999 members and a departed worker) with no scheduled delay (its units reassigned at once) or with the default
300 s delay (its units held back, the state written). Two shapes: 1,000 connectors x 100 tasks and 100 connectors
x 1,000 tasks. Timed: one `assign` call, reading the input lists and building the output included.
Target (the connect groups issue): < 100 ms median per call (reported in the assignor targets table, not asserted).
Run: `python -m pytest benches/bench_connect_assignor.py -s -m "slow or not slow"`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kcoord import wire
from kcoord.client.worker_assignor import (
    AssignmentInput,
    AssignmentOutput,
    DepartedInput,
    IncrementalCooperativeAssignor,
    MemberInput,
    WorkerMetadata,
)

WORKERS = 1_000
TARGET_S = 0.100
SHAPES = {"1,000 connectors x 100 tasks": (1_000, 100), "100 connectors x 1,000 tasks": (100, 1_000)}
EVENTS = ("one worker joins", "one worker leaves, delay 0", "one worker leaves, delay 300 s")

CAT = wire.ConnectGroupPrepareAssignmentResponseConnectorsAndTasks
TASKS = wire.ConnectGroupPrepareAssignmentResponseConnectorTasks


def worker(i: int) -> tuple[str, bytes]:
    return f"worker-{i:04d}", WorkerMetadata(f"http://10.0.{i // 250}.{i % 250}:8083", 42).encode()


def as_prepared(out: AssignmentOutput, metadata: dict[str, bytes]) -> list[MemberInput]:
    """The members as the next Prepare lists them: each with its target from `out`, as wire objects."""
    return [MemberInput(m.member_id, None, metadata[m.member_id],
                        CAT(connectors=list(m.connectors),
                            tasks=[TASKS(connector=t.connector, task_ids=list(t.task_ids)) for t in m.tasks]),
                        m.metadata) for m in out.members]


def steady_case(shape: str, event: str) -> tuple[IncrementalCooperativeAssignor, AssignmentInput]:
    connectors, tasks = SHAPES[shape]
    units = {f"connector-{c:04d}": tasks for c in range(connectors)}
    delay = 300_000 if event.endswith("300 s") else 0
    assignor = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms=delay)
    metadata = dict(worker(i) for i in range(WORKERS + 1))
    first = [MemberInput(mid, None, metadata[mid], CAT(connectors=[], tasks=[])) for mid in list(metadata)[:WORKERS]]
    now = 1_700_000_000_000
    members = as_prepared(assignor.assign(AssignmentInput("worker-0000", 2, now, units, first, [], None)), metadata)
    departed: list[DepartedInput] = []
    if event == "one worker joins":
        new_id = f"worker-{WORKERS:04d}"
        members.append(MemberInput(new_id, None, metadata[new_id], CAT(connectors=[], tasks=[])))
    else:
        gone = members.pop(WORKERS // 2)
        departed.append(DepartedInput(gone.member_id, None, gone.target))
    return assignor, AssignmentInput("worker-0000", 2, now + 60_000, units, members, departed, None)


def check(inp: AssignmentInput, out: AssignmentOutput, tasks_total: int, event: str) -> None:
    assert out.error == 0 and len(out.members) == len(inp.members)
    assigned = sum(len(t.task_ids) for m in out.members for t in m.tasks)
    held = 0 if not event.endswith("300 s") else sum(len(t.task_ids) for t in inp.departed[0].target.tasks)
    assert assigned == tasks_total - held
    loads = [sum(len(t.task_ids) for t in m.tasks) for m in out.members]
    assert max(loads) - min(loads) <= 1
    assert (out.delay_ms > 0) == (held > 0)


@pytest.mark.benchmark(group="connect assignor: 1,000 workers x 100,000 tasks, steady state (one assign call)")
@pytest.mark.parametrize("event", EVENTS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_connect_assignor_steady_state_1000_workers_100000_tasks(benchmark: Any, shape: str, event: str) -> None:
    assignor, inp = steady_case(shape, event)
    connectors, tasks = SHAPES[shape]
    check(inp, assignor.assign(inp), connectors * tasks, event)
    benchmark.extra_info.update(assignor_target=f"connect ICA, 1,000 workers x 100,000 tasks ({shape}), {event}",
                                target_s=TARGET_S, workers=WORKERS, tasks=connectors * tasks)
    if getattr(benchmark, "disabled", False):
        benchmark(assignor.assign, inp)
        return
    benchmark.pedantic(assignor.assign, args=(inp,), rounds=25, warmup_rounds=2)
    median = benchmark.stats["median"]
    print(f"\nconnect assignor, 1,000 workers x 100,000 tasks ({shape}), {event}: {median * 1e3:.2f} ms median "
          f"(target < {TARGET_S * 1e3:.0f} ms: {'ok' if median < TARGET_S else 'MISS'})")
