"""bench/bench_pretrained.table: issue 25's table, where a time is met as a ratio to the configured page of its own
run, and the reference revision's page (--reference) is shown beside it without a verdict of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the bench's scripts import each other by their bare names
    import bench_pretrained

    return bench_pretrained


def verdicts(printed: str) -> list[str]:
    """The last column of the printed table's rows, its header left out."""
    rows = [line for line in printed.splitlines() if line.startswith("| ")][1:]
    return [row.rsplit("|", 2)[1].strip() for row in rows]


def test_a_time_is_met_by_its_ratio_to_the_configured_page_not_by_its_seconds(bench, capsys):
    slow_day = 1.5 * bench.TARGETS_SET_ON_S  # the configured page took half as long again as when targets were set
    rows = [
        ("long text, slower in seconds than the target", 1.9 * slow_day / 1.2, 2.0, "s", slow_day, None),
        ("long text, faster in seconds than the target", 1.9, 2.0, "s", 1.0, None),
        ("peak", 2_600.0, 2_500.0, "MB", None, None),
    ]
    assert not bench.table(rows)
    printed = capsys.readouterr().out
    assert verdicts(printed) == ["yes", "NO", "NO"]  # 1.58x (2.85 s) <= 2 / 1.2; 1.9x > 1.67x; MB as they are
    assert "× configured page" in printed and "58c499e" not in printed


def test_the_reference_page_is_shown_beside_the_rows_it_was_timed_with_but_decides_nothing(bench, capsys):
    rows = [
        ("MiniLM, 512 pieces", 1.5, 1.5, "s", 1.0, 1.25),  # 1.5x this run's page: over 1.25x; 1.2x the reference's
        ("peak", 1_900.0, 2_500.0, "MB", None, None),
    ]
    assert not bench.table(rows, "58c499e")
    printed = capsys.readouterr().out
    assert "× 58c499e's page" in printed
    minilm = next(line for line in printed.splitlines() if line.startswith("| MiniLM"))
    assert "1.50×" in minilm and "1.20×" in minilm
    assert verdicts(printed) == ["NO", "yes"]


def test_a_reference_that_is_not_a_commit_is_refused_before_anything_starts(bench):
    assert bench.is_commit("HEAD")
    assert not bench.is_commit("no-such-revision")
    assert not bench.is_commit("HEAD:README.md")  # a file at a revision, not a commit
