"""`python -m tests.conformance [FILTER...]`: run the PRISM suite (the cases
whose id contains one of the FILTERs, e.g. `functionality/verify/ctl`) and
print `N passed, N failed, N skipped`, with the reason for each failure and
skip, a summary per folder and the number of skips per category."""

import collections
import pathlib
import sys


# `corpus` lives in tests/ (pytest puts it on the path; `python -m` does not).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from .cases import all_cases, run_case  # noqa: E402
from .suite import category  # noqa: E402


def _folder(case_id: str) -> str:
    """`functionality/verify/dtmcs/x.pm.props:3` → `functionality/verify/
    dtmcs`, `pmc/lec3.pm.props:2` → `pmc`."""
    parts = pathlib.PurePosixPath(case_id.split(":")[0]).parent.parts
    return "/".join(parts[:3] if parts[:1] == ("functionality",) else parts[:1])


def main(argv: list[str]) -> int:
    cases = [c for c in all_cases() if not argv or any(a in c.id for a in argv)]
    counts = collections.Counter()
    per_dir = collections.defaultdict(collections.Counter)
    skips = collections.Counter()
    for case in cases:
        outcome, detail = ("skip", case.skip) if case.skip else run_case(case)
        counts[outcome] += 1
        if outcome == "pass" and detail.startswith("loose"):
            counts["loose"] += 1
        per_dir[_folder(case.id)][outcome] += 1
        if outcome == "skip":
            skips[category(detail)] += 1
        if outcome != "pass":
            lines = detail.strip().splitlines() or [""]
            # a traceback ends with the exception; a JaxmcError starts with
            # its location and message
            first = lines[-1] if detail.startswith("internal error") else lines[0]
            print(f"{outcome.upper():5} {case.id}: {first[:200]}")
    print()
    for d, c in sorted(per_dir.items()):
        print(
            f"{d:45} {c['pass']:4} passed, {c['fail']:4} failed, {c['skip']:4} skipped"
        )
    print(
        f"({counts['loose']} of the passes are within PRISM's test tolerance "
        "1e-5 but not 1e-6)"
    )
    print("skipped, by category:")
    for cat, n in skips.most_common():
        print(f"  {n:5}  {cat}")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
