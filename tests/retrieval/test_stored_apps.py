"""An edited app reads the store before it is migrated: the measures and levels stored unchanged answer as
before (equal to pandas), one not stored yet is refused with the command that adds it, and inspect shows
what the store holds.  A change every row depends on (the zone) is still refused, naming the plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiltframe as tf
from tiltframe.errors import QueryError, StoreError

A = """
define stream Trades (symbol string, price double, volume long, ts long);
define aggregation TA
from Trades
select symbol, sum(price) as total, count() as n
group by symbol
aggregate by ts every sec ... hour;
"""
# B: a measure and a level added, one measure removed, none of it migrated.
B = A.replace("count() as n", "max(volume) as biggest").replace("every sec ... hour", "every sec ... day")
HOUR = 3_600_000
T0 = 472_222 * HOUR


@pytest.mark.slow
def test_an_edited_app_reads_what_the_store_holds(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    events = pd.DataFrame({"symbol": rng.choice(["IBM", "WSO2"], 300), "price": np.round(rng.uniform(1, 9, 300), 2),
                           "volume": rng.integers(1, 99, 300), "ts": T0 + rng.integers(0, 3 * HOUR, 300)})
    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    events.to_csv(inbox / "1.csv", index=False)
    a, b = tf.load_app(A), tf.load_app(B)
    tf.run(a, {"Trades": inbox}, data_dir=data, spark=spark)

    got = tf.query(b, "from TA within 0L, 9000000000000L per 'hours' select AGG_TIMESTAMP, symbol, total",
                   data_dir=data)
    want = events.assign(h=events.ts // HOUR * HOUR).groupby(["h", "symbol"])["price"].sum()
    assert dict(zip(zip(got.AGG_TIMESTAMP, got.symbol, strict=True), got.total, strict=True)) == pytest.approx(
        want.to_dict())
    with pytest.raises(QueryError, match="measures biggest and levels days of aggregation TA are defined by the "
                                         "app but not stored yet: add them with tiltframe migrate APP -d DIR"):
        tf.query(b, "from TA within 0L, 9000000000000L per 'hours' select symbol, biggest", data_dir=data)
    with pytest.raises(QueryError, match="not stored yet"):
        tf.query(b, "from TA within 0L, 9000000000000L per 'days' select symbol, total", data_dir=data)
    [info] = tf.inspect(b, data_dir=data)
    assert [t.table for t in info.tables] == ["TA_SECONDS", "TA_MINUTES", "TA_HOURS"]

    zoned = tf.load_app(A.replace("define aggregation", "@timezone('+05:30')\ndefine aggregation"))
    with pytest.raises(StoreError, match="rebuild every level of TA from its inputs: its time zone changed"):
        tf.query(zoned, "from TA within 0L, 9000000000000L per 'hours' select symbol, total", data_dir=data)


@pytest.mark.slow
def test_inspect_of_an_edited_app_shows_the_store_and_the_plan(spark, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tiltframe.cli.commands import app as cli

    data, inbox = tmp_path / "data", tmp_path / "in"
    inbox.mkdir()
    pd.DataFrame({"symbol": ["IBM"], "price": [1.5], "volume": [3], "ts": [T0]}).to_csv(inbox / "1.csv", index=False)
    tf.run(tf.load_app(A), {"Trades": inbox}, data_dir=data, spark=spark)
    (tmp_path / "b.siddhi").write_text(B)
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "b.siddhi"), "-d", str(data)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "TA_HOURS" in result.output and "TA_DAYS" not in result.output.split("not migrated yet")[0]
    assert "the app's definition of TA is not migrated yet" in result.output
    assert "  - measure biggest added" in result.output
