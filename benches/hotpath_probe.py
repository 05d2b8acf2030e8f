"""Measures the classic hot path of whichever kcoord is first on sys.path, and prints JSON.

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
    return {"kcoord": kcoord.__file__, "rebalance_ms": statistics.median(times) * 1e3,
            "rebalance_ms_best": min(times) * 1e3, "heartbeat_us": statistics.median(per_call) * 1e6,
            "heartbeat_us_best": min(per_call) * 1e6}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))))
