"""The CI fuzz run (issue #11 item 10): Schemathesis against the OpenAPI document of the API as
it serves it, every check, a fixed seed, a few examples per operation, bounded in time. No 5xx,
no response outside its schema, no schema-valid request refused for a reason the document could
have stated. ``scripts/fuzz`` runs the same, longer (docs/security.md, "Fuzzing")."""

from __future__ import annotations

import os
from pathlib import Path

from .run import fuzz
from .served import serve_api

EXAMPLES = int(os.environ.get("CRONWHEEL_FUZZ_EXAMPLES", "5"))  # per operation
TIMEOUT_S = 300.0  # a hung run fails; a normal one takes well under a minute on 2 cores


def test_the_api_keeps_to_its_openapi_document(tmp_path: Path) -> None:
    with serve_api(tmp_path / "fuzz.db") as api:
        outcome = fuzz(api.url, api.token, examples=EXAMPLES, timeout_s=TIMEOUT_S)
    print(f"schemathesis: {outcome.seconds:.1f} s, {EXAMPLES} examples per operation")  # seen with -s
    assert outcome.returncode == 0, outcome.summary
    assert " generated" in outcome.output  # it ran: "N generated, ..." closes its report
