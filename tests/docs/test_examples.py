"""The docs run as written: every fenced code block of README.md and docs/*.md is run or checked here, or
named with the reason it is not.  A block that is neither fails ``test_every_block_is_checked_or_listed``.

How a block is checked follows from its fence's language:

- ``python``: run in the page's working directory (``WORKDIRS``: the files its examples name), the page's
  python blocks in order in one namespace.  A block of ``>>>`` lines runs as a doctest, its printed values
  compared.  Spark is the suite's one session (the ``spark`` fixture).
- ``sql`` (or ``siddhi``): SiddhiQL and tiltframe's streaming SQL, checked by ``tiltframe.lang``.  A block
  that defines something (``define ...``) is parsed with the definitions of the page's blocks before it
  (``parse_app``) and adds its own for the blocks after it; in other blocks each statement is checked
  against those definitions: a retrieval by ``parse_retrieval``, a join or stream query (``insert into``) by
  ``parse_app``, a ``SELECT`` from a defined table by ``parse_table_query``, any other ``SELECT``/``WITH`` by
  ``parse_continuous``.
- ``bash``, ``sh``, ``console`` (``$ `` lines): each command.  ``tiltframe`` with one of ``RUNNABLE`` runs
  as a new process (``python -m tiltframe``, this checkout's code) in the page's working directory and
  must exit 0.  Every other command is listed in ``SKIPPED`` with its reason; a listed command that no page
  has any more fails too, so the list stays the docs' own.
- ``toml``: a config file, read by ``tiltframe.engine.rollup.shards.load_deployment``.

Where the language is not enough, an HTML comment on the line just before the fence (GitHub does not show
it) says how the block is checked: ``<!-- docs-test: KIND [ARGS] [(REASON)] -->``.

- ``skip (REASON)``: not run, for that reason.
- ``output (REASON)``: sample output that cannot be compared, for that reason (timings, a server's paths).
- ``syntax``: a syntax summary with placeholders, not code.
- ``with PATH``: a ``sql`` block checked against the app file PATH (from the repository's root) instead of
  the page's own definitions.
- ``store DB ...``: SQL over the store's tables, run on each DB named (``sqlite``, ``postgresql``,
  ``mysql``) in a store made by a small real run of the README's app over ``trades_events()``: SQLite
  always, the servers of ``TILTFRAME_TEST_POSTGRES_URL`` / ``TILTFRAME_TEST_MYSQL_URL`` (tests/servers.py)
  when set.  Statements run in order; the last one must return rows, each a row of the same data as
  tiltframe answers it (``check_store_rows``).
- ``refused``: a ``sql`` block that must be refused (parsed alone when it defines something, else
  against the page's definitions).
- ``message``: the exact error of the ``refused`` block just before it.

Commands that start Spark (``run``, ``insert``, ``demo``) are not run as new processes: each pays Spark's
start (15 s, docs/performance.md), and tests/cli/ runs them.  What the README's ``tiltframe run`` makes, the
trades store, is made here in process with ``tf.run``, so the commands after it read a real store.  The
tests that use Spark or a database server are marked ``slow`` (CI runs them); without a server's variable
its cases are skipped, and fail under CI (tests/servers.py).

Beside the blocks: every file, module and dotted name the pages and tiltframe/examples/ name exists; the
index (docs/README.md) links every page once; docs/architecture.md draws the layers of the import-linter
contract in pyproject.toml, in its order; the example apps validate with what their comments offer.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from tests.docs.blocks import DOCS, ROOT, Block, all_blocks, commands, defines, head_word, read_blocks, statements

SIDDHI = ("sql", "siddhi")
SHELL = ("bash", "sh", "console", "shell")
DATABASES = ("sqlite", "postgresql", "mysql")
KINDS = ("skip", "output", "syntax", "with", "store", "refused", "message")

#: The ``tiltframe`` commands run as written: quick, local, no Spark.
RUNNABLE = ("validate", "query", "inspect", "purge", "compact", "migrate", "--help", "--version")

_SPARK_CLI = ("starts Spark in a new process (15 s before its first batch, docs/performance.md); "
              "tests/cli/ runs the command, and this test makes the same store in process with tf.run")

#: Every command of the docs that is not run, by the reason why: (page, command as ``commands()`` gives it).
SKIPPED_BY_REASON: dict[str, list[tuple[str, str]]] = {
    "sets up the machine first (pip install from the network; scripts/setup.sh), then the demo's 1.5M events":
        [("README.md", "bash scripts/demo.sh")],
    "the whole test suite (what CI runs): starts database servers as root and runs for an hour on 2 cores":
        [("README.md", "bash scripts/test.sh")],
    _SPARK_CLI: [
        ("README.md", "tiltframe run app.siddhi --input TradeStream=data/trades/"),
    ],
    "needs a file of captured inputs; tests/cli/test_replay.py replays the seed's trickle example through the "
    "command": [
        ("README.md", "tiltframe replay metrics.trickle in=captured.jsonl"),
    ],
    "needs a file of captured inputs; tests/cli/test_replay.py replays continuous queries through the command": [
        ("README.md", "tiltframe replay app.siddhi device_utils=captured.jsonl"),
    ],
    "needs a folder of JSON-lines files and starts Spark; tests/cli/test_trickle_run.py runs the seed's trickle "
    "example through the command": [
        ("README.md", "tiltframe run metrics.trickle --input in=data/metrics/ --output out=out/"),
    ],
    "starts Spark in a new process (15 s) to recompute from the inputs; tests/engine/lifecycle/test_verification.py "
    "and test_range_rebuilds.py run both commands on real stores": [
        ("README.md", "tiltframe verify app.siddhi --input TradeStream=data/trades/"),
        ("README.md", 'tiltframe rebuild app.siddhi --input TradeStream=data/trades/ --within "2024-01-02"'),
    ],
    "starts Spark in a new process (15 s); the Python block below inserts the same folder with tf.insert, "
    "and tests/cli/test_tables_cli.py runs both commands": [
        ("docs/preaggregation.md", "tiltframe insert app.siddhi AdImpressions data/impressions/"),
        ("docs/preaggregation.md", "tiltframe insert app.siddhi AdImpressions data/impressions/ --no-preaggregation"),
    ],
    "keeps running until Ctrl-C (--follow, serve); tests/http/test_cli_serve.py runs serve and "
    "run --follow --serve": [
        ("README.md", "tiltframe run app.siddhi --input TradeStream=data/trades/ --follow"),
        ("README.md", "tiltframe serve app.siddhi"),
        ("docs/http.md", "tiltframe serve app.siddhi -d tiltframe-data"),
        ("docs/http.md", "tiltframe serve app.siddhi -d tiltframe-data --port 0"),
        ("docs/http.md", "tiltframe run app.siddhi --input TradeStream=in/ --follow --serve 8000"),
    ],
    "asks the server of the block above, which runs until Ctrl-C; tests/http/ ask it the same": [
        ("docs/http.md", "curl -s localhost:8000/api/query -H 'Content-Type: application/json' -d "
                         "'{\"query\": \"from TradeAggregation within \\\"2024-01-** **:**:**\\\" per \\\"days\\\" "
                         "select AGG_TIME, symbol, total\"}'"),
    ],
    "needs Node.js and the npm registry (the network); tests/http/test_static_assets.py checks what it "
    "builds": [
        ("docs/http.md", "web/build.sh"),
        ("docs/http.md", "cd web && npm install --ignore-scripts --save-exact uplot@1.6.32 && cd .. && web/build.sh"),
    ],
    "a benchmark: minutes of load on the machine, figures rather than checks": [
        ("README.md", "python bench/bench_core.py --workload W1 W2"),
        ("README.md", "python bench/bench_core.py --workload W2 --files-per-batch 10"),
        ("README.md", 'eval "$(bash scripts/services.sh)"; python bench/bench_core.py --workload W1 --store sqlite '
                      "postgresql mysql"),
        ("README.md", "python bench/profile_pipeline.py W1"),
        ("docs/http.md", "python bench/bench_serve.py"),
        ("docs/http.md", "python bench/bench_serve.py --events 100000 --requests 500 --requests-per-client 20"),
        ("docs/http.md", "python bench/bench_serve.py --profile"),
        ("docs/performance.md", "bash scripts/bench.sh"),
        ("docs/performance.md", "bash scripts/bench.sh --events 1000000 --repeat 1"),
        ("docs/performance.md", "python bench/profile_pipeline.py W1"),
        ("docs/performance.md", "python bench/profile_pipeline.py W1 --store postgresql"),
        ("docs/performance.md", "python bench/profile_pipeline.py W2 --events 2000 --events-per-file 100 "
                                "--files-per-batch 1"),
        ("docs/performance.md", "python bench/bench_exports.py --repeat 3"),
        ("docs/scaling.md", "python bench/bench_scaling.py --store sqlite postgresql"),
    ],
    "runs a tier of the test suite: this file is part of it": [
        ("docs/performance.md", "env -u TILTFRAME_TEST_POSTGRES_URL -u TILTFRAME_TEST_MYSQL_URL .venv/bin/python "
                                '-m pytest -n 2 -m "not slow and not spark and not browser"'),
    ],
    "starts the test database servers, as root (scripts/services.sh)": [
        ("docs/scaling.md", 'eval "$(bash scripts/services.sh)"'),
    ],
    "run as written, in one shell, by tests/integration/test_deployment_doc.py (spark-submit on a local "
    "master: a minute)": [
        ("docs/deployment.md", "MAIN=$(python -c 'import os, tiltframe; print(os.path.join(os.path.dirname("
                               "tiltframe.__file__), \"__main__.py\"))')"),
        ("docs/deployment.md", "spark-submit --master 'local[2]' --conf spark.sql.shuffle.partitions=4 \"$MAIN\" "
                               "run app.siddhi --input \"TradeStream=file://$PWD/trades/\" --data-dir "
                               "\"$PWD/tiltframe-data\" --checkpoint-dir \"file://$PWD/checkpoints\""),
        ("docs/deployment.md", "tiltframe inspect app.siddhi --data-dir \"$PWD/tiltframe-data\" --checkpoint-dir "
                               "\"file://$PWD/checkpoints\""),
        ("docs/deployment.md", "tiltframe query app.siddhi --data-dir \"$PWD/tiltframe-data\" --format csv "
                               "'from TradeAggregation within 0L, 4102444800000L per \"days\" select AGG_TIME, "
                               "symbol, total'"),
    ],
    "needs a Spark standalone cluster and HDFS (tests/integration/test_cluster.py and "
    "test_cluster_shards.py run a standalone cluster on loopback)": [
        ("docs/deployment.md", "spark-submit --master spark://master:7077 \"$MAIN\" run app.siddhi --input "
                               "TradeStream=hdfs:///trades/ --data-dir /srv/tiltframe"),
        ("docs/deployment.md", "spark-submit --master spark://master:7077 --conf "
                               "spark.pyspark.python=/opt/tiltframe/bin/python --conf spark.cores.max=4 "
                               "--executor-memory 4g --driver-memory 4g \"$MAIN\" run app.siddhi --input "
                               "TradeStream=hdfs:///trades/ --data-dir /srv/tiltframe/trades --follow"),
        ("docs/deployment.md", "spark-submit --master spark://master:7077 --conf spark.cores.max=2 \"$MAIN\" run "
                               "app.siddhi --input TradeStream=hdfs:///trades/eu/ --data-dir /srv/tiltframe/eu "
                               "--shard-id eu"),
        ("docs/deployment.md", "spark-submit --master spark://master:7077 --conf spark.cores.max=2 \"$MAIN\" run "
                               "app.siddhi --input TradeStream=hdfs:///trades/us/ --data-dir /srv/tiltframe/us "
                               "--shard-id us"),
    ],
    "packs an environment from a wheel in dist/ (a build, and pip from the network)": [
        ("docs/deployment.md", "python -m venv tf-env && tf-env/bin/pip install dist/tiltframe-*.whl venv-pack"),
        ("docs/deployment.md", "tf-env/bin/venv-pack -o tf-env.tar.gz"),
    ],
    "needs a YARN cluster and HDFS": [
        ("docs/deployment.md", "spark-submit --master yarn --deploy-mode client --archives "
                               "tf-env.tar.gz#environment --conf spark.pyspark.driver.python=\"$(which python)\" "
                               "--conf spark.pyspark.python=./environment/bin/python \"$MAIN\" run app.siddhi "
                               "--input TradeStream=hdfs:///trades/ --data-dir /srv/tiltframe/trades"),
        ("docs/deployment.md", "spark-submit --master yarn --deploy-mode cluster --archives "
                               "tf-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python "
                               "--conf spark.yarn.appMasterEnv.DB_PASSWORD=\"$DB_PASSWORD\" --files app.siddhi "
                               "\"$MAIN\" run app.siddhi --input TradeStream=hdfs:///trades/ --data-dir "
                               "/mnt/shared/tiltframe/trades"),
    ],
    "needs a Kubernetes cluster, an image registry and S3": [
        ("docs/deployment.md", "spark-submit --master k8s://https://HOST:PORT --deploy-mode cluster --name trades "
                               "--conf spark.kubernetes.container.image=registry.example.com/tiltframe:1.0 --conf "
                               "spark.pyspark.python=/opt/venv/bin/python --conf "
                               "spark.kubernetes.driver.volumes.persistentVolumeClaim.data.mount.path=/data --conf "
                               "spark.kubernetes.driver.volumes.persistentVolumeClaim.data.options.claimName="
                               "tiltframe-data --conf spark.kubernetes.driver.secretKeyRef.DB_PASSWORD="
                               "tiltframe-db:password --packages org.apache.hadoop:hadoop-aws:3.5.0 "
                               "local:///opt/venv/lib/python3.11/site-packages/tiltframe/__main__.py run "
                               "/opt/app/app.siddhi --input TradeStream=s3a://bucket/trades/ --data-dir "
                               "/data/trades --follow"),
    ],
    "the shards of the page write into the PostgreSQL server its app names (db:5432, $DB_PASSWORD), from "
    "/data and /state; tests/cli/test_shards_cli.py runs two shards and migrate into one store": [
        ("docs/shards.md", "tiltframe run trades.siddhi --input TradeStream=/data/eu --data-dir /state/eu "
                           "--shard-id eu"),
        ("docs/shards.md", "tiltframe run trades.siddhi --input TradeStream=/data/us --data-dir /state/us "
                           "--shard-id us"),
        ("docs/shards.md", "tiltframe migrate trades.siddhi --data-dir /state/eu --shard-id eu"),
    ],
    "downloads the Kafka connector from Maven (the network) and reads a Kafka broker": [
        ("docs/kafka.md", "PYSPARK_SUBMIT_ARGS='--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0 "
                          "pyspark-shell' python trades.py"),
    ],
}
SKIPPED = {entry: reason for reason, entries in SKIPPED_BY_REASON.items() for entry in entries}

BLOCKS = all_blocks()


# --- what each block is -------------------------------------------------------------------------------


def how(block: Block) -> str:
    """How the test checks ``block``: python, doctest, siddhiql, refused, store, shell or toml; or skip,
    output, syntax, message for the blocks that are not run themselves.

    Raises:
        ValueError: a block whose language says nothing and has no directive, or a directive that does not
            fit its block.
    """
    d = block.directive
    if d is not None:
        if d.kind not in KINDS:
            msg = f"{block.id}: unknown docs-test directive {d.kind!r} (one of: {', '.join(KINDS)})"
            raise ValueError(msg)
        if d.kind in ("skip", "output") and not d.reason:
            msg = f"{block.id}: 'docs-test: {d.kind}' needs its reason: <!-- docs-test: {d.kind} (why) -->"
            raise ValueError(msg)
        if d.kind in ("with", "store", "refused") and block.lang not in SIDDHI:
            msg = f"{block.id}: 'docs-test: {d.kind}' stands before a sql block, not a {block.lang!r} one"
            raise ValueError(msg)
        if d.kind == "with" and (len(d.args) != 1 or not (ROOT / d.args[0]).is_file()):
            msg = f"{block.id}: 'docs-test: with' names one app file of the repository, not {d.args}"
            raise ValueError(msg)
        if d.kind == "store" and (not d.args or set(d.args) - set(DATABASES)):
            msg = f"{block.id}: 'docs-test: store' names databases among {DATABASES}, not {d.args}"
            raise ValueError(msg)
        return {"with": "siddhiql"}.get(d.kind, d.kind)
    if block.lang in ("python", "py", "pycon"):
        return "doctest" if block.text.lstrip().startswith(">>>") else "python"
    if block.lang in SIDDHI:
        return "siddhiql"
    if block.lang in SHELL:
        return "shell"
    if block.lang == "toml":
        return "toml"
    msg = (f"{block.id}: a ```{block.lang} block is neither run nor checked: give it a language the docs test "
           f"runs (python, sql, bash, toml) or a directive, e.g. <!-- docs-test: output (why) --> (see "
           f"tests/docs/test_examples.py)")
    raise ValueError(msg)


def kind_of(block: Block) -> str:
    """``how(block)``, or ``unknown`` (which ``test_every_block_is_checked_or_listed`` explains), so that
    collecting the tests never fails."""
    try:
        return how(block)
    except ValueError:
        return "unknown"


def is_runnable(command: str) -> bool:
    words = command.split()
    return (len(words) > 1 and words[0] == "tiltframe" and words[1] in RUNNABLE
            and not re.search(r"[$`|;&<>]", command))


def blocks_of(doc: str, *kinds: str) -> list[Block]:
    return [b for b in BLOCKS if b.doc == doc and kind_of(b) in kinds]


def test_every_block_is_checked_or_listed() -> None:
    problems = []
    for block in BLOCKS:
        try:
            kind = how(block)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if kind == "shell":
            problems += [f"{block.id}: `{c}` is neither run (tiltframe {'|'.join(RUNNABLE)}) nor listed in "
                         f"SKIPPED with its reason" for c in commands(block)
                         if not is_runnable(c) and (block.doc, c) not in SKIPPED]
        blocks = [b for b in BLOCKS if b.doc == block.doc]
        before = blocks[blocks.index(block) - 1] if blocks.index(block) else None
        if kind == "message" and (before is None or before.kind != "refused"):
            problems.append(f"{block.id}: a 'message' block follows the 'refused' block whose error it is")
    in_docs = {(b.doc, c) for b in BLOCKS if b.lang in SHELL for c in commands(b)}
    problems += [f"SKIPPED lists `{c}` of {doc}, which is no longer there" for doc, c in SKIPPED
                 if (doc, c) not in in_docs]
    assert not problems, "\n".join(problems)


def test_the_parts_are_read_as_written() -> None:
    """The block reader on a page of its own: languages, directives, indented fences, continuation lines."""
    blocks = read_blocks("README.md")
    assert blocks[0].lang == "sql" and blocks[0].text.startswith("define stream TradeStream")
    assert statements("from A within 0L, 1L per 'sec'; -- a; comment\nfrom B within 'a;b', 2L per 'sec';") == [
        "from A within 0L, 1L per 'sec'", "-- a; comment\nfrom B within 'a;b', 2L per 'sec'"]
    assert head_word("@info(name = 'q(1)')\n-- c\nSELECT 1") == "select"
    listed = next(b for b in BLOCKS if b.doc == "docs/deployment.md" and "yarn" in b.text and "client" in b.text)
    assert commands(listed)[0].startswith("spark-submit --master yarn --deploy-mode client --archives ")


# --- names ---------------------------------------------------------------------------------------------

PAGES_AND_EXAMPLES = (*DOCS, *(f"tiltframe/examples/{p.name}" for p in sorted((ROOT / "tiltframe/examples").glob("*"))))
#: Paths the docs name that are not in the repository on purpose.
NOT_COMMITTED = ("web/node_modules",)
PACKAGES = ("engine", "store", "aggregates", "retrieval", "lang", "model", "functions", "http", "cli", "timeutil",
            "examples")


def test_the_files_and_modules_the_docs_name_exist() -> None:
    """Every path the pages name (``tiltframe/store/reads/sql_reads.py``, ``store/reads/sql_reads.py``, ``tests/...``,
    ``bench/...``), every bare file name in backquotes (```views.py```) and every dotted name
    (``tiltframe.lang.checks.table_defs.validate_table``) is there: a module moved or renamed shows here."""
    import importlib

    files = {p.name for folder in ("tiltframe", "tests", "bench", "scripts", "web", "docs")
             for p in (ROOT / folder).rglob("*") if "node_modules" not in p.parts}
    missing = []
    for doc in PAGES_AND_EXAMPLES:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for m in re.finditer(r"(?<![\w/.-])((?:tiltframe|tests|bench|scripts|web|docs)/[\w./-]*\w)", text):
            if not (ROOT / m[1]).exists() and not m[1].startswith(NOT_COMMITTED):
                missing.append(f"{doc}: path {m[1]}")
        for m in re.finditer(rf"(?<![\w/.-])((?:{'|'.join(PACKAGES)})/[\w/]+\.(?:py|lark))", text):
            if not (ROOT / "tiltframe" / m[1]).exists():
                missing.append(f"{doc}: path {m[1]} (under tiltframe/)")
        for m in re.finditer(r"`([\w-]+\.(?:py|lark|sh|js|css|html))`", text):
            if m[1] not in files:
                missing.append(f"{doc}: file {m[1]}")
        for m in re.finditer(r"(?<![\w/.])tiltframe(?:\.\w+)+", text):
            parts = m[0].split(".")
            if parts[-1] in ("py", "siddhi", "db", "toml", "json", "lark", "md"):  # a file name, not a module
                continue
            for i in range(len(parts), 0, -1):
                try:
                    found: Any = importlib.import_module(".".join(parts[:i]))
                    break
                except ImportError:
                    continue
            for attr in parts[i:]:
                if not hasattr(found, attr):
                    missing.append(f"{doc}: name {m[0]}")
                    break
                found = getattr(found, attr)
    assert not missing, "\n".join(missing)


def test_the_index_lists_every_page_once() -> None:
    linked = re.findall(r"\]\(([\w-]+\.md)\)", (ROOT / "docs" / "README.md").read_text(encoding="utf-8"))
    assert sorted(linked) == sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert "docs/README.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_architecture_page_draws_the_layers_the_contract_enforces() -> None:
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c["layers"] for c in settings["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## Import layers\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `(tiltframe[\w.]*)` \|", section, re.M) == layers


def test_the_example_apps_validate_with_what_their_comments_offer() -> None:
    """Each app of tiltframe/examples/ is valid and runnable, also with the annotations its comment says
    may be added: a server store (PostgreSQL, MySQL/MariaDB) and seed 000's late-event policies."""
    from tiltframe.lang import parse_app
    from tiltframe.lang.checks.cross_references import check_runnable

    additions = ("", "@store(type='rdbms', jdbc.url='jdbc:postgresql://db:5432/rollups', username='tf', "
                     "password='secret')",
                 "@store(type='rdbms', jdbc.url='jdbc:mysql://db:3306/rollups', username='tf', password='secret')",
                 "@store(type='rdbms', jdbc.url='jdbc:mariadb://db:3306/rollups', username='tf', password='secret')",
                 "@BufferSize('3')", "@BufferSize('3') @IgnoreEventsOlderThanBuffer('true')",
                 "@IgnoreEventsOlderThanBuffer('false')", "@allowedLateness('10 min')")
    for path in sorted((ROOT / "tiltframe" / "examples").glob("*.siddhi")):
        text = path.read_text(encoding="utf-8")
        for added in additions:
            app = parse_app(text.replace("define aggregation", f"{added}\ndefine aggregation"))
            check_runnable(app)
            assert app.aggregations


