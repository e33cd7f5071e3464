"""The shipper: moves the log outboxes (a Redis stream a bucket) into SQL, a batch at a time.

One pass reads the oldest records of every bucket's outbox that holds some (a share of the
batch each, ``shares``), writes them in one transaction (``writer.write``: a batch written
twice changes nothing), then trims each stream up to the last record of it committed. The
records of two buckets have no order between them, and need none: every record about one
delivery is of its bucket's stream, whose order the writer keeps (``log_seq``).
A shipper killed between the commit and the trim ships the same batch again; two at once
write the same rows twice, to no effect. Then what finished in the batch is named for
release from Redis (``store/release.py``): the log holds it now. A scheduler process's
shipper works on the buckets its scheduler holds the lease of (store/bucket_leases.py), so
that normally one shipper ships each bucket and the schedulers share the shipping; a
shipper of no leases (the tick's, a test's) ships every bucket. The log's upkeep (its
partitions, retention) is of no bucket: one scheduler at a time keeps it, the holder of a
lock of its own. While SQL is away the outbox grows, delivery goes on, and the pass is
tried again with a backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import cast

import redis
import sqlalchemy as sa

from webhook_service.config import Settings
from webhook_service.history import partitions, records, retention, writer
from webhook_service.log_window import LineWindow
from webhook_service.store import keys, ops
from webhook_service.store.bucket_leases import BucketLeases
from webhook_service.store.due import shares
from webhook_service.store.leadership import Leadership
from webhook_service.store.refusals import Backoff, refused
from webhook_service.store.release import Released, release
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

log = logging.getLogger(__name__)

# The upkeep lock outlasts a slow pass: another takes over this long after its holder dies.
LOCK_SECONDS = 10.0
# The upkeep between batches: PostgreSQL's day partitions made ahead about hourly (days
# ahead, so a missed hour costs nothing); a retention pass this often, and at once again
# while the last one left old rows.
PARTITIONS_EVERY = 3600.0
RETENTION_EVERY = 10.0
_lines = LineWindow()


def _after(entry_id: str) -> str:
    """The smallest stream id above ``entry_id``: XTRIM MINID keeps it and what follows."""
    ms, _, n = entry_id.partition("-")
    return f"{ms}-{int(n) + 1}"


class Shipper:
    def __init__(
        self,
        client: redis.Redis,
        engine: sa.Engine,
        settings: Settings,
        leases: BucketLeases | None = None,
    ) -> None:
        """``leases``: its scheduler's, whose buckets alone it ships; None: every bucket."""
        self._client = client
        self._buckets: Callable[[], Collection[int]] = (
            leases.held if leases is not None else keys.all_buckets
        )
        self._engine = engine
        self._scripts = Scripts(client)
        self.batch_size = settings.log_batch_size
        self._hot_ms = int(settings.hot_seconds * 1000)
        self._interval = settings.log_ship_interval
        self._upkeep_lock = Leadership(client, keys.LOG_UPKEEP_LOCK, LOCK_SECONDS)
        self._retention_days = settings.retention_days
        self._partitions_due = self._retention_due = 0.0  # time.monotonic()

    def ship_once(self) -> int:
        """One batch of the buckets this shipper works on: how many records it committed."""
        buckets = sorted(self._buckets())
        if not buckets:
            return 0
        shipped = self.ship_batch(buckets)
        if not shipped:
            self.release(buckets=buckets)
        return shipped

    def ship_batch(self, buckets: Collection[int] | None = None) -> int:
        """One batch of ``buckets``' outboxes (None: every bucket's), leased or not (a
        replay is harmless): the records committed. First the operational events they asked
        for are made (store/ops.py), whether or not SQL is there: they are deliveries, not
        history."""
        chosen = sorted(keys.all_buckets() if buckets is None else buckets)
        ops.forward(self._scripts, chosen)
        with self._client.pipeline(transaction=False) as pipe:
            for bucket in chosen:
                pipe.xlen(keys.outbox(bucket))
            lengths = pipe.execute()
        taking = shares(dict(zip(chosen, (int(n) for n in lengths), strict=True)), self.batch_size)
        if not taking:
            return 0
        with self._client.pipeline(transaction=False) as pipe:
            for bucket, count in taking.items():
                pipe.xrange(keys.outbox(bucket), "-", "+", count=count)
            read = cast(list[list[tuple[str, dict[str, str]]]], pipe.execute())
        entries = [entry for part in read for entry in part]
        if not entries:
            return 0
        batch = records.parse_all(entries)
        with self._engine.begin() as conn:
            writer.write(conn, batch)
        with self._client.pipeline(transaction=False) as pipe:
            for bucket, part in zip(taking, read, strict=True):
                if part:
                    pipe.xtrim(keys.outbox(bucket), minid=_after(part[-1][0]), approximate=False)
            pipe.execute()
        self.release(records.finished(batch), chosen)
        return len(entries)

    def release(
        self, finished: Sequence[str] = (), buckets: Collection[int] | None = None
    ) -> Released:
        """What finished in a committed batch may leave Redis (after the hot window), and
        what finished earlier in ``buckets`` and whose window has passed leaves now."""
        return release(
            self._scripts, now_ms(), self._hot_ms, 2 * self.batch_size, finished, buckets
        )

    def upkeep(self) -> None:
        """Day partitions made when due, then a retention pass when one is due."""
        clock = time.monotonic()
        if clock >= self._partitions_due:
            with self._engine.begin() as conn:
                partitions.ensure(conn, now_ms())
            self._partitions_due = clock + PARTITIONS_EVERY
        if clock >= self._retention_due:
            pruned = retention.prune(self._engine, now_ms(), self._retention_days)
            self._retention_due = clock + (0.0 if pruned.more else RETENTION_EVERY)

    def run(self, stop: threading.Event) -> None:
        log.info("log shipper running")
        backoff = Backoff()
        while not stop.is_set():
            try:
                shipped = self.ship_once()
                if self._upkeep_lock.hold():
                    self.upkeep()
            except redis.exceptions.RedisError as exc:
                if not refused(exc, "shipping the delivery log"):
                    log.warning("store error; the shipper retries", exc_info=True)
                self._upkeep_lock.lost()
                stop.wait(max(self._interval, backoff.next()))
                continue
            except sa.exc.SQLAlchemyError as exc:
                self.sql_trouble(exc)
                stop.wait(max(self._interval, backoff.next()))
                continue
            backoff.reset()
            # A full batch means more is waiting: go again at once.
            if shipped < self.batch_size:
                stop.wait(self._interval)
        self._upkeep_lock.give_up("log upkeep")
        log.info("log shipper stopped")

    @staticmethod
    def sql_trouble(exc: sa.exc.SQLAlchemyError) -> None:
        left_out = _lines.admit(type(exc).__name__)
        if left_out is None:
            return
        more = f"; {left_out} more since the last such line" if left_out else ""
        log.warning(
            "the delivery log's database refused a batch (%s: %s); the outbox keeps it and "
            "delivery goes on%s",
            type(exc).__name__,
            str(exc).splitlines()[0][:200],
            more,
        )


def start_thread(shipper: Shipper, stop: threading.Event) -> threading.Thread:
    thread = threading.Thread(target=shipper.run, args=(stop,), name="log-shipper", daemon=True)
    thread.start()
    return thread


def wait_shipped(client: redis.Redis, timeout: float = 10.0) -> bool:
    """Whether every outbox emptied within ``timeout`` seconds (tests and `migrate`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if outbox_length(client) == 0:
            return True
        time.sleep(0.05)
    return False


def outbox_length(client: redis.Redis) -> int:
    """The records every bucket's outbox holds."""
    with client.pipeline(transaction=False) as pipe:
        for bucket in keys.all_buckets():
            pipe.xlen(keys.outbox(bucket))
        return sum(int(n) for n in pipe.execute())
