"""The example queries of seed 003 (Timeplus), as written there, for the tests of every layer."""

from __future__ import annotations

SEED_GLOBAL_PERIODIC = """SELECT device, count(*)
FROM device_utils
WHERE cpu_usage > 99
EMIT PERIODIC 5s"""
SEED_TUMBLE_DEFAULT = """SELECT device, max(cpu_usage)
FROM tumble(device_utils, 5s)
GROUP BY device, window_end"""
SEED_TUMBLE_DELAY_TYPO = """SELECT device, max(cpu_usage)
FROM tumble(device_utils, 5s)
GROUP BY device, widnow_end
EMIT AFTER WINDOW CLOSE WITH DELAY 2s;"""
SEED_PERIODIC_HAVING = """SELECT window_start, count() AS cnt
FROM tumble(car_live_data, 5s)
GROUP BY window_start
HAVING cnt > 300
EMIT PERIODIC 1s"""
SEED_REPEAT = """SELECT count() FROM t
EMIT PERIODIC 3s REPEAT"""
SEED_ON_UPDATE = """SELECT
window_start, cid, count() AS cnt
FROM
tumble(car_live_data, 5s)
WHERE
cid IN ('c00033', 'c00022')
GROUP BY
window_start, cid
EMIT ON UPDATE"""
SEED_ON_UPDATE_DELAY = SEED_ON_UPDATE + " WITH DELAY 2s"
SEED_ON_UPDATE_BATCH = SEED_ON_UPDATE + " WITH BATCH 2s"
SEED_TIMEOUT_NOTE = """SELECT window_start, count() as count FROM tumble(stream,2s)
GROUP BY window_start"""
SEED_OTEL = """WITH grouped AS(
SELECT
trace_id,
min(start_time) AS start_ts,
max(end_time) AS end_ts,
date_diff('ms', start_ts, end_ts) AS span_ms,
group_array(json_encode(span_id, parent_span_id, name, start_time, end_time, attributes)) AS trace_events
FROM otel_traces
GROUP BY trace_id
EMIT AFTER KEY EXPIRE IDENTIFIED BY end_time WITH MAXSPAN 500ms AND TIMEOUT 2s
)
SELECT json_encode(trace_id, start_ts, end_ts, span_ms, trace_events) AS event FROM grouped
SETTINGS default_hash_table='hybrid', max_hot_keys=1000000, allow_independent_shard_processing=true;"""
