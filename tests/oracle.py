"""Independent answers over raw events (DuckDB GROUP BY on floored timestamps), for comparisons."""

from __future__ import annotations

import duckdb
import pandas as pd

#: The app every oracle comparison runs: all built-in functions plus a latest-event value.
APP = """
define stream TradeStream (symbol string, price double, quantity long, ts long);
define aggregation TradeAggregation
from TradeStream
select symbol, avg(price) as avgPrice, sum(quantity) as total, count() as trades,
       min(price) as low, max(price) as high, price * quantity as last
group by symbol
aggregate by ts every sec ... year;
"""

DUCK_UNITS = {"seconds": "second", "minutes": "minute", "hours": "hour", "days": "day", "months": "month",
              "years": "year"}


def rollup(events: pd.DataFrame, per: str) -> pd.DataFrame:
    """Per GMT bucket and symbol: avg/sum/count/min/max and the latest event's price*quantity.

    ``events`` has symbol, price, quantity, ts (epoch ms) and arrival (global arrival position).
    """
    unit = DUCK_UNITS[per]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("events", events)
    return con.execute(
        f"""
        SELECT epoch_ms(date_trunc('{unit}', make_timestamp(ts * 1000))) AS AGG_TIMESTAMP, symbol,
               avg(price) AS avgPrice, sum(quantity) AS total, count(*) AS trades,
               min(price) AS low, max(price) AS high,
               arg_max(price * quantity, ts * 1000000 + arrival) AS last
        FROM events GROUP BY ALL ORDER BY AGG_TIMESTAMP, symbol
        """
    ).df()
