#!/usr/bin/env bash
# Set up the environment and run the tiltframe demo; extra arguments go to `tiltframe demo`
# (for example: scripts/demo.sh --events 200000 --data-dir /tmp/tiltframe-demo).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/tiltframe demo "$@"
