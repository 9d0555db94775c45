#!/usr/bin/env bash
# The performance table (docs/performance.md) in one run: set up, start the test database servers on
# loopback (for the PostgreSQL and MariaDB rows), generate W1 and W2, and run every benchmark, each
# checking its totals before it prints a figure.  Arguments go to bench/bench_all.py
# (for example: bash scripts/bench.sh --events 1000000 --repeat 1).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exports="$(bash scripts/services.sh)"
eval "$exports"
exec .venv/bin/python bench/bench_all.py "$@"
