"""The values each measure skipped (its argument null or NaN), counted in the batch's Spark job and stored
with its commit: equal to pandas over the raw events in the run's totals, ``tf.inspect`` and ``tiltframe
inspect`` (table and JSON), on the embedded store and on PostgreSQL and MariaDB; a replayed batch adds
nothing; the batches of a store made before the count stay "unknown"; the staged path counts alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tiltframe as tf
from tests.bad_input.harness import run, store_url
from tests.engine.rollup.test_staged_writes import Spy
from tests.servers import SERVER_STORES, STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.cli.commands import app as cli
from tiltframe.engine.inputs.batch_sessions import SMALL_BATCH_ENV
from tiltframe.engine.inputs.filesystems import checkpoint_root
from tiltframe.engine.rollup.markers import checkpoint_dir
from tiltframe.engine.rollup.pipeline import AggregationPipeline, pipeline_id_for
from tiltframe.engine.rollup.staged_writes import STAGED_WRITES_ENV
from tiltframe.store.open_stores import StoreRegistry
from tiltframe.store.schema import SKIPPED_VALUES

pytestmark = pytest.mark.slow

APP = """
define stream S (k string, v double, n long, w string, ts long);
define aggregation A from S
select k, avg(v) as avgV, sum(n) as sumN, min(v) as minV, max(n) as maxN, stdDev(v) as sdV, count(w) as countW,
       count() as events, first(v) as firstV, last(n) as lastN, distinctCount(w) as distinctW, kll(v) as qV,
       avg(v * n) as avgVN
group by k
aggregate by ts every sec ... day;
"""
#: Per measure that takes an argument, the attributes whose missing value makes it skip the event.
READS = {"avgV": ("v",), "sumN": ("n",), "minV": ("v",), "maxN": ("n",), "sdV": ("v",), "countW": ("w",),
         "firstV": ("v",), "lastN": ("n",), "distinctW": ("w",), "qV": ("v",), "avgVN": ("v", "n")}
#: Without sketches, whose states are merged on the driver: batches of this one can be staged.
STAGEABLE = APP.replace(" distinctCount(w) as distinctW, kll(v) as qV,", "")
STAGED_READS = {m: r for m, r in READS.items() if m not in ("distinctW", "qV")}
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def events(n: int, seed: int) -> pd.DataFrame:
    """``n`` events over three hours; each of ``v``, ``n`` and ``w`` missing now and then, as JSON null, as a
    field left out or, for the double ``v``, as NaN; ``bad``: the event is rejected (``v`` no number, or no
    key), and no measure sees it."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"k": rng.choice(["a", "b", "c"], n), "v": rng.integers(-400, 400, n) / 4,
                       "n": rng.integers(0, 50, n), "w": rng.choice(["x", "y", "z"], n),
                       "ts": T0 + rng.integers(0, 3 * 3_600_000, n)})
    for column, choices in (("v", ["null", "absent", "NaN"]), ("n", ["null", "absent"]), ("w", ["null", "absent"])):
        df[f"{column}_as"] = np.where(rng.random(n) < 0.15, rng.choice(choices, n), "value")
    df["bad"] = np.where(rng.random(n) < 0.04, rng.choice(["v", "k"], n), "")
    return df


def write_jsonl(df: pd.DataFrame, path: Path) -> None:
    lines = []
    for r in df.to_dict("records"):
        event: dict[str, object] = {"k": r["k"], "ts": int(r["ts"])}
        for column in ("v", "n", "w"):
            form = r[f"{column}_as"]
            if form == "value":
                event[column] = r[column].item() if hasattr(r[column], "item") else r[column]
            elif form in ("null", "NaN"):
                event[column] = None if form == "null" else "NaN"
        if r["bad"] == "v":
            event["v"] = "not a number"
        elif r["bad"] == "k":
            event.pop("k")
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def oracle(df: pd.DataFrame, measures: dict[str, tuple[str, ...]] = READS) -> dict[str, int]:
    """Per measure, the aggregated events whose argument is missing (computed from how each was written)."""
    kept = df[df["bad"] == ""]
    missing = {c: kept[f"{c}_as"] != "value" for c in ("v", "n", "w")}
    return {m: int(np.logical_or.reduce([missing[c] for c in reads]).sum()) for m, reads in measures.items()}


#: The events as a source of text delivers them (``v`` as its text: "NaN", "not a number").
RAW_SCHEMA = "k string, v string, n long, w string, ts long"


def as_rows(df: pd.DataFrame) -> list[tuple[object, ...]]:
    """The events as rows of ``RAW_SCHEMA``, written as ``write_jsonl`` writes them."""
    rows = []
    for r in df.to_dict("records"):
        v = {"value": str(r["v"]), "NaN": "NaN"}.get(r["v_as"])
        rows.append((None if r["bad"] == "k" else r["k"], "not a number" if r["bad"] == "v" else v,
                     int(r["n"]) if r["n_as"] == "value" else None, r["w"] if r["w_as"] == "value" else None,
                     int(r["ts"])))
    return rows


def drop_table(app: tf.AppSpec, data_dir: Path) -> None:
    """What a store written by an earlier version holds: no table of skipped values at all."""
    stores = StoreRegistry(data_dir)
    try:
        store = stores.for_aggregation(app.aggregation("A"))
        with store._engine.begin() as conn:  # type: ignore[attr-defined]
            conn.exec_driver_sql(f"DROP TABLE {conn.dialect.identifier_preparer.quote(SKIPPED_VALUES)}")
    finally:
        stores.close()


