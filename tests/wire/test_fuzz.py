"""The whole request surface under a coverage-guided fuzzer and under resource limits, on every run of the suite.

- The corpus kept in the repo (tests/fuzz/corpus/fuzz_requests/) replays through the in-process harness
  (tests/fuzz/harness.py): fast and deterministic. It holds a valid request for every API and version.
- The atheris fuzzer runs as a subprocess for a time budget (KCOORD_FUZZ_SECONDS, 60 by default) on a copy of the
  corpus; a crash, a timeout or an out-of-memory fails the test with the input and the end of the fuzzer's log.
  A longer run is marked slow; `make fuzz` runs longer still and merges what it finds into the corpus.
- Open bugs the fuzzer found (tests/fuzz/crashes/) still reproduce; the day one is fixed its test says so.
- `kcoord serve` under an address-space limit takes the corpus and Hypothesis-made frames over real sockets from
  several connections at once, then still answers on a fresh connection and exits 0 on SIGTERM.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import platform
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord import wire
from kcoord.client import Client

from ..fuzz import harness
from ..fuzz.plausible import KEYS, PAIRS, encoded, select
from ..support.servers import free_port, serve

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"
CORPUS = FUZZ / "corpus" / "fuzz_requests"
CRASHES = FUZZ / "crashes"
FUZZ_SECONDS = int(os.environ.get("KCOORD_FUZZ_SECONDS", "60"))
LONG_FUZZ_SECONDS = int(os.environ.get("KCOORD_FUZZ_LONG_SECONDS", "900"))
CORPUS_MAX_BYTES = 2 << 20


# ---- the corpus ----------------------------------------------------------------------------------------------------

def corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_file())


def test_the_corpus_replays_through_the_harness() -> None:
    failed = []
    for path in corpus():
        try:
            harness.TestOneInput(path.read_bytes())
        except Exception as e:  # every finding, named by its input, rather than the first
            failed.append(f"{path.name}: {type(e).__name__}: {e}")
    assert not failed, f"{len(failed)} corpus inputs fail:\n" + "\n".join(failed)


def test_the_corpus_holds_a_valid_request_for_every_api_and_version() -> None:
    files = {p.name for p in corpus()}
    missing, invalid = [], []
    for key, version in PAIRS:
        prefix = f"seed-api{key:04d}-v{version:02d}-"
        names = sorted(n for n in files if n.startswith(prefix))
        if not names:
            missing.append(f"{key} v{version}")
            continue
        data = (CORPUS / names[0]).read_bytes()
        # variant, REQUEST op (kind 0), key and version bytes, body length, body
        (n,) = struct.unpack_from(">H", data, 4)
        if data[1] & 7 != 0 or select(data[2], data[3]) != (key, version) or len(data) != 6 + n:
            invalid.append(f"{names[0]}: not one REQUEST for API {key} v{version}")
            continue
        try:
            wire.REQUEST_TYPES[key].decode(data[6:], version)
        except wire.DecodeError as e:
            invalid.append(f"{names[0]}: {e}")
    assert not missing, f"no seed for {missing}: run `python -m tests.fuzz.make_seeds`"
    assert not invalid, invalid
    total = sum(p.stat().st_size for p in corpus())
    assert total < CORPUS_MAX_BYTES, f"the corpus is {total} bytes: minimize it (`make fuzz` merges with -set_cover_merge=1)"


def test_open_bugs_still_reproduce(monkeypatch) -> None:
    """Each input in tests/fuzz/crashes/ is an open bug (its README says which); strictly replayed it still fails
    with its own finding. When one is fixed this fails: drop its KNOWN_OPEN line in harness.py and move the input
    into the corpus as a regression seed."""
    crashes = {p.name: p for p in CRASHES.glob("crash-*")}
    assert set(crashes) == set(harness.KNOWN_OPEN.values()), "tests/fuzz/crashes and harness.KNOWN_OPEN disagree"
    monkeypatch.setattr(harness, "STRICT", True)
    fixed = []
    for name, path in sorted(crashes.items()):
        try:
            harness.TestOneInput(path.read_bytes())
        except Exception as e:
            assert harness.known_open(e) == name, f"{name} fails otherwise than recorded: {e}"
        else:
            fixed.append(name)
    assert not fixed, f"fixed (move them to the corpus, drop their KNOWN_OPEN lines): {fixed}"


# ---- the fuzzer ----------------------------------------------------------------------------------------------------

def run_fuzzer(tmp_path: Path, seconds: int, capsys) -> None:
    if importlib.util.find_spec("atheris") is None:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail("atheris is a test dependency (pyproject's test extra): `make test` installs it")
        pytest.skip("atheris has no wheel for this platform (manylinux x86-64 only)")
    work = tmp_path / "corpus"
    artifacts = tmp_path / "artifacts"
    shutil.copytree(CORPUS, work)  # the fuzzer writes what it finds into its corpus: never into the tree's
    artifacts.mkdir()
    log_path = tmp_path / "fuzz.log"
    cmd = [sys.executable, "-m", "tests.fuzz.fuzz_requests", f"-max_total_time={seconds}", "-rss_limit_mb=2048",
           "-timeout=30", "-max_len=8192", "-print_final_stats=1", f"-artifact_prefix={artifacts}/", str(work)]
    with open(log_path, "wb") as log:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=seconds + 300,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
    text = log_path.read_text(errors="replace")
    lines = text.splitlines()
    cov = [ln for ln in lines if " cov: " in ln]
    stats = [ln for ln in lines if ln.startswith("stat::")]
    with capsys.disabled():  # in the CI log whatever the outcome
        print(f"\nfuzz_requests, {seconds} s: " + (cov[-1] if cov else "no coverage line"))
        print("\n".join(stats))
    # slow-unit-*: an input that took libFuzzer's -report_slow_units (10 s of wall clock; the harness's watchdog
    # reports 3 s of CPU as a hang, so these are a loaded machine's, not findings)
    found = sorted(f for f in artifacts.iterdir() if not f.name.startswith("slow-unit-"))
    if proc.returncode != 0 or found:
        report = [f"the fuzzer exited {proc.returncode}; its log: {log_path}"]
        for f in found:
            data = f.read_bytes()
            report.append(f"input {f} ({len(data)} bytes), base64: {base64.b64encode(data[:4096]).decode()}")
        report.append("reproduce: python -m tests.fuzz.fuzz_requests FILE; then keep it under tests/fuzz/crashes/")
        pytest.fail("\n".join(report + ["--- end of the fuzzer's log ---", *lines[-60:]]), pytrace=False)
    done = re.search(r"Done (\d+) runs", text)
    assert done and int(done.group(1)) > len(corpus()), f"the fuzzer did not get past the corpus:\n{text[-3000:]}"


def test_fuzzer_finds_nothing_within_its_budget(tmp_path, capsys) -> None:
    run_fuzzer(tmp_path, FUZZ_SECONDS, capsys)


@pytest.mark.slow
def test_fuzzer_finds_nothing_in_a_long_run(tmp_path, capsys) -> None:
    run_fuzzer(tmp_path, LONG_FUZZ_SECONDS, capsys)


# ---- the real server under a resource limit ----------------------------------------------------------------------

# An idle `kcoord serve` (uvloop, numpy, re2 loaded; 6 threads) measures VmSize ~260 MiB, VmPeak ~325 MiB and
# VmRSS ~48 MiB on x86-64 Linux. 1 GiB of address space leaves it ~700 MiB for its work: ample for all the test
# sends, and far below what a server that allocated by what a request claims (a 100 MiB frame prefix per
# connection, a topic of 2^31 partitions) would reach.
ADDRESS_SPACE_LIMIT = 1 << 30
CONNECTIONS = 8


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def exchange(port: int, data: bytes) -> None:
    """Send a client's bytes, close the sending side, and read what comes back until the server closes: response
    frames, each size prefix in range (the last may be cut short: a connection the server aborts on a bad size
    prefix loses what it had not sent yet; the in-process harness checks the framing to the byte)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)  # the server closes its side when it reads the end of the stream
        except (BrokenPipeError, ConnectionResetError):
            return  # closed on a bad frame before it had it all
        got = bytearray()
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            return  # closed with unread input: the kernel resets; what was in flight is lost
    pos = 0
    while len(got) - pos >= 4:
        (size,) = struct.unpack_from(">i", got, pos)
        assert 4 <= size < 1 << 26, f"a response frame of size {size}"
        pos += 4 + size