# --- SiddhiQL -----------------------------------------------------------------------------------------


def page_definitions(block: Block) -> str:
    """The definitions the blocks of ``block``'s page before it made (SiddhiQL text), or the app file
    ``with PATH`` names."""
    if block.kind == "with":
        return (ROOT / block.directive.args[0]).read_text(encoding="utf-8")  # type: ignore[union-attr]
    texts = []
    for b in BLOCKS:
        if b.doc == block.doc and b.line < block.line and b.kind is None and kind_of(b) == "siddhiql" \
                and defines(b.text):
            texts.append(b.text)
    return "\n".join(texts)


def check_siddhiql(block: Block, definitions: str) -> None:
    """Raises the first error of ``block`` with the page's ``definitions`` before it."""
    from tiltframe.lang import parse_app, parse_continuous, parse_retrieval
    from tiltframe.lang.siddhiql.parser import parse_table_query

    if defines(block.text):
        parse_app(block.text if block.kind == "refused" else f"{definitions}\n{block.text}")
        return
    app = parse_app(definitions)
    tables = {t.name for t in app.tables}
    for statement in statements(block.text):
        word = head_word(statement)
        source = re.search(r"\bfrom\s+(?:partials\s*\(\s*)?(\w+)", statement, re.I)
        if word == "from" and re.search(r"\binsert\b", statement, re.I):
            parse_app(f"{definitions}\n{statement};")
        elif word == "from":
            parse_retrieval(statement, app)
        elif word == "select" and source and source.group(1) in tables:
            parse_table_query(statement, app)
        elif word in ("select", "with"):
            parse_continuous(statement, app)
        else:
            msg = f"not a SiddhiQL statement this test knows (define, from, select, with): {statement[:60]!r}"
            raise AssertionError(msg)


