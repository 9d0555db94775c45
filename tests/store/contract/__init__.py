"""The store contract: what every kind of store must do, each test run on every kind (the ``store_kind``
fixture of tests/store/conftest.py, over ``tests.servers.STORES``: SQLite, PostgreSQL, MariaDB).

A new kind of store joins by adding its name to ``STORES`` and a way to open a fresh one to
``tests.store.conftest.fresh_store``; it is done when this folder passes on it.  Tests of one database's
own ways (SQLite's file, a server's collations) stay beside it in tests/store/.
"""