@pytest.mark.parametrize("kind", STORES)
def test_skipped_values_equal_pandas_and_a_replay_adds_nothing(spark: object, tmp_path: Path, kind: str) -> None:
    inbox, data = tmp_path / "in", tmp_path / "data"
    inbox.mkdir()
    parts = [events(120, seed) for seed in (1, 2, 3)]
    write_jsonl(parts[0], inbox / "0.jsonl")
    with store_url(kind) as url:
        first = run(spark, APP, {"S": inbox}, data, store=url)
        app = first.app
        assert first.totals["A"].values_skipped == oracle(parts[0])
        drop_table(app, data)  # the batch so far was committed by a version that did not count
        (info,) = tf.inspect(app, data_dir=data)
        assert {v.measure: (v.skipped, v.batches_counted, v.batches_not_counted) for v in info.values_skipped} == \
            dict.fromkeys(READS, (None, 0, 1))

        for i in (1, 2):
            write_jsonl(parts[i], inbox / f"{i}.jsonl")
        later = run(spark, APP, {"S": inbox}, data, store=url, max_files_per_trigger=1)
        assert later.totals["A"].batches == 2
        both = pd.concat(parts[1:], ignore_index=True)
        want = oracle(both)
        assert later.totals["A"].values_skipped == want
        events_counted = int((both["bad"] == "").sum())
        expected = {m: (n, events_counted, 2, 1) for m, n in want.items()}

        def stored() -> dict[str, tuple[int | None, int, int, int]]:
            (info,) = tf.inspect(app, data_dir=data)
            return {v.measure: (v.skipped, v.events, v.batches_counted, v.batches_not_counted)
                    for v in info.values_skipped}

        assert stored() == expected

        # Spark replays a batch the store committed (the checkpoint did not record it): nothing is added.
        layout = AggregationLayout.of(app, "A")
        folder = checkpoint_dir(data, layout, checkpoint_root(None, data))
        stores = StoreRegistry(data)
        try:
            pipeline = AggregationPipeline(layout, stores.for_aggregation(layout.spec), pipeline_id_for(folder, layout))
            frame = spark.createDataFrame(as_rows(parts[1]), RAW_SCHEMA)  # type: ignore[attr-defined]
            assert pipeline.process(frame, 1).skipped
        finally:
            stores.close()
        assert stored() == expected

        text, env = app_with_store(APP, url)
        app_file = tmp_path / "app.siddhi"
        app_file.write_text(text, encoding="utf-8")
        runner = CliRunner()
        as_json = runner.invoke(cli, ["inspect", str(app_file), "--format", "json", "--data-dir", str(data)], env=env)
        as_table = runner.invoke(cli, ["inspect", str(app_file), "--data-dir", str(data)], env=env)
    assert as_json.exit_code == 0, as_json.output
    (doc,) = json.loads(as_json.stdout)
    assert {v["measure"]: (v["skipped"], v["events"], v["batches_counted"], v["batches_not_counted"])
            for v in doc["values_skipped"]} == expected
    assert as_table.exit_code == 0, as_table.output
    assert "values skipped (argument null or NaN)" in as_table.stdout
    line = next(s for s in as_table.stdout.splitlines() if "avgVN" in s)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    share = f"{want['avgVN'] / events_counted:.1%}"
    assert cells == ["avgVN", f"{want['avgVN']:,}", f"{events_counted:,}", share, "1"]


@pytest.mark.parametrize("staged", [True, False], ids=["staged", "driver"])
@pytest.mark.parametrize("server", SERVER_STORES)
def test_the_staged_path_counts_as_the_driver_does(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   server: str, staged: bool) -> None:
    """Partial rows copied by the executors (only per-task sums reach the driver) or brought to the driver:
    the same counts, equal to pandas, whatever the tasks the events fall into."""
    monkeypatch.setenv(SMALL_BATCH_ENV, "0")
    monkeypatch.setenv(STAGED_WRITES_ENV, "1" if staged else "0")
    parts = [events(150, seed) for seed in (4, 5, 6)]
    with fresh_database(server) as url:
        text, env = app_with_store(STAGEABLE, url, "TF_TEST_STORE_PASSWORD")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        app = tf.load_app(text)
        layout = AggregationLayout.of(app, "A")
        stores = StoreRegistry(tmp_path)
        try:
            store = stores.for_aggregation(layout.spec)
            spy = Spy(store)
            pipeline = AggregationPipeline(layout, spy, "skipped-test")
            for batch_id, part in enumerate(parts):
                frame = spark.createDataFrame(as_rows(part), RAW_SCHEMA).repartition(3)
                report = pipeline.process(frame, batch_id)
                assert report.stats.values_skipped == oracle(part, STAGED_READS), batch_id
            info = store.info(layout)
            assert all((b.staged is not None) == staged for b in spy.batches)
        finally:
            stores.close()
    want = oracle(pd.concat(parts, ignore_index=True), STAGED_READS)
    assert pipeline.totals.values_skipped == want
    assert {v.measure: v.skipped for v in info.values_skipped} == want
    assert all(v.batches_counted == 3 and v.batches_not_counted == 0 for v in info.values_skipped)