def at_once(port: int, streams: list[bytes]) -> None:
    """Each stream on its own connection, CONNECTIONS at a time; the first failure is raised."""
    todo = list(streams)
    lock = threading.Lock()
    failed: list[bool] = []

    def worker() -> None:
        while True:
            with lock:
                if not todo or failed:
                    return
                data = todo.pop()
            try:
                exchange(port, data)
            except BaseException:
                failed.append(True)  # the other workers stop taking streams
                raise

    at_once_calls([worker] * CONNECTIONS)


def frame(key: int, version: int, body: bytes, corr: int = 1) -> bytes:
    hv = wire.request_header_version(key, version)
    header = wire.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=corr,
                                client_id="storm").encode(hv if hv >= 0 else 1)
    return struct.pack(">i", len(header) + len(body)) + header + body


def mutated(pair: tuple[int, int], edits: list[tuple[int, int]]) -> bytes:
    key, version = pair
    body = bytearray(encoded(key, version))
    for pos, val in edits:
        if body:
            body[pos % len(body)] ^= val
    return frame(key, version, bytes(body))


FRAMES = st.one_of(
    st.builds(mutated, st.sampled_from(PAIRS), st.lists(st.tuples(st.integers(0, 4095), st.integers(1, 255)),
                                                        max_size=3)),
    st.builds(frame, st.sampled_from([*KEYS, 7, 999, -1, 2000]), st.integers(-1, 20), st.binary(max_size=200)),
    st.binary(max_size=64),  # raw bytes: the framing is theirs
    st.sampled_from([b"\xff\xff\xff\xfe", b"\x7f\xff\xff\xff", b"\x06\x40\x00\x00" + b"\x00" * 1000]),
)


