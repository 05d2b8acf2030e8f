"""The score of the last `mutmut run` (make mutate), per module, and every mutant that was not killed.

    python -m tests.support.mutation_report [--diff]     # --diff: each survivor's change (`mutmut show NAME`)

Killed counts mutants a test failed on (a timeout counts as killed: the mutant made a test hang); the score is
killed over every mutant run or left without a test. "no tests" is a mutant in a function no selected test reaches
in-process (mutmut traces the test process only: code reached through a `kcoord serve` subprocess lands here).

Every mutant not killed is either listed in tests/support/mutation_survivors.txt (`NAME  reason`, one per line: why no
test can or should tell it apart) or printed as unaccounted, which makes the exit status 1.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

MUTMUT = str(Path(sys.executable).with_name("mutmut"))
KILLED = {"killed", "timeout"}
SURVIVORS = Path(__file__).with_name("mutation_survivors.txt")


def accounted() -> dict[str, str]:
    """tests/support/mutation_survivors.txt: mutant name -> the reason it is left alive."""
    out = {}
    for line in SURVIVORS.read_text().splitlines() if SURVIVORS.exists() else ():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.strip().partition(" ")
            out[name] = reason.strip()
    return out


def results() -> list[tuple[str, str]]:
    out = subprocess.run([MUTMUT, "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"^\s*(\S+): (.+)$", out, re.M)]


def main(argv: list[str]) -> int:
    rows = results()
    if not rows:
        print("no mutmut results: run `make mutate` first", file=sys.stderr)
        return 1
    per = collections.defaultdict(collections.Counter)
    for name, status in rows:
        module = name.split(".x_")[0].split(".xǁ")[0]
        per[module][status] += 1
    print(f"{'MODULE':<20} {'MUTANTS':>7} {'KILLED':>7} {'SURVIVED':>8} {'NO-TESTS':>8} {'SCORE':>6}")
    total = collections.Counter()
    for module, c in sorted(per.items()):
        total.update(c)
        n, killed = sum(c.values()), sum(c[s] for s in KILLED)
        print(f"{module:<20} {n:>7} {killed:>7} {c['survived']:>8} {c['no tests']:>8} {killed / n:>6.1%}")
    n, killed = sum(total.values()), sum(total[s] for s in KILLED)
    print(f"{'all':<20} {n:>7} {killed:>7} {total['survived']:>8} {total['no tests']:>8} {killed / n:>6.1%}")
    others = {s: k for s, k in total.items() if s not in KILLED | {"survived", "no tests"}}
    if others:
        print(f"other outcomes: {others}")
    reasons = accounted()
    alive = [(name, status) for name, status in rows if status not in KILLED]
    for name, status in alive:
        print(f"{status}: {name}: {reasons.get(name, 'UNACCOUNTED')}")
        if "--diff" in argv:
            print(subprocess.run([MUTMUT, "show", name], capture_output=True, text=True).stdout)
    missing = [name for name, _ in alive if name not in reasons]
    print(f"{len(alive) - len(missing)} of {len(alive)} mutants left alive are accounted for "
          f"in {SURVIVORS.name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
