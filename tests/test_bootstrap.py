"""``scripts/bootstrap`` says what it installs and how far it is, and nothing when there is nothing
to do. It runs here in a copy of the repository's layout with a lock of ten packages, and a stand-in
for Python (``PYTHON``): its ``-m venv`` makes a ``.venv`` whose python is the stand-in, and its
``-m pip install`` prints what pip prints for that lock and writes down its arguments."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BOOTSTRAP = Path(__file__).resolve().parent.parent / "scripts" / "bootstrap"
HASH = "    --hash=sha256:" + "0" * 64
LOCK = "".join(f"package{index}==1.{index} \\\n{HASH}\n    # via cronwheel\n" for index in range(9)) + (
    f"colorama==0.4.6 ; sys_platform == 'win32' \\\n{HASH}\n"
)  # ten requirements, one of them for another platform

FAKE_PYTHON = r"""#!/usr/bin/env bash
set -eu
if [ "$1 $2" = "-m venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
    exit 0
fi
[ "$1 $2 $3" = "-m pip install" ]
echo "$*" >>"$FAKE_PIP_CALLS"
lock="" previous=""
for argument in "$@"; do
    [ "$previous" != -r ] || lock="$argument"
    previous="$argument"
done
if [ -z "$lock" ]; then
    echo "Obtaining file://$PWD" && echo "Successfully installed cronwheel-0.1.0"
    exit 0
fi
echo "Looking in indexes: https://pypi.org/simple"
names=()
while read -r first rest; do
    case "$first" in
        [A-Za-z0-9]*)
            if [ "${rest:0:1}" = ";" ]; then
                echo "Ignoring ${first%%==*}: markers don't match your environment"
            else
                names+=("${first%%==*}")
                echo "Collecting $first (from -r $lock)" && echo "  Using cached ${first/==/-}.whl"
            fi ;;
    esac
done <"$lock"
if [ -n "${FAKE_PIP_ERROR:-}" ]; then
    echo "ERROR: $FAKE_PIP_ERROR" >&2
    exit 1
fi
echo "Installing collected packages: ${names[*]}"
sleep "${FAKE_PIP_INSTALL_S:-0}"
echo "Successfully installed ${names[*]}"
"""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A checkout as the bootstrap sees it: the script, a lock and pyproject.toml."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(BOOTSTRAP, tmp_path / "scripts" / "bootstrap")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "dev.lock").write_text(LOCK)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "cronwheel"\n')
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def bootstrap(clone: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHON": str(clone / "python"),
        "FAKE_PIP_CALLS": str(clone / "pip-calls"),
        **settings,
    }
    return subprocess.run(
        [clone / "scripts" / "bootstrap"], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def pip_calls(clone: Path) -> list[str]:
    calls = clone / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_a_first_run_says_what_it_installs_and_how_far_it_is(clone: Path) -> None:
    done = bootstrap(clone)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the caller's: scripts/cronwheel prints tokens there
    lines = done.stderr.splitlines()
    assert "10 locked packages from requirements/dev.lock" in lines[0]
    collected = [line for line in lines if line.startswith("cronwheel: collected ")]
    assert collected == [f"cronwheel: collected {count}/10 packages" for count in (2, 4, 6, 8, 10)]
    assert "cronwheel: installing 10 locked packages into .venv ..." in lines
    assert lines[-1].startswith("cronwheel: .venv is ready (10 packages and cronwheel, ")
    assert not any("Collecting" in line for line in lines)  # pip's own lines go to the log
    assert "Collecting package0==1.0" in (clone / ".venv" / "bootstrap.log").read_text()
    locked, editable = pip_calls(clone)
    assert "--require-hashes -r requirements/dev.lock" in locked
    assert editable.endswith("--no-deps --no-build-isolation -e .")


def test_with_nothing_to_install_it_prints_nothing_and_runs_no_pip(clone: Path) -> None:
    assert bootstrap(clone).returncode == 0
    calls = pip_calls(clone)
    again = bootstrap(clone)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert pip_calls(clone) == calls
    with (clone / "requirements" / "dev.lock").open("a") as lock:
        lock.write(f"extra==1.0 \\\n{HASH}\n")
    changed = bootstrap(clone)
    assert "11 locked packages" in changed.stderr  # a changed lock is installed again
    assert len(pip_calls(clone)) == len(calls) + 2


@pytest.mark.slow
def test_it_says_it_is_still_at_it_while_pip_is_silent(clone: Path) -> None:
    done = bootstrap(clone, CRONWHEEL_BOOTSTRAP_NOTICE_S="1", FAKE_PIP_INSTALL_S="2.5")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    installing = lines.index("cronwheel: installing 10 locked packages into .venv ...")
    still = [line for line in lines[installing:] if line.startswith("cronwheel: still ")]
    assert still, done.stderr
    installing_still = "cronwheel: still installing 10 locked packages into .venv, "
    assert all(line.startswith(installing_still) for line in still)
    assert lines[-1].startswith("cronwheel: .venv is ready")


def test_a_failing_pip_shows_its_error_and_leaves_the_next_run_to_try_again(clone: Path) -> None:
    failed = bootstrap(clone, FAKE_PIP_ERROR="THESE PACKAGES DO NOT MATCH THE HASHES")
    assert failed.returncode == 1
    assert "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES" in failed.stderr
    assert failed.stderr.splitlines()[-1] == "cronwheel: pip failed (its whole output: .venv/bootstrap.log)"
    assert not (clone / ".venv" / ".cronwheel-installed").exists()
    again = bootstrap(clone)
    assert again.returncode == 0, again.stderr
    assert "cronwheel: .venv is ready" in again.stderr