def server_errors(log: str) -> list[str]:
    """The ERROR and CRITICAL entries of the server's log (each with its traceback)."""
    entries = re.split(r"^(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )", log, flags=re.M)
    return [e for e in entries if re.match(r"\S+ \S+ (ERROR|CRITICAL) ", e)]


def test_server_under_an_address_space_limit_survives_fuzzed_traffic(tmp_path, capsys) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    srv = serve(port, log, "--data-dir", str(tmp_path / "data"), "--topic", "t:4", "--topic", "u:2",
                "--set", "store.fsync=off", "--set", "group.initial.rebalance.delay.ms=0",
                "--set", f"group.coordinator.rebalance.protocols={harness.ALL_PROTOCOLS}",
                preexec_fn=limit_address_space)
    try:
        limits = Path(f"/proc/{srv.proc.pid}/limits").read_text()
        assert re.search(rf"^Max address space\s+{ADDRESS_SPACE_LIMIT}\s+{ADDRESS_SPACE_LIMIT}\s", limits, re.M), limits
        # the corpus, as the clients of the in-process runs sent it
        streams = [s for path in corpus() for s in harness.client_streams(path.read_bytes())]
        at_once(port, streams)
        srv.check_alive()

        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(st.lists(st.lists(FRAMES, min_size=1, max_size=6).map(b"".join), min_size=1, max_size=CONNECTIONS))
        def storm(conns: list[bytes]) -> None:
            at_once(port, conns)
            srv.check_alive()

        storm()
        with Client(srv.bootstrap, timeout=10) as c:
            versions = c.call(18, 3, wire.ApiVersionsRequest(client_software_name="kcoord-test",
                                                             client_software_version="1"))
            assert versions.error_code == 0 and {18, 10, 11, 68} <= {k.api_key for k in versions.api_keys}
            found = c.call(10, 4, wire.FindCoordinatorRequest(key_type=0, coordinator_keys=["after-the-storm"]))
            assert [(x.key, x.error_code, x.port) for x in found.coordinators] == [("after-the-storm", 0, port)]
        status = Path(f"/proc/{srv.proc.pid}/status").read_text()
        memory = {k: v.strip() for k, v in (ln.split(":", 1) for ln in status.splitlines())
                  if k in ("VmPeak", "VmSize", "VmHWM", "VmRSS")}
        with capsys.disabled():
            print(f"\nkcoord serve under RLIMIT_AS={ADDRESS_SPACE_LIMIT >> 20} MiB after {len(streams)} corpus "
                  f"streams and the Hypothesis storm: {memory}")
    finally:
        srv.proc.terminate()
        rc = srv.proc.wait(timeout=30)
    assert rc == 0, f"kcoord serve exited {rc} on SIGTERM:\n{srv.log_tail()}"
    text = log.read_text(errors="replace")
    assert "MemoryError" not in text, srv.log_tail(60)
    unknown = [e for e in server_errors(text) if not any(p in e for p in harness.KNOWN_OPEN)]
    assert not unknown, "the server logged errors:\n" + "\n".join(unknown[:5])


@pytest.mark.slow
def test_server_at_its_address_space_limit_drops_connections_not_itself(tmp_path) -> None:
    """Eight clients each declare a 100 MiB frame (socket.request.max.bytes' default, as Kafka's) and send all but
    its last MiB, and hold on: ~800 MiB the server must buffer at once, past what 1 GiB of address space leaves it.
    Allocations fail; the event loop drops the connections whose buffers could not grow, and the server goes on
    serving the others. (Nothing bounds the bytes all connections together may hold, as Kafka's
    queued.max.request.bytes does: without a limit this memory is simply taken.)"""
    port = free_port()
    srv = serve(port, tmp_path / "serve.log", preexec_fn=limit_address_space)
    claimed = 100 << 20
    together = threading.Barrier(CONNECTIONS, timeout=120)
    dropped: list[bool] = []
    try:
        def hog() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                try:
                    s.sendall(struct.pack(">i", claimed))
                    for _ in range(claimed // (1 << 20) - 1):
                        s.sendall(bytes(1 << 20))
                    dropped.append(False)
                except (BrokenPipeError, ConnectionResetError):
                    dropped.append(True)
                together.wait()  # every connection's bytes are in (or it is gone)
                with Client(srv.bootstrap, timeout=30) as c:  # served meanwhile
                    assert c.call(18, 0, wire.ApiVersionsRequest()).error_code == 0
                together.wait()

        at_once_calls([hog] * CONNECTIONS)
        srv.check_alive()
        assert any(dropped), "the limit was never reached: nothing to learn here"
        with Client(srv.bootstrap, timeout=10) as c:
            assert c.call(18, 0, wire.ApiVersionsRequest()).error_code == 0
    finally:
        srv.proc.terminate()
        rc = srv.proc.wait(timeout=30)
    assert rc == 0, srv.log_tail()


def at_once_calls(calls) -> None:
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            fn()
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
