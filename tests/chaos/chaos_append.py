"""The chaos suite's command target: records that an attempt ran, in a file shared by all attempts.

    python chaos_append.py FILE [--sleep SECONDS] [--spawn-child]

cronwheel's command executor gives the attempt's identity in CRONWHEEL_EXECUTION_ID,
CRONWHEEL_JOB_ID, CRONWHEEL_SCHEDULED_AT and CRONWHEEL_ATTEMPT. The script appends

    start <execution_id> <job_id> <scheduled_at> <attempt> <time.time()> <pid> [<child pid>]

sleeps SECONDS (default 0), appends the same line with ``done`` (a fresh time) and exits 0. Each
line is one ``os.write`` on an ``O_APPEND`` descriptor (under 512 bytes), so concurrent attempts
never interleave within a line. With ``--spawn-child`` it first starts a grandchild (``sleep``, no
shell, in the script's process group, inheriting its stdout) that outlives the script by
``CHILD_EXTRA_S`` seconds, and writes the start line after that so the line can name the
child's pid: the executor must kill it with the group. Exit status 2: bad arguments or a missing
variable (no line is written). Standalone: imports nothing from cronwheel nor the suite
(``chaos_witness.read_command_lines`` parses the file).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

VARIABLES = ("CRONWHEEL_EXECUTION_ID", "CRONWHEEL_JOB_ID", "CRONWHEEL_SCHEDULED_AT", "CRONWHEEL_ATTEMPT")
CHILD_EXTRA_S = 300.0
MAX_LINE = 512


def append(path: str, kind: str, identity: list[str], child: int | None) -> None:
    fields = [kind, *identity, f"{time.time():.6f}", str(os.getpid())]
    if child is not None:
        fields.append(str(child))
    line = (" ".join(fields) + "\n").encode()
    if len(line) >= MAX_LINE:
        raise SystemExit(f"chaos_append: line too long ({len(line)} bytes)")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="chaos_append.py")
    parser.add_argument("file")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--spawn-child", action="store_true")
    args = parser.parse_args(argv)
    missing = [name for name in VARIABLES if not os.environ.get(name)]
    if missing:
        print(f"chaos_append: missing {', '.join(missing)}", file=sys.stderr)
        return 2
    identity = [os.environ[name] for name in VARIABLES]
    child = None
    if args.spawn_child:
        child = subprocess.Popen(["sleep", f"{args.sleep + CHILD_EXTRA_S:g}"]).pid
    append(args.file, "start", identity, child)
    if args.sleep > 0:
        time.sleep(args.sleep)
    append(args.file, "done", identity, child)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