@pytest.mark.parametrize("block", [b for b in BLOCKS if kind_of(b) == "siddhiql"], ids=lambda b: b.id)
def test_siddhiql_blocks_are_valid(block: Block) -> None:
    check_siddhiql(block, page_definitions(block))


@pytest.mark.parametrize("block", [b for b in BLOCKS if kind_of(b) == "refused"], ids=lambda b: b.id)
def test_refused_blocks_are_refused_with_the_message_shown(block: Block) -> None:
    from tiltframe.errors import TiltframeError

    with pytest.raises(TiltframeError) as refused:
        check_siddhiql(block, page_definitions(block))
    page = [b for b in BLOCKS if b.doc == block.doc]
    after = page[page.index(block) + 1] if page.index(block) + 1 < len(page) else None
    if after is not None and after.kind == "message":
        assert str(refused.value).rstrip() == after.text.rstrip()


@pytest.mark.parametrize("block", [b for b in BLOCKS if kind_of(b) == "toml"], ids=lambda b: b.id)
def test_config_files_are_read(block: Block, tmp_path: Path) -> None:
    from tiltframe.engine.rollup.shards import load_deployment

    path = tmp_path / "tiltframe.toml"
    path.write_text(block.text, encoding="utf-8")
    deployment = load_deployment(config=path, env={})
    assert deployment.shard_id or deployment.partition_by_id


