#!/usr/bin/env bash
# Create .venv (if missing) with the machine's python3 >= 3.11 and install tiltframe editable with the
# test extras.  Idempotent: when the installed package is up to date with pyproject.toml it only checks.
# --with-browser also installs Debian's Chromium (apt-get, as root) for the page's browser tests, which
# Playwright drives headless; --browser-only installs only that (scripts/test.sh runs it beside the rest).
set -euo pipefail

WITH_BROWSER=0
BROWSER_ONLY=0
[[ "${1:-}" == "--with-browser" ]] && WITH_BROWSER=1
[[ "${1:-}" == "--browser-only" ]] && BROWSER_ONLY=1

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${TILTFRAME_VENV:-.venv}"

install_browser() {
    command -v chromium >/dev/null 2>&1 && return 0
    if [[ $EUID -ne 0 ]]; then
        echo "setup: the browser tests need Chromium: sudo apt-get install chromium (or run this as root)" >&2
        return 0
    fi
    echo "setup: installing Debian's chromium for the browser tests" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2
}
if ((BROWSER_ONLY)); then
    install_browser
    exit 0
fi

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

if ((WITH_BROWSER)); then
    install_browser
fi

# The class archive of Spark's JVM (tiltframe/engine/spark/class_archive.py): every later Spark start maps the
# classes a run loads instead of loading them again.  Made once (about a minute); a run without it works.
class_archive() {
    command -v java >/dev/null 2>&1 || [[ -n "${JAVA_HOME:-}" ]] || return 0
    "$VENV/bin/python" -m tiltframe.engine.spark.class_archive --if-missing ||
        echo "setup: warning: no class archive for Spark's JVM (Spark starts without it)" >&2
}

# The package's bytecode, as pip writes it for an installed (not editable) package: every process then loads
# it compiled, also where PYTHONDONTWRITEBYTECODE keeps Python from writing it (a tenth of a second for
# each command, test process and Spark Python worker).  Sources changed since are compiled as usual.
compile_package() {
    PYTHONDONTWRITEBYTECODE= "$VENV/bin/python" -m compileall -q tiltframe >/dev/null ||
        echo "setup: warning: could not compile tiltframe's bytecode" >&2
}

# Reinstall only when pyproject.toml changed since the last successful install (or nothing is installed).
STAMP="$VENV/.tiltframe-installed"
if [[ -f "$STAMP" && "$STAMP" -nt pyproject.toml ]] &&
    [[ -x "$VENV/bin/ruff" && -x "$VENV/bin/pytest" ]] &&
    "$VENV/bin/python" -c 'import tiltframe, pyspark' >/dev/null 2>&1; then
    compile_package
    class_archive
    exit 0
fi

echo "setup: installing tiltframe (editable) with test extras into $VENV" >&2
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$VENV/bin/python" -m pip install --quiet -e ".[test]"
touch "$STAMP"
compile_package

if ! command -v java >/dev/null 2>&1 && [[ -z "${JAVA_HOME:-}" ]]; then
    echo "setup: warning: no java found; Spark needs Java 17 or 21 (set JAVA_HOME)" >&2
fi
class_archive
