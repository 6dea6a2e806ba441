"""`python -m tests.conformance [FOLDER...]`: run the PRISM suite and print
`N passed, N failed, N skipped`, with the reason for each failure and skip."""

import collections
import pathlib
import sys


# `corpus` lives in tests/ (pytest puts it on the path; `python -m` does not).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from .cases import all_cases, run_case  # noqa: E402


def main(argv: list[str]) -> int:
    cases = [c for c in all_cases() if not argv or any(a in c.id for a in argv)]
    counts = collections.Counter()
    per_dir = collections.defaultdict(collections.Counter)
    for case in cases:
        outcome, detail = ("skip", case.skip) if case.skip else run_case(case)
        counts[outcome] += 1
        if outcome == "pass" and detail.startswith("loose"):
            counts["loose"] += 1
        per_dir[case.id.split("/")[0] if not case.id.startswith("functionality") else "/".join(case.id.split("/")[:3])][outcome] += 1
        if outcome != "pass":
            first = detail.strip().splitlines()[-1] if detail.strip() else ""
            print(f"{outcome.upper():5} {case.id}: {first[:200]}")
    print()
    for d, c in sorted(per_dir.items()):
        print(f"{d:45} {c['pass']:4} passed, {c['fail']:4} failed, {c['skip']:4} skipped")
    print(f"({counts['loose']} of the passes are within PRISM's test tolerance "
          "1e-5 but not 1e-6)")
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
