"""A definition whose every stored row changes (zone, keys) migrated with its inputs on every store: the
rollup is rebuilt beside the stored one and swapped in, the pipeline goes on from the earlier checkpoint,
and every level then equals pandas over the raw events: no file skipped, none counted twice.  The earlier
definition's pipeline is refused once the swap is done."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import pytest

import tiltframe as tf
from tests.engine.rollups import APP, HOUR, T0, ZONE, ZONED, check, trades
from tests.servers import STORES, app_with_store, fresh_database
from tiltframe.aggregates.layout import AggregationLayout
from tiltframe.errors import StoreError
from tiltframe.store.base import BatchStats, BatchWrite
from tiltframe.store.open_stores import StoreRegistry

A, B = APP, ZONED
KEYS = A.replace("select symbol,", "select symbol, venue,").replace("group by symbol", "group by symbol, venue")


@pytest.mark.slow
@pytest.mark.parametrize("backend", STORES)
def test_a_changed_zone_is_rebuilt_beside_and_swapped_in(spark, tmp_path: Path, backend: str) -> None:
    with nullcontext(None) if backend == "sqlite" else fresh_database(backend) as url:
        a, b = (tf.load_app(app_with_store(text, url)[0]) for text in (A, B))
        data, inbox = tmp_path / "data", tmp_path / "in"
        inbox.mkdir()
        first, second = trades(1, T0, 500), trades(2, T0 + 6 * HOUR, 300)
        first.to_csv(inbox / "1.csv", index=False)
        tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)
        # A store object that had the old definition's tables ready, as a running pipeline's has.
        old = AggregationLayout.of(a, "TA")
        stores = StoreRegistry(data)
        running = stores.for_aggregation(old.spec)
        running.ensure_schema(old)

        step = f"rebuild every level of TA from its inputs: its time zone changed (UTC -> {ZONE})"
        refused = "refused without --input Trades=PATH: every level must be rebuilt from the inputs"
        assert tf.plan_changes(b, data_dir=data)["TA"] == [step, refused]
        with pytest.raises(StoreError, match="--input STREAM=PATH"):
            tf.migrate(b, data_dir=data)
        done = tf.migrate(b, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
        assert done[0] == step
        assert done[1].startswith("rebuilt from 500 events of 1 input files beside the stored rollup")
        assert tf.migrate(b, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"] == []
        check(b, data, first, zone=ZONE)

        # The earlier definition's pipeline, still running, cannot write into the swapped tables.
        batch = BatchWrite("old", 99, BatchStats(0, 0, 0))
        with pytest.raises(StoreError, match="migrated to another definition while this pipeline ran"):
            running.write_batch(old, batch)
        stores.close()

        second.to_csv(inbox / "2.csv", index=False)
        tf.run(b, {"Trades": inbox}, data_dir=data, spark=spark)
        both = pd.concat([first, second], ignore_index=True)
        check(b, data, both, zone=ZONE)
        assert all(not v.differences for v in tf.verify(b, {"Trades": inbox}, data_dir=data, spark=spark).values())


@pytest.mark.slow
def test_a_changed_key_is_rebuilt_and_a_pipeline_goes_on(spark, tmp_path: Path) -> None:
    a, keyed = tf.load_app(A), tf.load_app(KEYS)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    first, second = trades(3, T0, 400), trades(4, T0 + 6 * HOUR, 200)
    first.to_csv(inbox / "1.csv", index=False)
    tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)
    second.to_csv(inbox / "2.csv", index=False)  # a file the pipeline has not read yet: the next run's
    done = tf.migrate(keyed, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
    assert done[0].startswith("rebuild every level of TA from its inputs: its group by changed")
    assert done[1] == "rebuild every level of TA from its inputs: its type of venue changed (none -> string)"
    assert done[2].startswith("rebuilt from 400 events of 1 input files")
    assert "1 files of the input are not read yet by the pipeline: left out" in done
    check(keyed, data, first, keys=("symbol", "venue"))
    tf.run(keyed, {"Trades": inbox}, data_dir=data, spark=spark)
    check(keyed, data, pd.concat([first, second], ignore_index=True), keys=("symbol", "venue"))


@pytest.mark.slow
def test_a_finer_level_is_rebuilt_from_the_inputs_and_lost_inputs_refuse_a_rebuild(spark, tmp_path: Path) -> None:
    minutes = A.replace("every sec ... day", "every min ... day")
    coarse, fine = tf.load_app(minutes), tf.load_app(A)
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    first, second = trades(5, T0, 300), trades(6, T0 + 6 * HOUR, 200)
    first.to_csv(inbox / "1.csv", index=False)
    second.to_csv(inbox / "2.csv", index=False)
    tf.run(coarse, {"Trades": inbox}, data_dir=data, spark=spark)
    done = tf.migrate(fine, data_dir=data, inputs={"Trades": inbox}, spark=spark)["TA"]
    assert done[0].startswith("level SECONDS added") and "rebuilt from 500 events of 2 input files" in done[1]
    check(fine, data, pd.concat([first, second], ignore_index=True))

    # An input gone: a rebuild would lose its events, so nothing changes.
    (inbox / "2.csv").unlink()
    zoned = tf.load_app(B)
    with pytest.raises(StoreError, match="they hold 300 events it can use, while the store holds 500"):
        tf.migrate(zoned, data_dir=data, inputs={"Trades": inbox}, spark=spark)
    check(fine, data, pd.concat([first, second], ignore_index=True))
