"""Live progress of a run on stderr: micro-batches, events/s, rejected events and the watermark.

On a terminal it is a rich ``Live`` table refreshed a few times a second; anywhere else (CI logs, pipes)
it prints one plain line per micro-batch instead, so logs stay readable and ``stdout`` stays for data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tiltframe.cli import logs
from tiltframe.engine.rollup.reports import BatchReport, PipelineTotals
from tiltframe.timeutil.parse import format_ts


@dataclass
class _AggProgress(PipelineTotals):
    """Run totals plus the last batch's rate, for the live table."""

    last_events: int = 0
    last_seconds: float = 0.0

    def add(self, r: BatchReport) -> None:
        super().add(r)
        if not r.skipped:
            self.last_events, self.last_seconds = r.stats.events_read, r.seconds


class RunProgress:
    """Collects :class:`BatchReport` s (from Spark's callback thread) and shows them on ``console``.

    Use as a context manager around the run and pass :meth:`on_batch` as the run's ``on_batch``.
    """

    def __init__(
        self, console: Console, aggregations: list[str], *, follow: bool = False, logged: bool = False
    ) -> None:
        """``logged``: the logs say each micro-batch already (``--verbose``, JSON logs), so no plain lines
        are printed, and no live display either under JSON logs (stderr holds JSON only)."""
        self.console = console
        self.follow = follow
        self.logged = logged
        self.started = time.monotonic()
        self.status = (
            "following the inputs — press Ctrl-C to stop" if follow else "processing available input"
        )
        self._lock = threading.Lock()
        self._aggs = {name: _AggProgress() for name in aggregations}
        self._live: Live | None = None

    def on_batch(self, report: BatchReport) -> None:
        """The run's ``on_batch`` callback; thread-safe."""
        with self._lock:
            agg = self._aggs.setdefault(report.aggregation, _AggProgress())
            agg.add(report)
        if self._live is None and not self.logged:
            self._print_line(report, agg)

    def _print_line(self, r: BatchReport, agg: _AggProgress) -> None:
        if r.skipped:
            self.console.print(
                f"{r.aggregation}: batch {r.batch_id} was already committed; skipped",
                highlight=False,
                soft_wrap=True,
            )
            return
        s = r.stats
        rate = s.events_read / r.seconds if r.seconds > 0 else 0.0
        self.console.print(
            f"{r.aggregation}: batch {r.batch_id}: {s.events_read:,} events read, "
            + (f"{s.events_moved:,} moved, " if s.events_moved else "")
            + f"{s.events_rejected:,} rejected, {r.rows_written:,} rows written in {r.seconds:.1f}s "
            f"({rate:,.0f} events/s); "
            f"watermark {format_ts(agg.max_event_ts)}",
            highlight=False,
            soft_wrap=True,
        )

    def __rich__(self) -> Group:
        elapsed = time.monotonic() - self.started
        table = Table(title=None, expand=False, show_edge=False, pad_edge=False)
        for name, justify in (
            ("aggregation", "left"),
            ("micro-batches", "right"),
            ("events read", "right"),
            ("rejected", "right"),
            ("events/s", "right"),
            ("rows written", "right"),
            ("watermark (GMT)", "left"),
        ):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        with self._lock:
            for name, a in self._aggs.items():
                rate = a.last_events / a.last_seconds if a.last_seconds > 0 else 0.0
                batches = f"{a.batches:,}" + (f" (+{a.skipped} skipped)" if a.skipped else "")
                table.add_row(
                    name,
                    batches,
                    f"{a.events_read:,}",
                    Text(f"{a.events_rejected:,}", style="yellow" if a.events_rejected else ""),
                    f"{rate:,.0f}",
                    f"{a.rows_written:,}",
                    format_ts(a.max_event_ts),
                )
        header = Text(f"tiltframe — {self.status} — {elapsed:,.0f}s elapsed", style="bold")
        return Group(header, table)

    def __enter__(self) -> RunProgress:
        self.started = time.monotonic()
        if self.console.is_terminal and not self.console.is_dumb_terminal and not logs.settings.json:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            interrupted = exc_type is KeyboardInterrupt or self.status.startswith("stopping")
            self.status = "stopped by Ctrl-C" if interrupted else "done"
            self._live.stop()
            self._live = None
