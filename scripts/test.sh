#!/usr/bin/env bash
# Set up the environment, Chromium and the test database servers, lint, and run the whole test suite
# (slow tests, the PostgreSQL / MariaDB store tests and the browser tests included).
# Extra arguments go to pytest (for example: scripts/test.sh -k cli -x).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The Debian packages (Chromium for the page's browser tests; PostgreSQL and MariaDB on loopback for the
# server-store tests, installed if missing, then started) come beside the Python environment, one apt-get
# after the other; their output is shown once they are done.
debian="$(mktemp -d)"
trap 'rm -rf "$debian"' EXIT
(bash scripts/setup.sh --browser-only && bash scripts/services.sh >"$debian/exports") 2>"$debian/log" &
packages=$!
bash scripts/setup.sh
status=0
wait "$packages" || status=$?
cat "$debian/log" >&2
[ "$status" -eq 0 ] || { echo "test: the Debian packages or the database servers did not set up" >&2; exit "$status"; }
eval "$(cat "$debian/exports")"
.venv/bin/ruff check tiltframe tests
# One worker per core (pytest-xdist; a Spark session each, a test file at a time); the slowest 25 tests
# are listed.  Exit status 5 (no test selected, e.g. by -k) is no failure.
workers="${TILTFRAME_TEST_WORKERS:-$(nproc)}"
status=0
.venv/bin/python -m pytest -n "$workers" --dist loadfile --durations=25 "$@" || status=$?
[ "$status" -eq 5 ] && status=0
exit "$status"
