"""The inner loop's size for property tests: `make unit` sets KCOORD_HYPOTHESIS=quick, and a test's own example
count (`@settings(max_examples=examples(N))`) is then a tenth of N (at least 10); `make test` and CI run N."""

from __future__ import annotations

import os

QUICK = os.environ.get("KCOORD_HYPOTHESIS") == "quick"


def examples(n: int) -> int:
    return max(10, n // 10) if QUICK else n
