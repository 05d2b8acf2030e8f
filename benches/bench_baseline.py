"""The hot path against a baseline commit, in the same run: old/new ratios (> 1 means faster now).

The baseline (KCOORD_BASELINE, default a195b2b: the tree before the group-type seams) is built once from
`git archive` with pip into .bench-baseline/<commit>/ (ignored by git; the first run builds it, a few minutes).
Both sides are then measured alternately, each in its own process, by the same code:
- in-process (benches/hotpath_probe.py): a heartbeat of a 10,000-member Stable group, decode -> coordinator ->
  encode, and a full 10,000-member rebalance (all join, the leader syncs, the followers sync); and where both
  sides have them, a consumer group's heartbeat (10,000 members) and a connect group's (1,000 workers);
- over loopback: `kcoord serve` of each side, 10,000 static members formed over 100 connections, then heartbeats
  as fast as the server answers (benches/loadgen.py), in heartbeats per second.

Target (the seams issue): no regression, i.e. every old/new ratio at least 0.9 (0.85 over loopback, where two
processes share two cores). Marked slow. Run: `python -m pytest benches/bench_baseline.py -m slow -s`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from .loadgen import LARGE_CLASSIC_GROUPS, ServerProcess, form_group, heartbeat_load

ROOT = Path(__file__).resolve().parents[1]
BASELINE = os.environ.get("KCOORD_BASELINE", "a195b2b")
PROBE = Path(__file__).with_name("hotpath_probe.py")


def baseline_build(commit: str) -> str:
    """A directory holding kcoord as built from `commit` (built on first use, then reused)."""
    full = subprocess.run(["git", "rev-parse", commit], cwd=ROOT, capture_output=True, text=True, check=True)
    sha = full.stdout.strip()
    target = ROOT / ".bench-baseline" / sha
    if (target / "kcoord").is_dir() and list((target / "kcoord" / "_core").glob("_wire*.so")):
        return str(target)
    print(f"\nbuilding kcoord {sha[:12]} into {target} (once) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "src.tar"
        subprocess.run(["git", "archive", "-o", str(archive), sha], cwd=ROOT, check=True)
        src = Path(tmp) / "src"
        with tarfile.open(archive) as tf:
            tf.extractall(src, filter="data")
        if target.exists():
            shutil.rmtree(target)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                        str(src)], check=True)
    return str(target)


def probe(pythonpath: str, members: int, rounds: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    done = subprocess.run([sys.executable, str(PROBE), str(members), str(rounds)], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def loopback_rate(pythonpath: str) -> float:
    # a195b2b predates message.max.bytes (and its bound on a classic group's record); a later baseline has it
    knows = "message.max.bytes" in (Path(pythonpath) / "kcoord" / "config.py").read_text()
    large = (LARGE_CLASSIC_GROUPS,) if knows else ()
    with ServerProcess("group.initial.rebalance.delay.ms=300", *large, pythonpath=pythonpath) as srv:
        group = asyncio.run(form_group(srv.port, "load", 10_000, 100))
        return asyncio.run(heartbeat_load(srv.port, group, 100, 4.0)).rate


@pytest.mark.slow
@pytest.mark.benchmark(group="classic hot path against a baseline commit (old/new)")
def test_hot_path_against_baseline(benchmark: Any) -> None:
    old_path, new_path = baseline_build(BASELINE), str(ROOT)
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    rates: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(3):  # alternate, so a slow moment of the machine falls on both sides; keep each side's best
        for side, path in (("old", old_path), ("new", new_path)):
            r = probe(path, 10_000, 5)
            assert Path(r["kcoord"]).resolve().is_relative_to(Path(path).resolve()), r["kcoord"]
            runs[side].append(r)
    for i in range(3):  # loopback varies most: three alternations, order swapped each time
        for side, path in (("old", old_path), ("new", new_path)) if i % 2 == 0 else (("new", new_path),
                                                                                      ("old", old_path)):
            rates[side].append(loopback_rate(path))
    kinds = ("heartbeat_us", "rebalance_ms", "consumer_heartbeat_us", "connect_heartbeat_us")
    best = {side: {k: min(r[f"{k}_best"] for r in rs) for k in kinds if all(f"{k}_best" in r for r in rs)}
            for side, rs in runs.items()}
    rate = {side: sorted(v)[1] for side, v in rates.items()}  # the median of three
    rows = [
        ("heartbeat in-process, 10,000 members (µs per call, best round of 20,000)", best["old"]["heartbeat_us"],
         best["new"]["heartbeat_us"], best["old"]["heartbeat_us"] / best["new"]["heartbeat_us"]),
        ("full rebalance in-process, 10,000 members (ms, best of 15 runs)", best["old"]["rebalance_ms"],
         best["new"]["rebalance_ms"], best["old"]["rebalance_ms"] / best["new"]["rebalance_ms"]),
        ("heartbeats/s over loopback, 100 connections x 10,000 members (median of 3)", rate["old"], rate["new"],
         rate["new"] / rate["old"]),
    ]
    for kind, name in (("consumer_heartbeat_us", "consumer heartbeat in-process, 10,000 members (µs, best round)"),
                       ("connect_heartbeat_us", "connect heartbeat in-process, 1,000 workers (µs, best round)")):
        if kind in best["old"] and kind in best["new"]:  # a baseline before that group type has none
            rows.append((name, best["old"][kind], best["new"][kind], best["old"][kind] / best["new"][kind]))
    print(f"\nclassic hot path: baseline {BASELINE} (old) against this tree (new); ratio old/new, > 1 is faster now")
    for name, old, new, ratio in rows:
        print(f"  {name:<78} old {old:>10.2f}  new {new:>10.2f}  ratio {ratio:.3f}")
    benchmark.extra_info.update({name: {"old": old, "new": new, "ratio": ratio} for name, old, new, ratio in rows})
    benchmark.pedantic(lambda: None, rounds=1)
    assert rows[0][3] >= 0.9 and rows[1][3] >= 0.9 and all(r[3] >= 0.9 for r in rows[3:]), rows
    assert rows[2][3] >= 0.85, rows


FAKE_SERVE = """import socket, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
print("serving from", __file__, file=sys.stderr, flush=True)
time.sleep(60)
"""


def test_a_server_process_runs_the_build_it_is_given(tmp_path) -> None:
    """ServerProcess(pythonpath=...) serves that build's kcoord, not the tree pytest runs in (from whose root
    `python -m kcoord.cli` would import this tree's first): a stand-in kcoord whose `cli` says where it is."""
    (tmp_path / "kcoord").mkdir()
    (tmp_path / "kcoord" / "__init__.py").write_text("")
    (tmp_path / "kcoord" / "cli.py").write_text(FAKE_SERVE)
    srv = ServerProcess(pythonpath=str(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while b"serving from" not in (log := (srv.log.seek(0), srv.log.read())[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        srv.stop()
    assert f"serving from {tmp_path / 'kcoord' / 'cli.py'}".encode() in log, log