# --- the trades store ---------------------------------------------------------------------------------

T0 = 1_704_067_200_000  # 2024-01-01 00:00 GMT
HOUR = 3_600_000


def trades_events() -> pd.DataFrame:
    """270 trades, one every 8 hours from 2024-01-01 to 2024-03-30, three symbols taking turns (each trades
    once a day), prices and quantities made up (no randomness: every run stores the same rows)."""
    i = np.arange(270)
    return pd.DataFrame({
        "symbol": np.array(["IBM", "WSO2", "ORCL"])[i % 3],
        "price": 100 + (i * 37 % 50) + 0.25,
        "quantity": 1 + i * 13 % 40,
        "timestamp": T0 + i * 8 * HOUR,
    })


def readme_app() -> str:
    """The README's app: its first sql block."""
    return next(b.text for b in BLOCKS if b.doc == "README.md" and b.lang in SIDDHI)


@dataclass(frozen=True)
class TradesStore:
    """A directory where the README's app ran over ``data/trades/`` (``trades_events()``) into ``db``:
    ``app.siddhi``, ``data/trades/``, ``tiltframe-data/``."""

    directory: Path
    db: str
    url: str | None  # the server database's JDBC URL

    @property
    def app_file(self) -> Path:
        return self.directory / "app.siddhi"


