"""The real-export workload of ``bench/exports.py``: its three forms hold the same rows, as pandas reads them
back, and its meta states their totals (what ``bench/bench_exports.py`` checks every run against)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import exports


def test_the_three_forms_hold_the_same_rows_and_the_meta_their_totals(tmp_path: Path) -> None:
    meta = exports.write(5000, tmp_path, files=4, seed=7, cancel_pct=3.0)
    assert json.loads((tmp_path / "meta.json").read_text()) == meta
    forms = {form: sorted((tmp_path / form).iterdir()) for form in exports.FORMS}
    assert [len(files) for files in forms.values()] == [4, 4, 4]
    iso = pd.concat([pd.read_csv(f) for f in forms["csv-iso"]], ignore_index=True)
    ms = pd.concat([pd.read_csv(f) for f in forms["csv-ms"]], ignore_index=True)
    parquet = pd.concat([pd.read_parquet(f) for f in forms["parquet"]], ignore_index=True)
    assert len(iso) == len(ms) == len(parquet) == meta["rows"] == 5000
    # One instant in three spellings: ISO-8601 text with a Z, epoch ms, a timestamp column.
    as_ms = pd.to_datetime(iso["time_hour"], format="%Y-%m-%dT%H:%M:%SZ", utc=True).astype("int64") // 10**6
    assert iso["time_hour"].str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z").all()
    assert (as_ms == ms["time_hour"]).all()
    assert (parquet["time_hour"].astype("int64") // 10**6 == ms["time_hour"]).all()
    assert ms["time_hour"].is_monotonic_increasing  # monthly files in time order, as exports are
    # The stated totals, and real nulls: a cancelled flight has no delays.
    assert int(ms["dep_delay"].notna().sum()) == meta["dep_delay_values"]
    assert float(ms["dep_delay"].sum()) == meta["dep_delay_sum"]
    assert int(ms["distance"].sum()) == meta["distance_sum"]
    assert int(ms["cancelled"].sum()) == meta["cancelled"]
    assert int(ms.isna().sum().sum()) == meta["null_cells"]
    assert ms.loc[ms["cancelled"], ["dep_delay", "arr_delay", "air_time"]].isna().all().all()
    assert 0.02 < meta["null_cells"] / (len(ms) * 5) < 0.05
    assert len(ms.columns) == 20
    for form in exports.FORMS:
        assert "define aggregation" in (tmp_path / f"{form}.siddhi").read_text()
