#!/usr/bin/env bash
# Set up the environment, Chromium and the test database servers, lint, and run the whole test suite
# (slow tests, the PostgreSQL / MariaDB store tests and the browser tests included).
# Extra arguments go to pytest (for example: scripts/test.sh -k cli -x).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --with-browser  # and Chromium, for the page's browser tests
# PostgreSQL and MariaDB on loopback for the server-store tests (installed from Debian packages if missing).
exports="$(bash scripts/services.sh)"
eval "$exports"
.venv/bin/ruff check tiltframe tests
# One worker per core (pytest-xdist; a Spark session each, a test file at a time); the slowest 25 tests
# are listed.  Exit status 5 (no test selected, e.g. by -k) is no failure.
workers="${TILTFRAME_TEST_WORKERS:-$(nproc)}"
status=0
.venv/bin/python -m pytest -n "$workers" --dist loadfile --durations=25 "$@" || status=$?
[ "$status" -eq 5 ] && status=0
exit "$status"
