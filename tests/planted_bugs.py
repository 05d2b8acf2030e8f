"""Bugs planted by hand, each of which the suite must catch: `make planted` (python -m tests.planted_bugs [NAME...]).

An audit planted 29 deliberate bugs in kcoord and found that 8 of them passed the whole suite, all at its edges
(settings a running server ignored, broker answers never checked over the wire, CLI exits, a consistency check, a
deadline off by one millisecond). Each is kept here as an edit of one product line, with the tests that must fail
once it is made. For each bug in turn this script:
1. runs those tests on the tree as it is: they must pass (so a failure below is the bug's doing);
2. makes the edit (the line must occur exactly once, so an edit that no longer applies is reported, not skipped);
3. runs the same tests again, with a fresh bytecode cache: at least one must fail;
4. restores the file byte for byte, whatever happened.
It prints one line per bug and exits 1 if any bug went uncaught or any edit no longer applies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bug:
    name: str
    path: str  # relative to the repository
    old: str  # the product text, which must occur exactly once
    new: str  # the bug
    tests: tuple[str, ...]  # pytest node ids; at least one must fail with the bug in place


BUGS = [
    Bug("socket.request.max.bytes ignored", "kcoord/server.py",
        "self.reader = wire.FrameReader(server.config.max_frame_size)",
        "self.reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE)",
        ("tests/test_settings_server.py::test_socket_request_max_bytes_reads_a_frame_of_the_limit_and_closes_above",)),
    Bug("offset.metadata.max.bytes ignored", "kcoord/offsets.py",
        "limit = self.metadata_max_bytes",
        "limit = 4096",
        ("tests/test_settings_server.py::test_offset_metadata_max_bytes_at_the_limit_and_one_above",)),
    Bug("auto.create.topics.enable ignored", "kcoord/broker.py",
        "if t is None and name is not None and allow_create and cat.auto_create:",
        "if t is None and name is not None and allow_create:",
        ("tests/test_settings_server.py::test_auto_create_topics_enable_false_creates_nothing",)),
    Bug("num.partitions ignored", "kcoord/broker.py",
        "t = cat.create(name, cat.default_partitions)",
        "t = cat.create(name, 1)",
        ("tests/test_settings_server.py::test_num_partitions_is_what_a_created_topic_gets",)),
    Bug("node.id ignored", "kcoord/broker.py",
        "return [wire.MetadataResponseBroker(node_id=self.node_id, host=self.host, port=self.port)]",
        "return [wire.MetadataResponseBroker(node_id=0, host=self.host, port=self.port)]",
        ("tests/test_settings_server.py::test_node_id_is_the_broker_controller_and_coordinator",)),
    Bug("Produce accepted", "kcoord/broker.py",
        "index=p.index, error_code=E.INVALID_REQUEST, base_offset=-1, error_message=NO_RECORDS)",
        "index=p.index, error_code=E.NONE, base_offset=0, error_message=None)",
        ("tests/test_broker_wire.py",)),
    Bug("describe of an unknown group exits 0", "kcoord/cli.py",
        'if d["state"] == "Dead":',
        'if d["state"] == "Dead" and False:',
        ("tests/test_cli_paths.py::test_describe_of_an_unknown_group_exits_1_on_every_describe_path",)),
    Bug("groups --state ignored", "kcoord/cli.py",
        "states_filter=args.state or []",
        "states_filter=[]",
        ("tests/test_cli_paths.py::test_groups_state_lists_exactly_the_groups_in_that_state",)),
    Bug("the stored group's consistency check disabled", "kcoord/coordinator.py",
        "issue = R.problem(rec)",
        "issue = None",
        ("tests/test_store.py::test_an_inconsistent_stored_group_is_refused_by_load_and_by_store_check",)),
    Bug("a session deadline 1 ms late", "kcoord/groups/classic.py",
        "self._heap.schedule(m.timer, self._now() + m.session_timeout_ms)",
        "self._heap.schedule(m.timer, self._now() + m.session_timeout_ms + 1)",
        ("tests/test_settings_group.py::test_classic_session_deadline_to_the_millisecond",)),
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


def main(argv: list[str]) -> int:
    bugs = [b for b in BUGS if not argv or b.name in argv]
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
