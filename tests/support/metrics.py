"""Reading a server's Prometheus endpoint (`/metrics` over HTTP): one scrape, one metric's value, a scrape once a
condition holds. Used by the server tests that check a metric moved (test_metrics, test_store_full,
test_connection_limits)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .waits import wait_for


def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, keyed by (sample name, sorted labels)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 if none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def scrape_until(port: int, pred, what: str) -> dict:
    """The first scrape for which `pred(samples)` holds."""
    got: list[dict] = []

    def check() -> bool:
        got[:] = [scrape(port)]
        return bool(pred(got[0]))

    wait_for(check, what)
    return got[0]
