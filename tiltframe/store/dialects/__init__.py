"""Each database a SQL store runs on as one ``StoreDialect`` (``base.py``; ``sqlite.py``, ``postgresql.py``,
``mysql.py``), found by ``lookup.dialect_of``: the store's modules ask it instead of testing a name."""