def write_trades(directory: Path) -> None:
    folder = directory / "data" / "trades"
    folder.mkdir(parents=True)
    events = trades_events()
    for n in range(3):
        part = events.iloc[n * 90:(n + 1) * 90]
        path = folder / f"part-{n}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in part.to_dict(orient="records")), encoding="utf-8")
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # read in this order


@pytest.fixture(scope="module")
def trades_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], TradesStore]]:
    """The trades store of each database, made at its first use and kept for the module."""
    import tiltframe as tf
    from tests.servers import app_with_store, fresh_database

    made: dict[str, TradesStore] = {}
    with ExitStack() as stack:

        def get(db: str) -> TradesStore:
            if db not in made:
                directory = tmp_path_factory.mktemp(f"trades-{db}")
                url = None if db == "sqlite" else stack.enter_context(fresh_database(db))
                text, env = app_with_store(readme_app(), url)
                assert not env
                (directory / "app.siddhi").write_text(text, encoding="utf-8")
                write_trades(directory)
                result = tf.run(tf.load_app(directory / "app.siddhi"),
                                {"TradeStream": str(directory / "data" / "trades")},
                                data_dir=directory / "tiltframe-data", spark=spark)
                assert result.aggregations["TradeAggregation"].events_aggregated == len(trades_events())
                made[db] = TradesStore(directory, db, url)
            return made[db]

        yield get


