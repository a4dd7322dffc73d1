"""The service-side toolkit: what a service that a saga calls keeps in its *own* database.

- ``localdb``: which driver a connection is, and its local transactions;
- ``idempotency``: the idempotency-key table (``IdempotencyKeys``), so a repeated step's
  effect happens once;
- ``outbox``: the transactional outbox, its relay, the inbox and the publishers.

They commit in the same local transaction as the service's business update, on the connection
it already uses (``sqlite3`` or psycopg 3). The old paths ``sagaway.idempotency``,
``sagaway.localdb`` and ``sagaway.outbox`` still import the same names.
"""
