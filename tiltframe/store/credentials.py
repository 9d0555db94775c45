"""Credentials masked in any text that may show a store URL: every message, log line and HTTP answer.

The masking reads the text, never parses it as a URL: a URL with another mistake (a port that is no number,
an unknown scheme, no host or database, garbage) is the very one an error message shows, and a parser
that gives up on it must not hand it back whole.  What is masked, case-insensitively, in JDBC and
SQLAlchemy URLs, ``key=value;`` strings and annotation text alike:

- a userinfo password, ``scheme://user:SECRET@host`` (to the token's last ``@``: a password may hold one),
  ``user:SECRET@host`` without a scheme, and Oracle's ``thin:user/SECRET@host``;
- the value of every parameter whose name ends in ``password``, ``passwd``, ``pass``, ``pwd``, ``token``,
  ``secret``, ``api_key``, ``api-key`` or ``apikey`` (``password=``, ``sslpassword=``, ``access_token=``,
  ``Pwd = '…';``), up to ``&``, ``;``, a quote, a comma, a bracket or a space; a quoted value whole.

Imports nothing but the standard library: the command line masks its error lines and log records
(:class:`MaskCredentials` on its handlers) without loading SQLAlchemy.
"""

from __future__ import annotations

import logging
import re

__all__ = ["MASK", "MaskCredentials", "mask_credentials"]

MASK = "***"

_KEYS = r"(?:password|passwd|pass|pwd|token|secret|api[_-]?key)"
#: ``key=value`` where the key names a credential (not ``==``: a condition in a query's text).
_PARAMETER = re.compile(
    rf"(?<![\w.-])(?P<key>[\w.-]*{_KEYS})(?P<eq>\s*=(?!=)\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^&;\s'\",()\[\]{{}}]*)",
    re.IGNORECASE,
)
#: ``//user:password@host``: the password runs to the token's last ``@`` (the host holds none).
_USERINFO = re.compile(r"(?P<pre>//[^\s'\"/:@?#]*):(?P<secret>[^\s'\"]*)@(?=[^\s'\"@]*(?:[\s'\"),]|$))")
#: ``user:password@host`` without ``//`` (a URL missing its scheme, or garbage), at a token's start.
_BARE_USERINFO = re.compile(
    r"(?<![^\s'\"(=,;])(?P<pre>[^\s'\"/:@?#]+):(?P<secret>[^\s'\"/]*)@(?=[^\s'\"@]*(?:[\s'\"),]|$))")
#: Oracle's ``thin:user/password@host``.
_ORACLE = re.compile(r"(?P<pre>thin:[^\s'\"/:@]+)/(?P<secret>[^\s'\"@]+)@", re.IGNORECASE)


def mask_credentials(text: str) -> str:
    """``text`` with every credential in it replaced by ``***`` (whatever else is wrong with a URL in it)."""
    if not text:
        return text
    text = _PARAMETER.sub(lambda m: f"{m['key']}{m['eq']}{MASK}", text)
    text = _USERINFO.sub(lambda m: f"{m['pre']}:{MASK}@", text)
    text = _ORACLE.sub(lambda m: f"{m['pre']}/{MASK}@", text)
    return _BARE_USERINFO.sub(lambda m: m[0] if m["secret"] == MASK else f"{m['pre']}:{MASK}@", text)


class MaskCredentials(logging.Filter):
    """A handler's filter that masks the credentials in each record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_credentials(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_credentials(record.exc_text)
        return True
