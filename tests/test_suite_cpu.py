"""The CPU report plugin (tests/suite_cpu.py): a line per test, its children's CPU counted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


@pytest.mark.slow
def test_each_test_gets_a_line_with_the_cpu_of_its_children(tmp_path: Path) -> None:
    (tmp_path / "test_spin.py").write_text(
        "import subprocess, sys\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'], check=True)\n"
        "def test_nothing():\n"
        "    pass\n"
    )
    report = tmp_path / "report"
    report.mkdir()
    env = {**os.environ, "CRONWHEEL_TEST_CPU_REPORT": str(report), "PYTHONPATH": str(TESTS)}
    env.pop("PYTEST_XDIST_WORKER", None)
    command = [sys.executable, "-m", "pytest", "-p", "suite_cpu", "-p", "no:cacheprovider", "-q"]
    ran = subprocess.run(
        [*command, "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = [line.split("\t") for line in (report / "main.tsv").read_text().splitlines()]
    rows = {fields[4].rsplit("::", 1)[1]: [float(value) for value in fields[:4]] for fields in lines}
    assert set(rows) == {"test_child", "test_nothing"}
    total, own, children, wall = rows["test_child"]
    assert children > 0.01
    assert abs(total - own - children) < 0.011
    assert wall >= children / 4
    assert rows["test_nothing"][2] == 0.0
