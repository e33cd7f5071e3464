"""Data dirs written by today's release (commit ``RELEASE``, store schema 2), for the tests of
``webhook-service migrate``.

The release's own code writes them, not a copy of its layout: its tree (``git archive``,
once a session) goes first on PYTHONPATH in this venv (its dependencies are these), and
``WRITER`` runs there. It starts Valkey with AOF the way that release does
(``embedded.start_valkey`` on ``<data dir>/valkey``), writes endpoints, events, deliveries
and attempts through that release's store (its Lua scripts), stops Valkey, and prints
what that release's own readers then say the store holds: the manifest a migrated log must
match. Without the commit in git history (a shallow clone) the tests fail, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from webhook_service.crypto import generate_master_key

RELEASE = "5c3a49f"
REPO = Path(__file__).resolve().parents[2]

Scenario = Literal["small", "large"]
# The deliveries of the large scenario (to eight endpoints each event).
LARGE_DELIVERIES = 20_000


@dataclass(frozen=True)
class ReleaseData:
    directory: Path  # a data dir as the release's `up` leaves it: Valkey's in valkey/
    master_key: str
    # What the release's readers said: endpoints (name -> id, secret), events, deliveries
    # and their attempts (by id), idempotency (event id -> key), pending (delivery ids).
    manifest: dict[str, Any]

    def copy(self, to: Path) -> ReleaseData:
        """A copy to migrate (a migration changes its data dir)."""
        shutil.copytree(self.directory, to, symlinks=True)
        return ReleaseData(to, self.master_key, self.manifest)


def release_tree(into: Path) -> Path:
    """The release's files in ``into``, from git."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{RELEASE}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(
            f"the migration tests write their data with release {RELEASE}, which this "
            f"checkout's git history does not have (a shallow clone?): `git fetch "
            f"--unshallow` first. git said: {found.stderr.decode().strip()}"
        )
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", RELEASE],
        capture_output=True,
        check=True,
    )
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def write(tree: Path, directory: Path, scenario: Scenario) -> ReleaseData:
    """A data dir in ``directory`` written by the release in ``tree``."""
    master_key = generate_master_key()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")}
    env.update({"PYTHONPATH": str(tree), "RELEASE_TREE": str(tree)})
    env["WEBHOOK_MASTER_KEY"] = master_key
    done = subprocess.run(
        [sys.executable, "-c", WRITER, str(directory), scenario, str(LARGE_DELIVERIES)],
        env=env,
        cwd=tree,
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the release's writer failed:\n{done.stderr.decode()[-4000:]}")
    return ReleaseData(directory, master_key, json.loads(done.stdout))


# Run by the release's interpreter path, against the release's modules: this tree's type
# checker and linter cannot judge it (its API is another version's), so it is text here.
WRITER = r'''
import asyncio
import json
import os
import sys
from pathlib import Path

import webhook_service

TREE = Path(os.environ["RELEASE_TREE"]).resolve()
assert Path(webhook_service.__file__).resolve().is_relative_to(TREE), webhook_service.__file__

from signer import generate_secret
from webhook_service.crypto import SecretBox
from webhook_service.embedded import start_valkey
from webhook_service.ids import new_id, seq_tail
from webhook_service.store import keys
from webhook_service.store.connect import async_client
from webhook_service.store.deliveries import Attempt, DeliveryStore, HealthPolicy
from webhook_service.store.endpoints import EndpointRecord, EndpointStore, SealedSecret
from webhook_service.store.events import EventStore, IdempotencyClaim
from webhook_service.store.retention import trim_async
from webhook_service.store.schema import start_check
from webhook_service.store.scripts import Scripts
from webhook_service.timeutil import now_ms

DAY = 86_400_000
# Never disabled for failing here: the disabled endpoint is disabled by hand.
HEALTH = HealthPolicy(disable_after_ms=365 * DAY, ops_budget=3)
LONG = "x" * 2000  # a response body too long for the hash: the overflow list
FANOUT = 8  # the large scenario's endpoints


class Writer:
    def __init__(self, client):
        scripts = Scripts(client)
        self.client = client
        self.box = SecretBox(os.environ["WEBHOOK_MASTER_KEY"])
        self.endpoints = EndpointStore(client, scripts)
        self.events = EventStore(client, scripts)
        self.deliveries = DeliveryStore(client, scripts)
        self.scripts = scripts
        self.made = {}

    async def endpoint(self, name, types, at, disabled=False):
        endpoint_id, secret = new_id("ep", at), generate_secret()
        record = EndpointRecord(
            id=endpoint_id, url=f"http://127.0.0.1:9/{name}", description=name,
            event_types=types, disabled=disabled, created_ms=at, updated_ms=at,
            secrets=[SealedSecret(self.box.seal(secret, endpoint_id))],
        )
        await self.endpoints.save(record, creating=True)
        self.made[name] = {"id": endpoint_id, "secret": secret}
        return endpoint_id

    async def event(self, event_type, at, idem=None):
        event_id = new_id("msg", at)
        claim = None
        if idem is not None:
            claim = IdempotencyClaim("key_rel", idem, "fp-" + idem, 86_400, "done", at + 1000)
        accepted = await self.events.accept(
            event_id=event_id, event_type=event_type, body=json.dumps({"at": at}),
            key_id="key_rel", now_ms=at, budget=3, grace_ms=1000, idempotency=claim,
            wakeup=None,
        )
        return event_id, list(accepted.delivery_ids)

    async def attempt(self, delivery_id, at, code, body="", error=None, delay_ms=0):
        lease = await self.deliveries.lease([delivery_id], "tok", at, 30_000, 100)
        assert lease.jobs, lease.skipped
        number = lease.jobs[0].attempt
        outcome = "ok" if code is not None and code < 300 else "fail"
        recorded = await self.deliveries.record(
            delivery_id=delivery_id, token="tok", now_ms=at,
            attempt=Attempt(number, at, 12 + number, code, error, body),
            outcome=outcome, delay_ms=delay_ms, health=HEALTH,
        )
        return recorded.status

    async def manifest(self, pending):
        c = self.client
        events, deliveries = {}, {}
        for event_id in await c.zrange(keys.EVENTS_INDEX, 0, -1):
            e = await self.events.get(event_id)
            events[event_id] = {
                "type": e.type, "key_id": e.key_id, "body": e.body,
                "expunged": await c.hget(keys.event(event_id), "expunged"),
                "deliveries": sorted(e.delivery_ids),
            }
        ids = await c.zrange(keys.DELIVERIES_INDEX, 0, -1)
        logs = []
        for start in range(0, len(ids), 500):
            logs += await asyncio.gather(
                *(self.deliveries.attempts(d) for d in ids[start : start + 500])
            )
        attempt_logs = dict(zip(ids, logs))
        for d in await self.deliveries.get_many(ids):
            deliveries[d.id] = {
                "event_id": d.event_id, "endpoint_id": d.endpoint_id,
                "event_type": d.event_type, "status": d.status, "attempts": d.attempts,
                "next_at_ms": d.next_at_ms, "updated_ms": d.updated_ms,
                "last_code": d.last_code, "last_error": d.last_error,
                "last_class": d.last_class,
                "attempt_log": [a.to_json() for a in attempt_logs[d.id]],
            }
        idempotency = {}
        async for name in c.scan_iter(match=keys.PREFIX + "idem:*"):
            idempotency[await c.hget(name, "event")] = name.rsplit(":", 1)[1]
        return {
            "endpoints": self.made, "events": events, "deliveries": deliveries,
            "idempotency": idempotency, "pending": sorted(pending),
            "retention_cursor": await c.get(keys.LUA_KEYS["retention_cursor"]),
        }


async def small(w, now):
    """Succeeded, failed (exhausted), pending (an attempt made) and disabled deliveries,
    long attempts, idempotency records, a replay, an expunged payload, an event no one
    takes, and one retention trimmed (so its cursor is set)."""
    await w.endpoint("ok", ["rel.ok"], now - 10)
    await w.endpoint("fail", ["rel.fail"], now - 9)
    await w.endpoint("pending", ["rel.pending"], now - 8)
    await w.endpoint("disabled", ["rel.pending"], now - 7, disabled=True)
    # An endpoint made before sequence numbers (before 5d6847a): this release still takes
    # it, and its delivery ids end with its id body.
    legacy = await w.endpoint("legacy", ["rel.pending", "rel.ok"], now - 6)
    seq = int(await w.client.hget(keys.endpoint(legacy), "seq"))
    await w.client.hdel(keys.endpoint(legacy), "seq")
    await w.client.hdel(keys.ENDPOINT_SEQS, seq_tail(seq))

    old = now - 40 * DAY
    _, ids = await w.event("rel.ok", old)
    for d in ids:
        assert await w.attempt(d, old + 5, 200, "ok") == "succeeded"
    trimmed = await trim_async(w.scripts, now, 30)
    assert trimmed.events == 1, trimmed

    kept, ids = await w.event("rel.ok", now - 5, idem="order-1")
    for d in ids:
        assert await w.attempt(d, now - 4, 200, "thanks") == "succeeded"
    expunged, ids = await w.event("rel.ok", now - 4)
    for d in ids:
        assert await w.attempt(d, now - 3, 204) == "succeeded"
    replayed = await w.events.replay(
        kept, w.made["ok"]["id"], now - 3, 3, 1000, sender=None
    )
    for d in replayed.pending:
        assert await w.attempt(d, now - 2, 200, "again") == "succeeded"
    assert await w.events.expunge_payload(expunged, now - 2, sender=None)

    _, (failing,) = await w.event("rel.fail", now - 3)
    assert await w.attempt(failing, now - 3, 500, "no", delay_ms=0) == "pending"
    assert await w.attempt(failing, now - 2, 503, LONG, delay_ms=0) == "pending"
    assert await w.attempt(failing, now - 1, None, error="timeout", delay_ms=0) == "failed"

    _, ids = await w.event("rel.pending", now - 2, idem="order-2")
    pending = []
    for d in ids:
        status = await w.client.hget(keys.delivery(d), "status")
        if status == "pending":
            # One attempt made (in the hash, or the overflow list), the next due soon.
            body = LONG if d.endswith(legacy[3:]) else "busy"
            assert await w.attempt(d, now - 1, 503, body, delay_ms=500) == "pending"
            pending.append(d)
    assert len(pending) == 2, ids
    await w.event("rel.nobody", now - 1)
    return pending


async def large(w, now):
    """Events to eight endpoints, nearly every delivery succeeded, every 50th event's
    pending (no attempt yet)."""
    for n in range(FANOUT):
        await w.endpoint(f"e{n}", ["big"], now - FANOUT + n)
    count = int(sys.argv[3]) // FANOUT
    pending = []

    async def one(n):
        at = now - 2 * count + 2 * n
        _, ids = await w.event("big", at, idem=f"big-{n}" if n % 10 == 0 else None)
        if n % 50 == 0:
            pending.extend(ids)
            return
        # One lease for the event's deliveries, as a worker takes a wake-up's batch.
        lease = await w.deliveries.lease(ids, "tok", at + 1, 30_000, 1000)
        assert len(lease.jobs) == len(ids), lease.skipped
        for job in lease.jobs:
            await w.deliveries.record(
                delivery_id=job.delivery_id, token="tok", now_ms=at + 1,
                attempt=Attempt(1, at + 1, 9, 200, None, "ok"), outcome="ok", delay_ms=0,
                health=HEALTH,
            )

    for start in range(0, count, 50):
        await asyncio.gather(*(one(n) for n in range(start, min(count, start + 50))))
    return pending


async def main():
    directory, scenario = Path(sys.argv[1]), sys.argv[2]
    valkey = start_valkey(directory / "valkey")
    try:
        # What each of its processes does first: a fresh store is stamped with its schema.
        assert start_check(valkey.url) is None
        client = async_client(valkey.url)
        w = Writer(client)
        now = now_ms()
        pending = await (small(w, now) if scenario == "small" else large(w, now))
        manifest = await w.manifest(pending)
        await client.aclose()
    finally:
        valkey.stop()
    print(json.dumps(manifest))


asyncio.run(main())
'''
