"""The cluster under faults, checked from its history (issue 35): tests/support/faults.py runs three nodes, probers
and real consumers, and a nemesis; tests/support/history.py checks what the clients saw against the promises:
no acknowledged commit lost or overwritten by an older one, no stale read from any node, one writer at a time per
coordinator partition (the database's write log), no partition owned by two members of a group at once, and every
group served again within the lease plus a bound after each fault heals.

The short form (CI) makes each kind of fault once, each planted bug's in the form that catches it: a pause past the
lease (stale reads: the readers' requests sent to the stopped node are read when it resumes), a clock stepped back
at the moment the node is stopped (a deadline on the wall clock), a restart with a write held in flight on a
partition the new process takes back (a loose fence). The long form
(`slow`, KCOORD_FAULTS_MINUTES, 30 by default) makes hundreds of random ones; its summary is in the README.
"""

from __future__ import annotations

import os
import time

import pytest

from ..support.faults import KINDS, Settings, run_faults

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LEASE_S = 3.0
SHORT = [
    ("pause-short", {}),
    ("pg-reset", {}),
    ("pause-past-lease", {"hold": 2 * LEASE_S, "slow": True}),
    ("pg-drop", {"hold": 1.5 * LEASE_S}),
    ("pg-stall", {"hold": 2.5 * LEASE_S}),
    ("clock-jump", {"shift": -3600.0, "cut": "pause", "hold": 2 * LEASE_S, "slow": True}),
    ("same-id-restart", {}),
    ("pg-restart", {"hold": 1.0}),
]


def test_each_kind_of_fault_under_load_breaks_no_promise(pg_dsn, postgres_server, tmp_path):
    run = run_faults(pg_dsn, postgres_server, tmp_path, schedule=list(SHORT), seed=35,
                     settings=Settings(lease_s=LEASE_S), log=lambda line: print(time.strftime("%H:%M:%S"), line))
    text = run.text()
    print(text)
    assert run.report.violations == [], text
    assert run.notes == [], text
    assert set(run.report.faults) == set(KINDS), text
    assert run.report.ok > 500, text  # the clients were served throughout


@pytest.mark.slow
def test_hundreds_of_random_faults_break_no_promise(pg_dsn, postgres_server, tmp_path):
    minutes = float(os.environ.get("KCOORD_FAULTS_MINUTES", "30"))
    run = run_faults(pg_dsn, postgres_server, tmp_path, duration_s=60 * minutes, seed=int(time.time()),
                     settings=Settings(lease_s=LEASE_S, churn_every_s=60.0),
                     log=lambda line: print(time.strftime("%H:%M:%S"), line, flush=True))
    text = run.text()
    print(text)
    out = os.environ.get("KCOORD_FAULTS_REPORT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    assert run.report.violations == [], text
    assert run.notes == [], text
