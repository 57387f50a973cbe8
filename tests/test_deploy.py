"""What ships for Prometheus and Grafana holds: the alert rules pass ``promtool check rules`` and
their unit tests (``promtool test rules``), every alert is tested both ways, the dashboard loads,
matches its schema, has unique ids, and every expression of either is valid PromQL naming only
metrics cronwheel exports (read from its registry); docs/operations.md's metrics table is the
registry's.

promtool comes from Debian's ``prometheus`` package (``scripts/promtool`` installs it;
``scripts/test`` exports ``PROMTOOL``). Without it the tests are skipped locally and fail when
backends are required (``scripts/test``, CI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml

from cronwheel.node.metrics_catalog import markdown_table, scraped_names

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "cronwheel.json"
DASHBOARD_SCHEMA = Path(__file__).resolve().parent / "grafana_dashboard.schema.json"
OPERATIONS = ROOT / "docs" / "operations.md"
FOREIGN = {"up"}  # Prometheus' own series the rules and the dashboard may read
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if found:
        return found
    message = "promtool not found (scripts/promtool installs Debian's prometheus package)"
    if os.environ.get("CI") or os.environ.get("CRONWHEEL_TEST_REQUIRE_BACKENDS"):
        pytest.fail(message)
    pytest.skip(message)


def run_promtool(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panel_expressions() -> list[tuple[str, str]]:
    """(panel title, expression) of every query of the dashboard."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def metric_names(expression: str) -> set[str]:
    """The series an expression reads: cronwheel_* identifiers, and Prometheus' own."""
    found = set(re.findall(r"\bcronwheel_[a-z0-9_]+\b", expression))
    found |= {name for name in FOREIGN if re.search(rf"\b{name}\s*[{{\[]", expression)}
    return found


# -- alert rules ----------------------------------------------------------------------------------


def test_the_alert_rules_pass_promtool_check() -> None:
    checked = run_promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_the_alert_rules_pass_their_unit_tests() -> None:
    tested = run_promtool("test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_a_broken_rule_fails_its_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: an SLO threshold of 5 s instead of 1 s is caught."""
    text = RULES.read_text()
    broken = text.replace("[10m]))) > 1", "[10m]))) > 5")
    assert broken != text
    (tmp_path / "alerts.yml").write_text(broken)
    shutil.copy(RULE_TESTS, tmp_path / "alerts_test.yml")
    tested = run_promtool("test", "rules", tmp_path / "alerts_test.yml")
    assert tested.returncode != 0
    assert "CronwheelFireLatenessSLOBreached" in tested.stdout + tested.stderr


def test_every_alert_is_tested_firing_and_silent() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]
    for rule in rules():
        name = rule["alert"]
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"{name} is never tested firing"
        assert any(not case["exp_alerts"] for case in mine), f"{name} is never tested silent"


def test_the_alert_rules_name_only_exported_metrics() -> None:
    exported = scraped_names() | FOREIGN
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        assert names <= exported, (rule["alert"], names - exported)


# -- dashboard ------------------------------------------------------------------------------------


def test_the_dashboard_matches_its_schema() -> None:
    schema = json.loads(DASHBOARD_SCHEMA.read_text())
    errors = [error.message for error in jsonschema_rs.validator_for(schema).iter_errors(dashboard())]
    assert errors == []


def test_the_dashboard_schema_refuses_what_grafana_would() -> None:
    """The schema check can fail: a panel without a position or a query without an expression."""
    validator = jsonschema_rs.validator_for(json.loads(DASHBOARD_SCHEMA.read_text()))
    broken = dashboard()
    del broken["panels"][1]["gridPos"]
    del broken["panels"][2]["targets"][0]["expr"]
    assert len(list(validator.iter_errors(broken))) == 2


def test_the_dashboard_ids_are_unique() -> None:
    loaded = dashboard()
    assert loaded["uid"] == "cronwheel-overview"
    ids = [panel["id"] for panel in loaded["panels"]]
    assert len(ids) == len(set(ids))
    for panel in loaded["panels"]:
        ref_ids = [target["refId"] for target in panel.get("targets", [])]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_the_dashboard_shows_what_operators_look_at() -> None:
    names = set().union(*(metric_names(expression) for _, expression in panel_expressions()))
    for wanted in (
        "cronwheel_fire_lateness_seconds_bucket",
        "cronwheel_start_lateness_seconds_bucket",
        "cronwheel_runs_finished_total",
        "cronwheel_queue_depth",
        "cronwheel_queue_lag_seconds",
        "cronwheel_queue_pending",
        "cronwheel_shards_owned",
        "cronwheel_leader",
        "cronwheel_watchdog",
        "cronwheel_dead_lettered_total",
        "cronwheel_notifications_sent_total",
        "cronwheel_notifications_failed_total",
        "cronwheel_api_requests_total",
    ):
        assert wanted in names


def test_every_dashboard_expression_names_only_exported_metrics() -> None:
    exported = scraped_names() | FOREIGN
    for title, expression in panel_expressions():
        names = metric_names(expression)
        assert names, title
        assert names <= exported, (title, names - exported)


def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each expression (Grafana's variables replaced) as a recording rule."""
    recorded = []
    for index, (_, expression) in enumerate(panel_expressions()):
        promql = expression
        for variable, value in GRAFANA_VARIABLES.items():
            promql = promql.replace(variable, value)
        recorded.append({"record": f"cronwheel:dashboard_check_{index}", "expr": promql})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))
    checked = run_promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# -- the docs -------------------------------------------------------------------------------------


def test_the_docs_list_every_metric_as_the_registry_has_it() -> None:
    text = OPERATIONS.read_text()
    start, end = "<!-- metrics-table:start -->\n", "<!-- metrics-table:end -->"
    assert start in text
    assert end in text
    documented = text.split(start, 1)[1].split(end, 1)[0]
    assert documented == markdown_table(), "run scripts/metrics-table"


def test_the_docs_say_what_to_do_for_every_alert() -> None:
    text = OPERATIONS.read_text()
    for rule in rules():
        assert f"`{rule['alert']}`" in text, rule["alert"]
