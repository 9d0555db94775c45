#!/usr/bin/env bash
# Set up the environment, lint, and run the whole test suite (slow tests included).
# Extra arguments go to pytest (for example: scripts/test.sh -k cli -x).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/ruff check tiltframe tests
exec .venv/bin/python -m pytest "$@"
