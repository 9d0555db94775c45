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
exec .venv/bin/python -m pytest "$@"