def days_answer(store: TradesStore) -> pd.DataFrame:
    """Every day bucket of the trades store, as tiltframe answers: AGG_TIMESTAMP, symbol, total, avgPrice."""
    import tiltframe as tf

    return tf.query(tf.load_app(store.app_file),
                    'from TradeAggregation within 0L, 4102444800000L per "days" select AGG_TIMESTAMP, symbol, '
                    "total, avgPrice", data_dir=store.directory / "tiltframe-data")


def run_store_sql(store: TradesStore, text: str) -> pd.DataFrame:
    """The statements of ``text`` run in order on the store's database; the last one's rows."""
    if store.db == "sqlite":
        path = store.directory / "tiltframe-data" / "tiltframe.db"
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for statement in statements(text):
                cursor = conn.execute(statement)
            return pd.DataFrame(cursor.fetchall(), columns=[c[0] for c in cursor.description])
        finally:
            conn.close()
    from tiltframe.model.aggregations import StoreSpec
    from tiltframe.store.urls import store_target

    engine = sa.create_engine(store_target(StoreSpec("rdbms", store.url)))
    try:
        with engine.connect() as conn:
            for statement in statements(text):
                result = conn.exec_driver_sql(statement)
            return pd.DataFrame(result.fetchall(), columns=list(result.keys()))
    finally:
        engine.dispose()


