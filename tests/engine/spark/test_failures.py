"""A Spark failure said in one line: the root cause dug out of real Spark exceptions, and the query and
batch a ``foreachBatch`` failure happened in."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tiltframe.engine.spark.failures import BatchFailed, describe_failure, query_label, root_cause, said_where
from tiltframe.errors import StoreError


def test_query_labels() -> None:
    assert query_label("tiltframe-TradeAggregation") == "aggregation TradeAggregation"
    assert query_label("tiltframe-query-prices") == "query prices"
    assert query_label("tiltframe-continuous-max_cpu") == "continuous query max_cpu"
    assert query_label("theirs") == "streaming query theirs"


def test_said_where_names_the_query_and_the_batch() -> None:
    def write(batch: object, batch_id: int) -> None:
        raise StoreError("could not write aggregation A in sqlite:///x.db: disk I/O error\nmore detail")

    with pytest.raises(BatchFailed) as failed:
        said_where("tiltframe-A", write)(None, 7)
    said = "aggregation A, batch 7: could not write aggregation A in sqlite:///x.db: disk I/O error"
    assert str(failed.value) == said
    assert isinstance(failed.value.__cause__, StoreError)  # the original stays chained


def test_a_tiltframe_error_carried_through_spark_text_is_said_as_it_is() -> None:
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] "
        "An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by "
        "the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in run_batch\n'
        "py4j.protocol.Py4JJavaError: An error occurred while calling o1.getResult.\n"
        ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
        "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)\n"
        "Caused by: org.apache.spark.SparkArithmeticException: [ARITHMETIC_OVERFLOW] long overflow. SQLSTATE: 22003\n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "tiltframe.engine.spark.failures.BatchFailed: aggregation A, batch 3: SparkArithmeticException: "
        "long overflow.\n"
        "=== Streaming Query ===\nIdentifier: tiltframe-A [id = 1, runId = 2]\n"
    )
    failure = RuntimeError(text)
    assert root_cause(failure) == "aggregation A, batch 3: SparkArithmeticException: long overflow."
    assert describe_failure(failure) == "aggregation A, batch 3: SparkArithmeticException: long overflow."


def test_a_spark_failure_without_tiltframe_error_names_its_query() -> None:
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage failure\n"
        "Caused by: org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from "
        "the Python worker: Traceback (most recent call last):\n"
        '  File "states.py", line 9, in handle\n'
        "ZeroDivisionError: division by zero\n"
        " SQLSTATE: 38000\n"
        "=== Streaming Query ===\nIdentifier: tiltframe-continuous-max_cpu [id = 1, runId = 2]\n"
    )
    assert describe_failure(RuntimeError(text)) == "continuous query max_cpu: ZeroDivisionError: division by zero"


def test_an_ordinary_exception() -> None:
    assert root_cause(FileExistsError(17, "File exists")) == "FileExistsError: [Errno 17] File exists"


@pytest.mark.slow
def test_root_causes_of_real_spark_failures(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    typed = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"price": pa.array(["ten"])}), typed)
    with pytest.raises(Exception) as read:  # PySpark's own exception types vary by version
        spark.read.schema("price double").parquet(str(typed)).collect()
    said = root_cause(read.value)
    assert "\n" not in said
    assert "Parquet column [price]" in said and str(typed) in said and "SQLSTATE" not in said

    with pytest.raises(Exception) as overflow:
        spark.sql("SELECT sum(x) FROM VALUES (9223372036854775807L), (1L) AS t(x)").toArrow()
    assert root_cause(overflow.value).startswith("SparkArithmeticException: ")
    assert "overflow" in root_cause(overflow.value)

    @F.udf("long")
    def boom(x):  # type: ignore[no-untyped-def]  # PySpark reads type hints as a pandas UDF's
        raise ValueError(f"bad value {x}")

    with pytest.raises(Exception) as python_worker:
        spark.range(1).select(boom("id")).collect()
    assert root_cause(python_worker.value) == "ValueError: bad value 0"
