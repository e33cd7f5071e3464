"""Re-seal every endpoint secret and header value under a new master key, online and
resumable.

Each endpoint is rewritten on its own under optimistic locking (WATCH the hash, re-read,
re-seal, MULTI/HSET/EXEC, retry on a conflict), so an API update or a secret rotation that
lands mid-run is never overwritten. Values already sealed with the new key are left as
they are: a second run, or a run after a crash, only finishes what is left.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from webhook_service.crypto import MasterKeyError, SecretBox, generate_master_key
from webhook_service.store.apikeys import reseal_pepper
from webhook_service.store.endpoint_rewrite import (
    Rewrite,
    RewriteConflict,
    endpoint_ids,
    rewrite_endpoint,
)
from webhook_service.store.endpoints import (
    SealedSecret,
    decode_headers,
    decode_secrets,
    encode_headers,
    encode_secrets,
    header_associated,
)


@dataclass
class RekeyReport:
    resealed: int = 0  # endpoints rewritten under the new key
    already_current: int = 0  # endpoints with nothing to do (all sealed under the new key)
    missing: int = 0  # endpoints deleted between the listing and the rewrite

    def __str__(self) -> str:
        return (
            f"resealed: {self.resealed}, already current: {self.already_current}, "
            f"missing (deleted mid-run): {self.missing}"
        )


def _reseal(old: SecretBox, new: SecretBox, token: str, associated: str, endpoint_id: str) -> str:
    """``token`` sealed under ``new`` (itself when it already is)."""
    if new.sealed_with_current(token):
        return token
    try:
        return new.seal(old.open(token, associated), associated)
    except MasterKeyError as exc:
        raise MasterKeyError(f"endpoint {endpoint_id}: {exc}") from None


def _resealed(
    old: SecretBox, new: SecretBox, endpoint_id: str, secrets_text: str, headers_text: str
) -> tuple[str, str] | None:
    """The endpoint's ``secrets`` and ``headers`` (whose values are sealed) with every value
    under ``new``, or None when every one already is."""
    secrets = decode_secrets(secrets_text)
    headers = decode_headers(headers_text)
    tokens = [s.sealed for s in secrets] + list(headers.values())
    if all(new.sealed_with_current(token) for token in tokens):
        return None
    return (
        encode_secrets(
            [
                SealedSecret(_reseal(old, new, s.sealed, endpoint_id, endpoint_id), s.expires_ms)
                for s in secrets
            ]
        ),
        encode_headers(
            {
                name: _reseal(old, new, token, header_associated(endpoint_id, name), endpoint_id)
                for name, token in headers.items()
            }
        ),
    )


def _rekey_one(client: redis.Redis, old: SecretBox, new: SecretBox, endpoint_id: str) -> Rewrite:
    def change(values: list[str]) -> dict[str, str] | None:
        resealed = _resealed(old, new, endpoint_id, values[0], values[1])
        return None if resealed is None else {"secrets": resealed[0], "headers": resealed[1]}

    return rewrite_endpoint(client, endpoint_id, ("secrets", "headers"), change)


def rotate_master_key(
    client: redis.Redis, old: SecretBox, new: SecretBox, batch: int = 100
) -> RekeyReport:
    """Re-seal every endpoint's secrets and header values, and the API keys' pepper, under
    ``new``; ``old`` must open them.

    ``old`` and ``new`` may be one keyring holding both keys (current = the new one).
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    report = RekeyReport()
    for endpoint_id in endpoint_ids(client, batch):
        match _rekey_one(client, old, new, endpoint_id):
            case Rewrite.REWRITTEN:
                report.resealed += 1
            case Rewrite.UNCHANGED:
                report.already_current += 1
            case Rewrite.MISSING:
                report.missing += 1
    reseal_pepper(client, old, new)
    return report


PROCEDURE = """\
Zero-downtime master-key rotation:
  1. Restart every API, worker and scheduler process with
       WEBHOOK_MASTER_KEY=<new key>
       WEBHOOK_PREVIOUS_MASTER_KEYS=<old key>
     They seal with the new key and open secrets sealed with either.
  2. Run, with WEBHOOK_MASTER_KEY=<old key> (or the settings of step 1):
       webhook-service rotate-master-key --new-key <new key>
     Run it again until it reports 0 resealed: a run is idempotent and resumable.
  3. Restart the processes without WEBHOOK_PREVIOUS_MASTER_KEYS, and retire the old key.
With a rolling restart, first roll out WEBHOOK_PREVIOUS_MASTER_KEYS=<new key> alone (the
master key still the old one), so no process meets a secret sealed with a key it lacks.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """``webhook-service rotate-master-key [--new-key B64]``; ``argv`` is what follows it."""
    parser = argparse.ArgumentParser(
        prog="webhook-service rotate-master-key",
        description="Re-seal every endpoint secret and header value under a new master key. "
        "WEBHOOK_MASTER_KEY (and WEBHOOK_PREVIOUS_MASTER_KEYS) must open the stored secrets.",
    )
    parser.add_argument(
        "--new-key",
        metavar="B64",
        help="the new master key (base64 of 32 bytes). Without it a key is generated and "
        "printed, and nothing is re-sealed yet: running processes must learn it first.",
    )
    args = parser.parse_args(argv)

    if args.new_key is None:
        new_key = generate_master_key()
        print(f"new master key: {new_key}\n")
        print("Nothing re-sealed yet: no running process knows this key.\n")
        print(PROCEDURE.replace("<new key>", new_key))
        return 0

    from webhook_service.config import Settings
    from webhook_service.store.connect import RedisTimeouts, sync_client
    from webhook_service.wiring import ConfigurationError, secret_box

    settings = Settings()
    try:
        old = secret_box(settings)
        new = SecretBox(args.new_key)
    except (ConfigurationError, MasterKeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = sync_client(settings.effective_redis_url, RedisTimeouts.of(settings))
    try:
        report = rotate_master_key(client, old, new)
    except (MasterKeyError, RewriteConflict) as exc:
        print(f"error: {exc}\nRerun once fixed; finished endpoints are skipped.", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(f"re-sealed under master key {new.current_kid}: {report}")
    print(f"new master key: {args.new_key}\n")
    print(PROCEDURE.replace("<new key>", args.new_key))
    return 0
