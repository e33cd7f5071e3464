"""Command line for subscribers debugging their webhook receiver.

  python -m signer sign --secret whsec_… [--id msg_…] [--timestamp N] [--json] [FILE|-]
  python -m signer verify --secret whsec_… | --public-key whpk_… --id … --timestamp …
                          --signature '…' [--tolerance 300] [--now N] [FILE|-]
  python -m signer generate [--ed25519] [--json]

Keys given on the command line are visible to other local users (ps, shell
history); every key option therefore falls back to $WEBHOOK_SECRET.
Exit status: 0 success, 1 verification failed, 2 usage or key error.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from signer.errors import InvalidKeyError, WebhookVerificationError
from signer.keys import generate_keypair, generate_secret
from signer.sign import Signer
from signer.verify import DEFAULT_TOLERANCE, Verifier

_ENV_KEY = "WEBHOOK_SECRET"


def _read_body(parser: argparse.ArgumentParser, source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        parser.error(f"cannot read body from {source}: {exc.strerror}")


def _keys_or_env(parser: argparse.ArgumentParser, keys: list[str]) -> list[str]:
    if keys:
        return keys
    from_env = os.environ.get(_ENV_KEY)
    if not from_env:
        parser.error(f"give a key option or set ${_ENV_KEY}")
    # Several keys in the variable mirror several key options (rotation).
    return from_env.split()


def _sign(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        signer = Signer(_keys_or_env(parser, args.secret))
    except InvalidKeyError as exc:
        parser.error(str(exc))
    msg_id = args.id if args.id is not None else "msg_" + secrets.token_hex(12)
    timestamp = args.timestamp if args.timestamp is not None else int(time.time())
    headers = signer.headers(msg_id, timestamp, _read_body(parser, args.body))
    if args.json:
        print(json.dumps(headers))
    else:
        for name, value in headers.items():
            print(f"{name}: {value}")
    return 0


def _verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        verifier = Verifier(_keys_or_env(parser, args.secret + args.public_key), args.tolerance)
    except ValueError as exc:  # InvalidKeyError, or a negative --tolerance
        parser.error(str(exc))
    headers = {
        "webhook-id": args.id,
        "webhook-timestamp": args.timestamp,
        "webhook-signature": args.signature,
    }
    try:
        verifier.verify(_read_body(parser, args.body), headers, now=args.now)
    except WebhookVerificationError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("ok")
    return 0


def _generate(args: argparse.Namespace) -> int:
    if args.ed25519:
        private, public = generate_keypair()
        keys = {"private_key": private, "public_key": public}
    else:
        keys = {"secret": generate_secret()}
    if args.json:
        print(json.dumps(keys))
    else:
        for name, value in keys.items():
            print(f"{name}: {value}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m signer",
        description="Sign or verify Standard Webhooks requests.",
        epilog=f"Key options may be omitted when ${_ENV_KEY} holds the key(s), space-separated.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    sign = commands.add_parser("sign", help="print the webhook-* headers for a body")
    sign.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY",
        help="whsec_… or whsk_… key; repeat to sign with several (rotation)",
    )
    sign.add_argument("--id", help="webhook-id (default: a random msg_…)")
    sign.add_argument("--timestamp", type=int, help="Unix seconds (default: now)")
    sign.add_argument("--json", action="store_true", help="print a JSON object")
    sign.add_argument("body", nargs="?", default="-", help="body file, or - for stdin")

    verify = commands.add_parser("verify", help="check a received signature")
    verify.add_argument(
        "--secret", action="append", default=[], metavar="KEY", help="whsec_… secret; repeatable"
    )
    verify.add_argument(
        "--public-key", action="append", default=[], metavar="KEY", help="whpk_… key; repeatable"
    )
    verify.add_argument("--id", required=True, help="webhook-id header value")
    verify.add_argument("--timestamp", required=True, help="webhook-timestamp header value")
    verify.add_argument("--signature", required=True, help="webhook-signature header value")
    verify.add_argument(
        "--tolerance",
        type=int,
        default=DEFAULT_TOLERANCE,
        help=f"allowed clock skew in seconds (default {DEFAULT_TOLERANCE})",
    )
    verify.add_argument(
        "--now", type=int, help="check freshness against this Unix time (replaying old captures)"
    )
    verify.add_argument("body", nargs="?", default="-", help="body file, or - for stdin")

    generate = commands.add_parser("generate", help="print a new secret or key pair")
    generate.add_argument(
        "--ed25519", action="store_true", help="Ed25519 key pair instead of an HMAC secret"
    )
    generate.add_argument("--json", action="store_true", help="print a JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "sign":
        return _sign(parser, args)
    if args.command == "verify":
        return _verify(parser, args)
    return _generate(args)


if __name__ == "__main__":
    sys.exit(main())