def check_store_rows(rows: pd.DataFrame, store: TradesStore) -> None:
    """The rows a store query gave are the data tiltframe gives: a day's ``symbol`` and ``total`` (with a
    time column, ``AGG_TIME`` or ``time``, and ``avgPrice`` when selected) are the day retrieval's; and
    ``events_read`` equals ``accounted_for`` and the events of the input (the invariant of schema.md)."""
    assert len(rows), "the query returned no row"
    columns = set(rows.columns)
    if {"symbol", "total"} <= columns:
        time = "AGG_TIME" if "AGG_TIME" in columns else "time"
        got = rows.assign(at=pd.to_datetime(rows[time], utc=True))
        want = days_answer(store)
        want["at"] = pd.to_datetime(want["AGG_TIMESTAMP"], unit="ms", utc=True)
        both = got.merge(want, on=["at", "symbol"], how="left", suffixes=("", "_want"), indicator=True)
        assert (both["_merge"] == "both").all(), both[both["_merge"] != "both"]
        assert [int(v) for v in both["total"]] == both["total_want"].tolist()
        if "avgPrice" in columns:
            np.testing.assert_allclose(both["avgPrice"].astype(float), both["avgPrice_want"], rtol=1e-12)
    if {"events_read", "accounted_for"} <= columns:
        read, accounted = ([int(v) for v in rows[c]] for c in ("events_read", "accounted_for"))
        assert read == accounted == [len(trades_events())]


STORE_CASES = [pytest.param(b, db, id=f"{b.id}-{db}", marks=pytest.mark.slow)
               for b in BLOCKS if kind_of(b) == "store" for db in b.directive.args]  # type: ignore[union-attr]


@pytest.mark.parametrize(("block", "db"), STORE_CASES)
def test_store_sql_runs_on_the_store(block: Block, db: str, trades_store: Callable[[str], TradesStore]) -> None:
    store = trades_store(db)
    check_store_rows(run_store_sql(store, block.text), store)


# --- the pages' examples, in order --------------------------------------------------------------------


@dataclass
class Page:
    """Where a page's examples run: its working directory, and the names its python blocks start with."""

    directory: Path
    namespace: dict[str, Any]


def readme_page(spark: Any, tmp_path: Path, trades_store: Callable[[str], TradesStore]) -> Page:
    """The README's examples in the directory where its app ran over data/trades/ (its ``tiltframe run``).
    Its ``purge`` deletes seconds and minutes only (retention from the latest event, docs/retention.md),
    which the store queries of the other pages do not read."""
    return Page(trades_store("sqlite").directory, {})


