"""A Spark failure said in one line: its root cause, and where (which query, which micro-batch).

A failure inside a micro-batch reaches the caller as a ``StreamingQueryException`` whose text nests the
Python traceback of the ``foreachBatch`` function, a ``Py4JJavaError`` and Java stack traces with their
``Caused by:`` chains.  :func:`root_cause` digs the one useful message out of that text, and
:func:`said_where` makes every ``foreachBatch`` function raise :class:`BatchFailed`, whose message names the
query and the batch before that cause, so the first line a user reads is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tiltframe.errors import TiltframeError


class BatchFailed(TiltframeError):
    """A micro-batch failed; the message says which query, which batch, and the root cause."""


#: The last tiltframe error in a failure's text: its class and its (first) line.
_TILTFRAME_ERROR = re.compile(r"^tiltframe\.(?:[a-z_]+\.)*([A-Z]\w+): (.+)$", re.MULTILINE)
#: An exception line of a Java stack trace or a Python traceback: ``[Caused by: ]pkg.Class: message``.
_EXCEPTION = re.compile(r"^(?:Caused by: |: )?((?:[a-z_][\w$]*\.)+[A-Z][\w$]*): (.*)$", re.MULTILINE)
#: A Python exception line at the end of a traceback nested in a Java message.
_PY_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.+)$", re.MULTILINE)
_ERROR_CLASS = re.compile(r"^\[([A-Z0-9_.]+)\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")
_IDENTIFIER = re.compile(r"^Identifier: (\S+) \[id = ", re.MULTILINE)

#: Exceptions that only carry another one.
_WRAPPERS = (
    "Py4JJavaError", "Py4JException", "StreamingQueryException", "ForeachBatchUserFuncException",
    "ExecutionException", "InvocationTargetException", "UndeclaredThrowableException",
)
_WRAPPER_CLASSES = ("STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR")
_WRAPPER_MESSAGES = ("Exception thrown in awaitResult", "Job aborted due to stage failure",
                     "An error occurred while calling", "An exception was raised by the Python Proxy")


def failure_text(exc: BaseException) -> str:
    """Everything a failure says: its message and, for a PySpark exception, the JVM's stack trace."""
    parts = [str(exc)]
    trace = getattr(exc, "_stackTrace", None)  # PySpark's captured exceptions keep the JVM trace here
    if isinstance(trace, str):
        parts.append(trace)
    return "\n".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _is_wrapper(cls: str, message: str) -> bool:
    short = cls.rsplit(".", 1)[-1]
    m = _ERROR_CLASS.match(message)
    return (short in _WRAPPERS or message.startswith(_WRAPPER_MESSAGES)
            or (m is not None and m.group(1).split(".")[0] in _WRAPPER_CLASSES))


def _said(cls: str, message: str, text: str, end: int) -> str:
    """``Class: message`` in one line: without Spark's error class tag and SQLSTATE; a Python worker's
    traceback as its last exception line."""
    if "Traceback (most recent call last)" in message:
        found = _PY_EXCEPTION.search(text, end)
        if found:
            return f"{found.group(1).rsplit('.', 1)[-1]}: {_one_line(found.group(2))}"
    message = _SQLSTATE.sub("", _ERROR_CLASS.sub("", message))
    return f"{cls.rsplit('.', 1)[-1]}: {_one_line(message)}"


def root_cause(exc: BaseException) -> str:
    """The one line that says why ``exc`` happened.

    A tiltframe error (raised in a batch and carried through Spark) is said as it is; otherwise the
    innermost cause that Spark describes with an error class (``[FAILED_READ_FILE...]`` names the file),
    else the innermost cause at all, else the exception's own first line.
    """
    if isinstance(exc, TiltframeError):
        return _one_line(str(exc).split("\n", 1)[0])
    text = failure_text(exc)
    said = _TILTFRAME_ERROR.findall(text)
    if said:
        return _one_line(said[-1][1])
    causes = [(m.group(1), m.group(2).strip(), m.end()) for m in _EXCEPTION.finditer(text)]
    causes = [c for c in causes if c[1] and not _is_wrapper(c[0], c[1])]
    classed = [c for c in causes if _ERROR_CLASS.match(c[1])]
    if classed or causes:
        cls, message, end = (classed or causes)[-1]
        return _said(cls, message, text, end)
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {_one_line(_SQLSTATE.sub('', first))}" if first else type(exc).__name__


def query_label(name: str) -> str:
    """What a streaming query of tiltframe is to a user: ``aggregation X``, ``query X`` or
    ``continuous query X`` (the runner names them ``tiltframe-X``, ``tiltframe-query-X`` and
    ``tiltframe-continuous-X``)."""
    for prefix, kind in (("tiltframe-continuous-", "continuous query"), ("tiltframe-query-", "query"),
                         ("tiltframe-", "aggregation")):
        if name.startswith(prefix):
            return f"{kind} {name[len(prefix):]}"
    return f"streaming query {name}"


def describe_failure(exc: BaseException) -> str:
    """One line for a failure of a run: where (the query, when Spark says) and the root cause."""
    cause = root_cause(exc)
    text = failure_text(exc)
    if _TILTFRAME_ERROR.search(text) is None:  # a tiltframe error already says where
        found = _IDENTIFIER.search(text)
        if found:
            return f"{query_label(found.group(1))}: {cause}"
    return cause


def said_where(query_name: str, fn: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
    """``fn`` (a ``foreachBatch`` function) that raises :class:`BatchFailed` naming the query, the batch
    and the root cause of any failure (the original stays chained to it)."""
    label = query_label(query_name)

    def run_batch(batch: Any, batch_id: int) -> None:
        try:
            fn(batch, batch_id)
        except BatchFailed:
            raise
        except Exception as exc:
            msg = f"{label}, batch {batch_id}: {root_cause(exc)}"
            raise BatchFailed(msg) from exc

    return run_batch
