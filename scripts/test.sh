#!/usr/bin/env bash
# Set up the environment and the test database servers, lint, and run the whole test suite (slow tests
# and the PostgreSQL / MariaDB store tests included).
# Extra arguments go to pytest (for example: scripts/test.sh -k cli -x).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# PostgreSQL and MariaDB on loopback for the server-store tests (installed from Debian packages if missing).
exports="$(bash scripts/services.sh)"
eval "$exports"
.venv/bin/ruff check tiltframe tests
exec .venv/bin/python -m pytest "$@"
