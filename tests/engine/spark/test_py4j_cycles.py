"""Python's full collection now and then after a micro-batch: Py4J's proxies of JVM objects are in reference
cycles, so only it lets the JVM drop the objects of finished batches."""

from __future__ import annotations

import gc
import weakref

import pytest

from tiltframe.engine.spark import py4j_cycles


def test_a_used_proxy_waits_for_the_cyclic_collector_and_after_batch_runs_it(spark, monkeypatch) -> None:
    monkeypatch.setattr(py4j_cycles, "_last", float("-inf"))
    gc.disable()
    try:
        proxy = spark.sparkContext._jvm.java.util.ArrayList()
        proxy.add("x")  # a method asked for: the proxy keeps it, and it points back (a cycle)
        gone = weakref.ref(proxy)
        del proxy
        assert gone() is not None  # reference counting alone does not free it
        assert py4j_cycles.after_batch()
        assert gone() is None
    finally:
        gc.enable()


def test_after_batch_collects_at_most_once_an_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(py4j_cycles.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(py4j_cycles, "_last", 1000.0 - py4j_cycles.INTERVAL_SECONDS)
    calls = []
    monkeypatch.setattr(py4j_cycles.gc, "collect", lambda: calls.append(now[0]) or 0)
    assert py4j_cycles.after_batch()  # due
    assert not py4j_cycles.after_batch()  # just ran
    now[0] += py4j_cycles.INTERVAL_SECONDS - 0.5
    assert not py4j_cycles.after_batch()
    now[0] += 0.5
    assert py4j_cycles.after_batch()
    assert calls == [1000.0, 1000.0 + py4j_cycles.INTERVAL_SECONDS]