def preaggregation_page(spark: Any, tmp_path: Path, trades_store: Callable[[str], TradesStore]) -> Page:
    """app.siddhi: the tables the page defines; data/clicks/ (CSV) and data/impressions/ (JSON Lines)."""
    definitions = "\n".join(b.text for b in blocks_of("docs/preaggregation.md", "siddhiql") if defines(b.text))
    (tmp_path / "app.siddhi").write_text(definitions, encoding="utf-8")
    clicks = tmp_path / "data" / "clicks"
    clicks.mkdir(parents=True)
    (clicks / "clicks.csv").write_text("time,site,clicked,cost\n" + "".join(
        f"{t},{'abc'[t % 3]},{int(t % 2 == 0)},{0.5 + t}\n" for t in range(40)), encoding="utf-8")
    impressions = tmp_path / "data" / "impressions"
    impressions.mkdir(parents=True)
    sites = ("news.example", "blog.example", "shop.example")
    (impressions / "part-0.jsonl").write_text("".join(json.dumps({
        "time": T0 + i * 1000, "site": sites[i % 3], "clicked": int(i % 5 == 0), "cost": round(0.1 * i, 1),
        "user": f"u{i % 17}"}) + "\n" for i in range(120)), encoding="utf-8")
    return Page(tmp_path, {})


def kafka_page(spark: Any, tmp_path: Path, trades_store: Callable[[str], TradesStore]) -> Page:
    """``tf``, ``app`` (the stream of the page's comment) and ``df``, a DataFrame of JSON text in
    ``value``: the names the page's signature example uses."""
    import tiltframe as tf

    app = tf.load_app("define stream TradeStream (symbol string, price double, quantity long, ts long);")
    df = spark.createDataFrame([('{"symbol": "IBM", "price": 101.5, "quantity": 3, "ts": 1704067200000}',)],
                               "value string")
    return Page(tmp_path, {"tf": tf, "app": app, "df": df})


#: Pages whose examples need files or names of their own; any other runs in an empty directory.
WORKDIRS: dict[str, Callable[[Any, Path, Callable[[str], TradesStore]], Page]] = {
    "README.md": readme_page,
    "docs/preaggregation.md": preaggregation_page,
    "docs/kafka.md": kafka_page,
}

RUN_PAGES = [pytest.param(doc, id=doc, marks=pytest.mark.slow) for doc in dict.fromkeys(b.doc for b in BLOCKS)
             if any(kind_of(b) in ("python", "doctest") or (kind_of(b) == "shell" and any(
                 is_runnable(c) and (doc, c) not in SKIPPED for c in commands(b))) for b in BLOCKS if b.doc == doc)]


def run_command(command: str, cwd: Path) -> None:
    """``tiltframe ...`` as a new process of this checkout's code, in ``cwd``; it must exit 0."""
    env = {k: v for k, v in os.environ.items() if k != "TILTFRAME_DATA_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    words = shlex.split(command)
    done = subprocess.run([sys.executable, "-m", "tiltframe", *words[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"


def run_python(block: Block, namespace: dict[str, Any]) -> None:
    if how(block) == "doctest":
        test = doctest.DocTestParser().get_doctest(block.text, namespace, block.id, block.doc, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report: list[str] = []
        runner.run(test, out=report.append, clear_globs=False)
        assert not runner.failures, "".join(report)
        namespace.update(test.globs)
    else:
        exec(compile(block.text, block.id, "exec"), namespace)


@pytest.mark.parametrize("doc", RUN_PAGES)
def test_the_pages_examples_run_in_order(doc: str, spark: Any, tmp_path: Path,
                                         trades_store: Callable[[str], TradesStore],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    page = WORKDIRS.get(doc, lambda *_: Page(tmp_path, {}))(spark, tmp_path, trades_store)
    # The page's directory is the process's, not the JVM's (the suite's one session started elsewhere): its
    # relative paths (an input folder, ./tiltframe-data) must still be read and written there.
    monkeypatch.chdir(page.directory)
    monkeypatch.delenv("TILTFRAME_DATA_DIR", raising=False)
    namespace: dict[str, Any] = {"__name__": "__docs__", **page.namespace}
    elsewhere = Path(spark._jvm.java.lang.System.getProperty("user.dir")) / "tiltframe-data"
    there = elsewhere.exists()
    run_page(doc, page, namespace)
    assert there or not elsewhere.exists(), f"the page's examples wrote into the JVM's directory: {elsewhere}"


def run_page(doc: str, page: Page, namespace: dict[str, Any]) -> None:
    for block in (b for b in BLOCKS if b.doc == doc):
        kind = kind_of(block)
        if kind in ("python", "doctest"):
            run_python(block, namespace)
        elif kind == "shell":
            for command in commands(block):
                if is_runnable(command) and (doc, command) not in SKIPPED:
                    run_command(command, page.directory)
