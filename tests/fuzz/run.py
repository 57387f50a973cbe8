"""Run Schemathesis against cronwheel's API: the CI run (tests/fuzz/test_schemathesis.py) and the
longer one (``scripts/fuzz``), which differ only in examples per operation and time.

The API is the one :mod:`tests.fuzz.served` serves (real HTTP on 127.0.0.1, no worker), unless
``--url`` names another: then the fuzzer creates, edits, triggers and deletes jobs there, so
name only a server of your own whose workers cannot reach anything that matters.

Every check runs (``--checks all``), ``positive_data_acceptance`` in the form of
:mod:`tests.fuzz.hooks`; the configuration (dictionaries, expected statuses) is
``tests/fuzz/schemathesis.toml``. Schemathesis runs as a child process in a temporary directory
(its cache goes there), with a fixed seed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .served import serve_api

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "schemathesis.toml"
HOOKS = HERE / "hooks.py"
SEED = 11
# The CI run only: the coverage phase (deterministic, and the slowest: about 430 cases per job
# body operation) skips the operations whose body it already covers elsewhere: PUT's is POST's
# (JobSpec), and the by-name PUT and PATCH are the by-id routes' own code. Fuzzing and stateful
# testing still send them everything; scripts/fuzz runs the coverage phase on them too.
QUICK = """
[[operations]]
include-name = [
  "PUT /v1/jobs/{job_id}", "PUT /v1/teams/{team}/jobs/{name}", "PATCH /v1/teams/{team}/jobs/{name}",
]
phases.coverage.enabled = false
"""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished run: its exit status, what it printed, and how long it took."""

    returncode: int
    output: str
    seconds: float

    @property
    def summary(self) -> str:
        """The report from its FAILURES section on (or its last lines)."""
        start = self.output.find("= FAILURES =")
        return self.output[start:] if start >= 0 else self.output[-4000:]


def command(
    url: str,
    token: str | None,
    *,
    examples: int,
    config: Path = CONFIG,
    seed: int = SEED,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The ``st run`` command line for the API at ``url``."""
    auth = ["--header", f"Authorization: Bearer {token}"] if token else []
    return [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
        f"{url}/openapi.json",
        "--checks", "all", "--exclude-checks", "positive_data_acceptance",
        "--max-examples", str(examples), "--seed", str(seed), "--workers", "1",
        "--continue-on-failure", "--no-color", *auth, *extra,
    ]  # fmt: skip


def hooks_env(token: str | None) -> dict[str, str]:
    """The environment of ``st run``: the hooks, and the id of the token they keep alive."""
    own = token.split("_")[1] if token and token.startswith("cw_") else ""
    return {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS), "CRONWHEEL_FUZZ_TOKEN_ID": own}


def fuzz(
    url: str, token: str | None, *, examples: int, timeout_s: float, extra: tuple[str, ...] = ()
) -> Outcome:
    """The CI run against ``url`` (:data:`QUICK`); killed (and an error) past ``timeout_s``."""
    env = {**hooks_env(token), "NO_COLOR": "1", "COLUMNS": "120"}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cronwheel-fuzz-") as scratch:
        config = Path(scratch) / "schemathesis.toml"
        config.write_text(CONFIG.read_text() + QUICK)
        done = subprocess.run(
            command(url, token, examples=examples, config=config, extra=extra),
            cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    return Outcome(done.returncode, done.stdout + done.stderr, time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    """``scripts/fuzz``: the longer run, printed as it goes."""
    parser = argparse.ArgumentParser(prog="scripts/fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100, help="per operation (default 100)")
    parser.add_argument("--max-time", type=int, help="seconds: keep fuzzing until spent")
    parser.add_argument("--url", help="fuzz this server instead of an in-process one (see above)")
    parser.add_argument("--token", help="bearer token for --url (default: $CRONWHEEL_FUZZ_TOKEN)")
    parser.add_argument(
        "--database-url",
        help="the in-process API's store (default: a new SQLite file); a PostgreSQL database is written to",
    )
    options, rest = parser.parse_known_args(argv)
    extra = (*(("--max-time", str(options.max_time)) if options.max_time else ()), *rest)
    if options.url:
        token = options.token or os.environ.get("CRONWHEEL_FUZZ_TOKEN")
        return subprocess.call(
            command(options.url.rstrip("/"), token, examples=options.examples, extra=extra),
            env=hooks_env(token),
        )
    with (
        tempfile.TemporaryDirectory(prefix="cronwheel-fuzz-") as scratch,
        serve_api(options.database_url or Path(scratch) / "fuzz.db") as api,
    ):
        print(f"scripts/fuzz: the API at {api.url} (in-process, no worker)", flush=True)
        cmd = command(api.url, api.token, examples=options.examples, extra=extra)
        return subprocess.call(cmd, cwd=scratch, env=hooks_env(api.token))


if __name__ == "__main__":
    sys.exit(main())
