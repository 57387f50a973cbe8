"""``scripts/bootstrap`` says what it installs and how far it is, and nothing when there is nothing
to do. It runs here in a copy of the repository's layout with a lock of ten packages, and stand-ins
for Python (``PYTHON``) and uv: Python's ``-m venv`` makes a ``.venv`` whose python is the stand-in,
its ``-m pip install`` of ``requirements/uv.lock`` puts the uv stand-in into ``.venv/bin`` (or fails
as pip does where uv has no wheel), and pip and uv print what they print for that lock and write
down their arguments."""

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
UV_LOCK = f"uv==0.13.10 \\\n{HASH}\n    # via -r requirements/uv.in\n"

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
if [ "$lock" = requirements/uv.lock ]; then
    echo "Collecting uv==0.13.10 (from -r $lock (line 1))"
    if [ -n "${FAKE_UV_NO_WHEEL:-}" ]; then
        echo "ERROR: Could not find a version that satisfies the requirement uv==0.13.10" >&2
        exit 1
    fi
    cp "$FAKE_UV" "$(dirname "$0")/uv" && echo "Successfully installed uv-0.13.10"
    exit 0
fi
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

FAKE_UV = r"""#!/usr/bin/env bash
set -eu
if [ -n "${FAKE_UV_BROKEN:-}" ]; then
    echo "$0: cannot execute binary file: Exec format error" >&2
    exit 126
fi
if [ "$1" = --version ]; then
    echo "uv 0.13.10 (x86_64-unknown-linux-gnu)"
    exit 0
fi
[ "$1 $2" = "pip install" ]
echo "$*" >>"$FAKE_UV_CALLS"
lock="" previous=""
for argument in "$@"; do
    [ "$previous" != -r ] || lock="$argument"
    previous="$argument"
done
if [ -z "$lock" ]; then
    echo "Resolved 1 package in 3ms" && echo "   Building cronwheel @ file://$PWD"
    echo "      Built cronwheel @ file://$PWD" && echo "Prepared 1 package in 912ms"
    echo "Installed 1 package in 2ms" && echo " + cronwheel==0.1.0 (from file://$PWD)"
    exit 0
fi
pins=()
while read -r first rest; do  # uv leaves out what is for another platform without a word
    case "$first" in [A-Za-z0-9]*) [ "${rest:0:1}" = ";" ] || pins+=("$first") ;; esac
done <"$lock"
echo "Using Python 3.11.7 environment at: .venv"
echo "Resolved ${#pins[@]} packages in 12ms"
for pin in "${pins[@]:0:7}"; do  # uv names the downloads of a megabyte or more
    echo "Downloading ${pin%%==*} (2.3MiB)"
done
if [ -n "${FAKE_UV_ERROR:-}" ]; then
    echo "error: $FAKE_UV_ERROR" >&2
    exit 2
fi
sleep "${FAKE_UV_DOWNLOAD_S:-0}"
for pin in "${pins[@]:0:7}"; do
    echo " Downloaded ${pin%%==*}"
done
echo "Prepared ${#pins[@]} packages in 1.20s" && echo "Installed ${#pins[@]} packages in 30ms"
printf ' + %s\n' "${pins[@]}"
"""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A checkout as the bootstrap sees it: the script, the locks and pyproject.toml."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(BOOTSTRAP, tmp_path / "scripts" / "bootstrap")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "dev.lock").write_text(LOCK)
    (tmp_path / "requirements" / "uv.lock").write_text(UV_LOCK)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "cronwheel"\n')
    for name, text in (("python", FAKE_PYTHON), ("uv", FAKE_UV)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    return tmp_path


def bootstrap(clone: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHON": str(clone / "python"),
        "FAKE_UV": str(clone / "uv"),
        "FAKE_PIP_CALLS": str(clone / "pip-calls"),
        "FAKE_UV_CALLS": str(clone / "uv-calls"),
        **settings,
    }
    return subprocess.run(
        [clone / "scripts" / "bootstrap"], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def calls(clone: Path, installer: str) -> list[str]:
    """What pip or uv was asked to do, a line a call."""
    written = clone / f"{installer}-calls"
    return written.read_text().splitlines() if written.exists() else []


def test_a_first_run_installs_with_uv_and_says_how_far_it_is(clone: Path) -> None:
    done = bootstrap(clone)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the caller's: scripts/cronwheel prints tokens there
    assert done.stderr.splitlines() == [
        done.stderr.splitlines()[0],
        "cronwheel: installing uv into .venv from requirements/uv.lock ...",
        "cronwheel: resolved 9 packages for this platform; downloading those not in uv's cache ...",
        "cronwheel: downloaded 2/7 large packages",
        "cronwheel: downloaded 4/7 large packages",
        "cronwheel: downloaded 6/7 large packages",
        "cronwheel: downloaded 7/7 large packages",
        "cronwheel: prepared 9 packages; installing them into .venv ...",
        "cronwheel: installed 9 packages",
        "cronwheel: installing cronwheel itself into .venv (editable) ...",
        done.stderr.splitlines()[-1],
    ]
    assert "10 locked packages from requirements/dev.lock" in done.stderr.splitlines()[0]
    assert done.stderr.splitlines()[-1].startswith("cronwheel: .venv is ready (10 packages and cronwheel, ")
    log = (clone / ".venv" / "bootstrap.log").read_text()
    assert " + package8==1.8" in log  # uv's own lines go to the log
    assert "Successfully installed uv-0.13.10" in log
    (uv,) = calls(clone, "pip")
    assert "--only-binary :all: --require-hashes -r requirements/uv.lock" in uv
    locked, editable = calls(clone, "uv")
    assert locked == "pip install --python .venv/bin/python --require-hashes -r requirements/dev.lock"
    assert editable == "pip install --python .venv/bin/python --no-deps --no-build-isolation -e ."


def test_without_a_wheel_of_uv_it_says_so_and_installs_with_pip(clone: Path) -> None:
    done = bootstrap(clone, FAKE_UV_NO_WHEEL="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[2] == (
        "cronwheel: uv cannot be installed or run here (why: .venv/bootstrap.log); installing with pip"
    )
    collected = [line for line in lines if line.startswith("cronwheel: collected ")]
    assert collected == [f"cronwheel: collected {count}/10 packages" for count in (2, 4, 6, 8, 10)]
    assert "cronwheel: installing 10 locked packages into .venv ..." in lines
    assert lines[-1].startswith("cronwheel: .venv is ready (10 packages and cronwheel, ")
    assert not any("Collecting" in line for line in lines)  # pip's own lines go to the log
    log = (clone / ".venv" / "bootstrap.log").read_text()
    assert "ERROR: Could not find a version that satisfies the requirement uv==0.13.10" in log
    assert "Collecting package0==1.0" in log
    _, locked, editable = calls(clone, "pip")
    assert "--require-hashes -r requirements/dev.lock" in locked
    assert editable.endswith("--no-deps --no-build-isolation -e .")
    assert calls(clone, "uv") == []


def test_a_uv_that_does_not_run_here_leaves_it_to_pip(clone: Path) -> None:
    done = bootstrap(clone, FAKE_UV_BROKEN="1")
    assert done.returncode == 0, done.stderr
    assert "installing with pip" in done.stderr.splitlines()[2]
    assert "cannot execute binary file" in (clone / ".venv" / "bootstrap.log").read_text()
    assert len(calls(clone, "pip")) == 3  # uv, the lock, cronwheel
    assert calls(clone, "uv") == []


def test_with_nothing_to_install_it_prints_nothing_and_runs_no_installer(clone: Path) -> None:
    assert bootstrap(clone).returncode == 0
    before = calls(clone, "pip"), calls(clone, "uv")
    again = bootstrap(clone)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert (calls(clone, "pip"), calls(clone, "uv")) == before
    with (clone / "requirements" / "dev.lock").open("a") as lock:
        lock.write(f"extra==1.0 \\\n{HASH}\n")
    changed = bootstrap(clone)
    assert "11 locked packages" in changed.stderr  # a changed lock is installed again
    assert "cronwheel: resolved 10 packages for this platform" in changed.stderr
    assert len(calls(clone, "uv")) == len(before[1]) + 2
    (clone / "requirements" / "uv.lock").write_text(UV_LOCK.replace("0.13.10", "0.13.11"))
    assert bootstrap(clone).stderr, "a changed uv.lock is a change too"


@pytest.mark.slow
def test_it_says_it_is_still_at_it_while_uv_is_silent(clone: Path) -> None:
    done = bootstrap(clone, CRONWHEEL_BOOTSTRAP_NOTICE_S="1", FAKE_UV_DOWNLOAD_S="2.5")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    resolved = next(index for index, line in enumerate(lines) if line.startswith("cronwheel: resolved "))
    prepared = lines.index("cronwheel: prepared 9 packages; installing them into .venv ...")
    still = lines[resolved + 1 : prepared]
    assert any(line.startswith("cronwheel: still downloading and unpacking 9 packages, ") for line in still)
    assert all(line.startswith(("cronwheel: still ", "cronwheel: downloaded ")) for line in still), still
    assert lines[-1].startswith("cronwheel: .venv is ready")


@pytest.mark.slow
def test_it_says_it_is_still_at_it_while_pip_is_silent(clone: Path) -> None:
    done = bootstrap(clone, CRONWHEEL_BOOTSTRAP_NOTICE_S="1", FAKE_PIP_INSTALL_S="2.5", FAKE_UV_NO_WHEEL="1")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    installing = lines.index("cronwheel: installing 10 locked packages into .venv ...")
    still = [line for line in lines[installing:] if line.startswith("cronwheel: still ")]
    assert still, done.stderr
    installing_still = "cronwheel: still installing 10 locked packages into .venv, "
    assert all(line.startswith(installing_still) for line in still)
    assert lines[-1].startswith("cronwheel: .venv is ready")


def test_a_failing_uv_shows_its_error_and_leaves_the_next_run_to_try_again(clone: Path) -> None:
    failed = bootstrap(clone, FAKE_UV_ERROR="Hash mismatch for `package0==1.0`")
    assert failed.returncode == 1
    assert "error: Hash mismatch for `package0==1.0`" in failed.stderr.splitlines()
    assert failed.stderr.splitlines()[-1] == "cronwheel: uv failed (its whole output: .venv/bootstrap.log)"
    assert "installing with pip" not in failed.stderr  # a lock uv refuses, pip would refuse too
    assert not (clone / ".venv" / ".cronwheel-installed").exists()
    again = bootstrap(clone)
    assert again.returncode == 0, again.stderr
    assert "cronwheel: .venv is ready" in again.stderr
    assert len(calls(clone, "uv")) == 3  # the failed lock, then the lock and cronwheel


def test_a_failing_pip_shows_its_error_and_leaves_the_next_run_to_try_again(clone: Path) -> None:
    failed = bootstrap(clone, FAKE_UV_NO_WHEEL="1", FAKE_PIP_ERROR="THESE PACKAGES DO NOT MATCH THE HASHES")
    assert failed.returncode == 1
    assert "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES" in failed.stderr
    assert failed.stderr.splitlines()[-1] == "cronwheel: pip failed (its whole output: .venv/bootstrap.log)"
    assert not (clone / ".venv" / ".cronwheel-installed").exists()
    again = bootstrap(clone)
    assert again.returncode == 0, again.stderr
    assert "cronwheel: .venv is ready" in again.stderr
