"""Measures the hot path of whichever kcoord is first on sys.path, and prints JSON: the classic group's heartbeat
and rebalance, and the consumer and connect groups' heartbeats where the build has them.

Run by benches/bench_baseline.py once under the tree being tested and once under a baseline commit's build
(PYTHONPATH=that build), so both are measured by the same code in the same run. It uses only API that both
sides have: Coordinator.handle/poll/next_deadline, the wire codec and the group's leader and members (the group is
built by bench_coordinator's own join_requests and rebalance).

    python benches/hotpath_probe.py MEMBERS ROUNDS
"""

from __future__ import annotations

import inspect
import json
import statistics
import sys
import time

import kcoord
from kcoord import wire
from kcoord.coordinator import Coordinator

if list(inspect.signature(Coordinator.handle).parameters)[1] == "api_key":
    # A baseline from before handle took the API key from the message type (44a1fe9): give it today's call
    _handle_at = Coordinator.handle

    def _handle(self, body, version, client_id="", client_host=""):
        return _handle_at(self, type(body).API_KEY, version, body, client_id, client_host)

    Coordinator.handle = _handle  # type: ignore[method-assign]

from bench_coordinator import join_requests, rebalance  # noqa: E402  (this file's folder is first on sys.path)


def main(members: int, rounds: int) -> dict:
    reqs = join_requests(members)
    rebalance(reqs)  # warm up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        c = rebalance(reqs)
        times.append(time.perf_counter() - t0)
    g = c.groups["bench"]
    m = g.members.get(g.leader_id)
    frame = wire.encode_request(12, 4, 1, "bench", wire.HeartbeatRequest(
        group_id="bench", generation_id=1, member_id=m.member_id, group_instance_id=m.group_instance_id))[4:]
    decode, handle, encode = wire.decode_request, c.handle, wire.encode_response

    def heartbeat() -> bytes:
        header, body = decode(frame)
        return encode(12, header.request_api_version, header.correlation_id,
                      handle(body, header.request_api_version))

    assert wire.decode_response(12, 4, heartbeat()[4:])[1].error_code == 0
    per_call = []
    n = 20_000
    for _ in range(rounds * 3):
        t0 = time.perf_counter()
        for _ in range(n):
            heartbeat()
        per_call.append((time.perf_counter() - t0) / n)
    out = {"kcoord": kcoord.__file__, "rebalance_ms": statistics.median(times) * 1e3,
           "rebalance_ms_best": min(times) * 1e3, "heartbeat_us": statistics.median(per_call) * 1e6,
           "heartbeat_us_best": min(per_call) * 1e6}
    for name, measure in (("consumer", consumer_heartbeat), ("connect", connect_heartbeat)):
        try:
            median, best = measure(rounds)
        except ImportError:  # a baseline from before that group type
            continue
        out[f"{name}_heartbeat_us"], out[f"{name}_heartbeat_us_best"] = median, best
    return out


def timed(call, rounds: int, n: int = 20_000) -> tuple[float, float]:
    """(median, best) µs per call over rounds * 3 rounds of n calls."""
    per_call = []
    for _ in range(rounds * 3):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        per_call.append((time.perf_counter() - t0) / n)
    return statistics.median(per_call) * 1e6, min(per_call) * 1e6


def consumer_heartbeat(rounds: int) -> tuple[float, float]:
    """A Stable member's heartbeat in bench_consumer's 10,000-member, 100,000-partition group."""
    from bench_consumer import big_group, stable_heartbeat

    c, g, _ = big_group()
    heartbeat = stable_heartbeat(c, g)
    assert wire.decode_response(68, 1, heartbeat()[4:])[1].error_code == 0
    return timed(heartbeat, rounds)


def connect_heartbeat(rounds: int) -> tuple[float, float]:
    """A Stable worker's heartbeat in bench_connect's 1,000-worker, 100,000-task group (on a SQLite store)."""
    import tempfile

    from bench_connect import HB, big_group, stable_heartbeat

    with tempfile.TemporaryDirectory() as tmp:
        c, g = big_group(tmp)
        heartbeat = stable_heartbeat(c, g)
        assert wire.decode_response(HB, 0, heartbeat()[4:])[1].error_code == 0
        result = timed(heartbeat, rounds)
        c.store.close()
        return result


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))
