"""The package's public names are imported on first use, so that what Spark's Python processes import stays
light: each test imports in a new interpreter (this one has loaded everything already)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tiltframe
from tiltframe import lazy

#: What a Spark worker must not load for a module of its own: the API and its answers, the store's
#: SQLAlchemy and statements, the language's parser, the CLI.
HEAVY = ("tiltframe.api", "tiltframe.retrieval.retrieve", "sqlalchemy", "tiltframe.store.sql",
         "tiltframe.lang.siddhiql.parser", "lark", "typer", "rich")

#: The modules of what tiltframe hands Spark to run in Python processes of its own: a continuous query's
#: stateful processor (run on the driver to learn its state, then by the executors), the clock's data
#: source, and a trickle query's staging step and windows.
WORKER_MODULES = ("tiltframe.engine.continuous.processor", "tiltframe.engine.continuous.clock",
                  "tiltframe.engine.trickle.steps")


def printed_by(code: str) -> list[str]:
    """The words a new interpreter prints running ``code``."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def loaded_after(statement: str) -> set[str]:
    """The modules of :data:`HEAVY` a new interpreter has loaded after ``statement``."""
    return set(printed_by(f"import sys\n{statement}\nprint('\\n'.join(m for m in {HEAVY!r} if m in sys.modules))"))


def test_import_tiltframe_loads_nothing_heavy() -> None:
    assert loaded_after("import tiltframe") == set()


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_what_spark_workers_import_loads_nothing_heavy(module: str) -> None:
    assert loaded_after(f"import {module}") == set()


def test_a_public_name_is_imported_when_first_used() -> None:
    assert "tiltframe.api" in loaded_after("import tiltframe\ntiltframe.query")
    assert printed_by("import sys\nfrom tiltframe import migrate\nprint('tiltframe.lifecycle' in sys.modules)") == [
        "True"]


def test_the_command_line_starts_without_pandas_sqlalchemy_or_spark() -> None:
    """Every command's module is imported to build the command line (``--help`` included); pandas, NumPy,
    SQLAlchemy, PySpark and the store are imported by the commands that use them (half a second)."""
    heavy = ("pandas", "numpy", "pyarrow", "sqlalchemy", "pyspark", "tiltframe.aggregates.layout")
    code = f"import sys\nimport tiltframe.cli.commands\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    assert printed_by(code) == []


def test_validating_an_app_needs_no_pandas_sqlalchemy_or_spark() -> None:
    """``tiltframe validate APP`` (no store) checks every function of the app without pandas (its scalar
    functions import it when they compute) or the store's SQLAlchemy."""
    app = Path(tiltframe.__file__).parent / "examples" / "trades.siddhi"
    code = ("import atexit, sys\nfrom tiltframe.cli.commands import main\n"
            f"sys.argv = ['tiltframe', 'validate', {str(app)!r}, '--format', 'json']\n"
            "atexit.register(lambda: print('loaded:', *(m for m in ('pandas', 'pyarrow', 'sqlalchemy', 'pyspark')\n"
            "                                        if m in sys.modules)))\n"
            "main()\n")  # which ends the process, with status 0 (printed_by checks it)
    assert printed_by(code)[-1:] == ["loaded:"]


def test_the_api_modules_are_reached_from_the_package_as_before() -> None:
    assert printed_by("import tiltframe as tf\n"
                      "print(tf.api.query is tf.query, tf.lifecycle.verify is tf.verify, 'api' in dir(tf))"
                      ) == ["True", "True", "True"]


def test_every_public_name_resolves_and_is_listed() -> None:
    from tiltframe import api, lifecycle

    for name in tiltframe.__all__:
        assert getattr(tiltframe, name) is not None, name
        assert name in dir(tiltframe)
    assert tiltframe.query is api.query
    assert tiltframe.verify is lifecycle.verify


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        tiltframe.nope  # noqa: B018
    with pytest.raises(ImportError):
        from tiltframe import nope  # noqa: F401


def test_a_submodule_of_a_lazy_package_still_imports() -> None:
    from tiltframe.store import DB_FILE_NAME
    from tiltframe.store.dialects import mysql

    assert DB_FILE_NAME == "tiltframe.db"
    assert mysql.is_mysql("mariadb")


def test_exports_keeps_what_it_imported() -> None:
    names = lazy.names_in("tiltframe.errors", ["DataError"])
    assert names == {"DataError": "tiltframe.errors"}
    first = tiltframe.query
    assert tiltframe.__dict__["query"] is first  # kept after the first use, like an eager import
