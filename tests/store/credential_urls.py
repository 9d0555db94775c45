"""Store URLs that carry a credential in each of its forms and have one more mistake each: what the tests of
masking (``tests/store/test_credentials.py``, ``tests/cli/test_credentials_masked.py``,
``tests/http/test_credentials.py``) feed to every command, log and answer."""

from __future__ import annotations

#: How a URL carries its secret: in the userinfo, or as a query parameter of each credential name (any case).
FORMS = ("userinfo", "password", "PASSWORD", "pass", "pwd", "passwd", "token", "access_token", "secret",
         "api_key", "apikey")
#: What else is wrong with the URL.
MISTAKES = ("bad port", "unknown scheme", "missing database", "unparsable", "unreachable")


def store_url(form: str, mistake: str, secret: str) -> str:
    """A JDBC URL holding ``secret`` in ``form``, with ``mistake`` (an unreachable server: nothing listens on
    port 1)."""
    scheme = {"unknown scheme": "jdbc:mongodb://", "unparsable": "jdbc:postgresql://["}.get(mistake,
                                                                                           "jdbc:postgresql://")
    userinfo = f"tf:{secret}@" if form == "userinfo" else ""
    host = {"bad port": "127.0.0.1:54x2", "unreachable": "127.0.0.1:1"}.get(mistake, "127.0.0.1:5432")
    path = "/" if mistake == "missing database" else "/tiltframe"
    query = "" if form == "userinfo" else f"?user=tf&{form}={secret}"
    return f"{scheme}{userinfo}{host}{path}{query}"
