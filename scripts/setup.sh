#!/usr/bin/env bash
# Create .venv (if missing) with the machine's python3 >= 3.11 and install tiltframe editable with the
# test extras.  Idempotent: when the installed package is up to date with pyproject.toml it only checks.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${TILTFRAME_VENV:-.venv}"

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.11; do
        [[ -n "$candidate" ]] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

if [[ ! -x "$VENV/bin/python" ]]; then
    if ! PY="$(find_python)"; then
        echo "setup: tiltframe needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
        exit 1
    fi
    echo "setup: creating $VENV with $PY ($("$PY" --version 2>&1))" >&2
    "$PY" -m venv "$VENV"
fi

# Reinstall only when pyproject.toml changed since the last successful install (or nothing is installed).
STAMP="$VENV/.tiltframe-installed"
if [[ -f "$STAMP" && "$STAMP" -nt pyproject.toml ]] &&
    [[ -x "$VENV/bin/ruff" && -x "$VENV/bin/pytest" ]] &&
    "$VENV/bin/python" -c 'import tiltframe, pyspark' >/dev/null 2>&1; then
    exit 0
fi

echo "setup: installing tiltframe (editable) with test extras into $VENV" >&2
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$VENV/bin/python" -m pip install --quiet -e ".[test]"
touch "$STAMP"

if ! command -v java >/dev/null 2>&1 && [[ -z "${JAVA_HOME:-}" ]]; then
    echo "setup: warning: no java found; Spark needs Java 17 or 21 (set JAVA_HOME)" >&2
fi
