"""The schedule in words (:func:`cronwheel.schedule.describe.describe`).

* Exact sentences for a table of common and dialect-covering cases.
* The corpus: every expression written in tests/schedule's files that parses gives a one-line,
  non-empty sentence.
* Properties over generated expressions (the whole dialect, ``H`` included, under every DST
  option): a sentence, deterministic, ``(H)`` exactly when a field hashes, the DST policy
  mentioned exactly when it is not the schedule kind's default.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import raw_expressions, tuned

from cronwheel.schedule import ScheduleError, parse_schedule
from cronwheel.schedule.describe import describe

SENTENCES = [
    ("*/10 * * * * *", "every 10 seconds"),
    ("* * * * * *", "every second"),
    ("30 * * * * *", "every minute at second 30"),
    ("0,30 5 * * * *", "every 30 seconds during minute 5"),
    ("* * * * *", "every minute"),
    ("*/15 * * * *", "every 15 minutes"),
    ("0,15,30,45 * * * *", "every 15 minutes"),
    ("5/15 * * * *", "every 15 minutes from minute 5"),
    ("0-30/15 * * * *", "every 15 minutes from minute 0 through 30"),
    ("0-10 * * * *", "every minute from minute 0 through 10"),
    ("5,35 * * * *", "at minutes 5 and 35"),
    ("*/15 9-17 * * *", "every 15 minutes from 09:00 to 17:45"),
    ("*/15 */2 * * *", "every 15 minutes during every 2nd hour"),
    ("0 * * * *", "every hour"),
    ("@hourly", "every hour"),
    ("7 * * * *", "hourly at minute 7"),
    ("0 */6 * * *", "every 6 hours"),
    ("0 0,12 * * *", "every 12 hours"),
    ("30 */2 * * *", "every 2 hours from 00:30"),
    ("0 1/2 * * *", "every 2 hours from 01:00"),
    ("0 9-17 * * *", "every hour from 09:00 to 17:00"),
    ("0 9-17/2 * * *", "every 2 hours from 09:00 to 17:00"),
    ("30 2 * * *", "at 02:30 every day"),
    ("15 30 2 * * *", "at 02:30:15 every day"),
    ("*/30 0 9 * * *", "at 09:00 and 09:00:30 every day"),
    ("@daily", "at 00:00 every day"),
    ("0,30 9 * * *", "at 09:00 and 09:30 every day"),
    ("0 8,12,18 * * *", "at 08:00, 12:00 and 18:00 every day"),
    ("0 9 * * MON-FRI", "at 09:00 on Monday through Friday"),
    ("0 9 * * 1-5", "at 09:00 on Monday through Friday"),
    ("0 0 * * SAT,SUN", "at 00:00 on Saturday and Sunday"),
    ("0 0 * * 5-7", "at 00:00 on Friday through Sunday"),
    ("0 0 * * 0-3", "at 00:00 on Sunday through Wednesday"),
    ("@weekly", "at 00:00 on Sunday"),
    ("0 0 ? * MON", "at 00:00 on Monday"),
    ("0 0 L * *", "at 00:00 on the last day of the month"),
    ("0 18 LW * *", "at 18:00 on the last weekday of the month"),
    ("0 9 15W * *", "at 09:00 on the weekday nearest day 15 of the month"),
    ("0 0 L,1 * *", "at 00:00 on day 1 and the last day of the month"),
    ("0 17 * * 5L", "at 17:00 on the last Friday of the month"),
    ("0 17 * * FRIL", "at 17:00 on the last Friday of the month"),
    ("0 10 * * MON#2", "at 10:00 on the second Monday of the month"),
    ("0 0 * * 1,5L", "at 00:00 on Monday and the last Friday of the month"),
    ("@monthly", "at 00:00 on day 1 of the month"),
    ("0 0 1,15 * *", "at 00:00 on days 1 and 15 of the month"),
    ("0 0 1-20/5 * *", "at 00:00 on days 1, 6, 11 and 16 of the month"),
    ("0 0 */7 * *", "at 00:00 on every 7th day of the month"),
    ("0 0 2/3 * *", "at 00:00 on every 3rd day of the month from day 2"),
    ("@yearly", "at 00:00 on January 1"),
    ("@annually", "at 00:00 on January 1"),
    ("0 0 1 1,7 *", "at 00:00 on day 1 of the month in January and July"),
    ("0 0 * 1-3 *", "at 00:00 every day in January through March"),
    ("0 0 * */3 *", "at 00:00 every day in January, April, July and October"),
    ("0 0 1 * MON", "at 00:00 on day 1 of the month or on Monday"),
    ("0 0 */2 * MON", "at 00:00 on every 2nd day of the month if it is a Monday"),
    ("0 0 1-31 * MON", "at 00:00 every day"),  # either rule with a whole month: every day
]


@pytest.mark.parametrize(("expression", "sentence"), SENTENCES)
def test_sentence(expression: str, sentence: str) -> None:
    assert describe(parse_schedule(expression, "Europe/Berlin")) == sentence


@pytest.mark.parametrize(
    ("expression", "sentence"),
    [
        ("H * * * *", "hourly at minute 17 (H)"),
        ("H H * * *", "at 01:17 every day (H)"),
        ("H/15 * * * *", "every 15 minutes from minute 2 (H)"),
        ("0 0 * * H", "at 00:00 on Friday (H)"),
        ("0 0 * * THU", "at 00:00 on Thursday"),  # a name with an H in it is no hash
    ],
)
def test_hash_reads_as_the_value_it_picked(expression: str, sentence: str) -> None:
    assert describe(parse_schedule(expression, seed="abc")) == sentence


@pytest.mark.parametrize(
    ("expression", "options", "sentence"),
    [
        ("30 2 * * *", {"dst_gap": "shift", "dst_fold": "first"}, "at 02:30 every day"),
        ("*/5 * * * *", {"dst_gap": "skip", "dst_fold": "both"}, "every 5 minutes"),
        ("30 2 * * *", {"dst_gap": "skip"}, "at 02:30 every day; not run when DST skips its time"),
        (
            "30 1 * * *",
            {"dst_fold": "both"},
            "at 01:30 every day; run twice when DST repeats its time",
        ),
        (
            "*/5 * * * *",
            {"dst_gap": "shift", "dst_fold": "last"},
            "every 5 minutes; run once when a DST gap ends if it skips its time and run on the "
            "second pass only when DST repeats its time",
        ),
    ],
)
def test_dst_policy_is_mentioned_only_when_not_the_default(
    expression: str, options: dict[str, str], sentence: str
) -> None:
    assert describe(parse_schedule(expression, "America/New_York", **options)) == sentence  # type: ignore[arg-type]


def _corpus() -> list[str]:
    """Every string literal of tests/schedule's files that parses as a schedule."""
    found: set[str] = set()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
                try:
                    parse_schedule(node.value)
                except ScheduleError:
                    continue
                found.add(node.value)
    return sorted(found)


