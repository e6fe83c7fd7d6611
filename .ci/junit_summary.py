"""Add up pytest junit reports into one closing line, and fail where browser tests were skipped.

Usage: python .ci/junit_summary.py REPORT.xml [REPORT.xml ...] [--no-skips-in REPORT.xml] [--browser-module PREFIX]
Exits 1 when a report named by --no-skips-in ran no test or skipped any, when the tests of modules starting with
PREFIX (the browser tests, e.g. tests.test_browser_) are missing or any of them was skipped, or when any test failed.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter


def count(path: str) -> Counter:
    """tests / failures / errors / skipped summed over the report's test suites."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"error: no readable pytest report at {path} ({e}); did pytest crash before writing it?")
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    totals: Counter = Counter()
    for suite in suites:
        for key in ("tests", "failures", "errors", "skipped"):
            totals[key] += int(suite.get(key, 0))
    return totals


def skipped_names(path: str, prefix: str = "") -> list[str]:
    """Skipped tests of the report (of modules whose classname starts with `prefix`), with their reasons."""
    root = ET.parse(path).getroot()
    names = []
    for case in root.iter("testcase"):
        skip = case.find("skipped")
        if skip is not None and case.get("classname", "").startswith(prefix):
            names.append(f"{case.get('classname')}::{case.get('name')}: {skip.get('message', '')}")
    return names


def module_count(paths: list[str], prefix: str) -> int:
    """How many test cases of modules whose classname starts with `prefix` the reports hold."""
    return sum(
        case.get("classname", "").startswith(prefix)
        for path in paths
        for case in ET.parse(path).getroot().iter("testcase")
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--no-skips-in", action="append", default=[], metavar="REPORT")
    ap.add_argument("--browser-module", default=None, metavar="PREFIX")
    args = ap.parse_args()
    totals: Counter = Counter()
    for path in args.reports:
        totals += count(path)
    ok = True
    for path in args.no_skips_in:
        c = count(path)
        if c["tests"] == 0:
            print(f"error: {path} ran no test; the browser tests must run, not be deselected.", file=sys.stderr)
            ok = False
        if c["skipped"]:
            print(f"error: {c['skipped']} browser test(s) skipped in {path}; they must run:", file=sys.stderr)
            for name in skipped_names(path):
                print(f"  {name}", file=sys.stderr)
            ok = False
    if args.browser_module is not None:
        ran = module_count(args.reports, args.browser_module)
        skipped = [name for path in args.reports for name in skipped_names(path, args.browser_module)]
        if ran == 0:
            print(
                f"error: no {args.browser_module}* test ran; the browser tests must run, not be deselected.",
                file=sys.stderr,
            )
            ok = False
        if skipped:
            print(f"error: {len(skipped)} browser test(s) skipped; they must run:", file=sys.stderr)
            for name in skipped:
                print(f"  {name}", file=sys.stderr)
            ok = False
        print(f"browser tests: {ran - len(skipped)} ran")
    failed = totals["failures"] + totals["errors"]
    passed = totals["tests"] - failed - totals["skipped"]
    ok = ok and failed == 0
    print(f"tests: {passed} passed, {failed} failed, {totals['skipped']} skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
