"""The delivery log in SQL: every event, delivery and attempt, kept after Redis lets go.

Redis holds the work in flight; each state change there appends its record to the log
outbox (a Redis stream) in the same atomic step. The shipper (``shipper.py``) writes the
outbox to SQL in batches, with upserts keyed by ids, then trims what it committed. The
history routes read SQL, and Redis for what is still in flight.

- ``records.py``: the outbox's entries, parsed into typed records;
- ``tables.py``: the SQL tables (the schema itself is the migrations' own);
- ``database.py``: engines for SQLite (embedded) or PostgreSQL, and migrating them;
- ``writer.py``: one batch of records in one transaction;
- ``shipper.py``: the loop that moves the outbox into SQL;
- ``filters.py``: what a history query asks for, and a page of the answer;
- ``queries.py``: the history's SQL, one index walked per list;
- ``reader.py``: the history as the API serves it, SQL with Redis for what is in flight;
- ``tenancy.py``: the rows made before applications, given to the default one.
"""