CORPUS = _corpus()


def test_the_corpus_is_the_test_suites_expressions() -> None:
    assert len(CORPUS) > 150  # the files hold about 190; a broken walk would find few
    assert {"30 2 * * *", "0 17 * * 5L", "@daily"} <= set(CORPUS)


@pytest.mark.parametrize("expression", CORPUS)
def test_every_corpus_expression_reads_as_a_sentence(expression: str) -> None:
    for seed in (None, "job-1"):
        sentence = describe(parse_schedule(expression, "America/New_York", seed=seed))
        assert_one_line(sentence)


def assert_one_line(sentence: str) -> None:
    assert sentence
    assert sentence == sentence.strip()
    assert "  " not in sentence
    assert "\n" not in sentence


def _has_hash(expression: str) -> bool:
    text = expression.strip()
    return not text.startswith("@") and any(
        element.upper().startswith("H") for field in text.split() for element in field.split(",")
    )


@tuned(400)
@given(
    expression=raw_expressions(hashed=True),
    seed=st.sampled_from((None, "j1", "another-job")),
    gap=st.sampled_from((None, "shift", "skip")),
    fold=st.sampled_from((None, "first", "last", "both")),
)
def test_any_schedule_reads_as_one_sentence(
    expression: str, seed: str | None, gap: str | None, fold: str | None
) -> None:
    try:
        schedule = parse_schedule(expression, "Europe/Berlin", dst_gap=gap, dst_fold=fold, seed=seed)  # type: ignore[arg-type]
    except ScheduleError:
        return  # one that never fires
    sentence = describe(schedule)
    assert_one_line(sentence)
    assert sentence == describe(schedule)
    assert sentence.split(";")[0].endswith(" (H)") == _has_hash(expression)
    defaults = ("skip", "both") if schedule.wildcard else ("shift", "first")
    assert (";" in sentence) == ((schedule.dst_gap, schedule.dst_fold) != defaults)
