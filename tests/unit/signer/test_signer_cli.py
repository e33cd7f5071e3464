"""The ``python -m signer`` command line, run as subscribers run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from signer import Verifier, generate_secret

ROOT = Path(__file__).resolve().parents[3]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"test": 2432232314}'
VECTOR = [
    "--id",
    "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "--timestamp",
    "1614265330",
]


def run(
    *args: str, body: bytes = BODY, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "WEBHOOK_SECRET"}
    environment.update(env or {})
    completed = subprocess.run(
        [sys.executable, "-m", "signer", *args],
        input=body.decode(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=30,
        check=False,
    )
    for output in (completed.stdout, completed.stderr):
        assert "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" not in output
    return completed


def test_sign_prints_the_test_vector_headers() -> None:
    result = run("sign", "--secret", SECRET, *VECTOR)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp: 1614265330",
        "webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ]


def test_sign_then_verify_round_trip_with_file_body(tmp_path: Path) -> None:
    body_file = tmp_path / "body.json"
    body_file.write_bytes(BODY)
    signed = run("sign", "--secret", SECRET, "--json", str(body_file), body=b"")
    assert signed.returncode == 0, signed.stderr
    headers = json.loads(signed.stdout)
    assert headers["webhook-id"].startswith("msg_")
    assert Verifier([SECRET]).verify(BODY, headers) == BODY

    verified = run(
        "verify",
        "--secret",
        SECRET,
        "--id",
        headers["webhook-id"],
        "--timestamp",
        headers["webhook-timestamp"],
        "--signature",
        headers["webhook-signature"],
        str(body_file),
        body=b"",
    )
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "ok\n", "")


def test_verify_failure_exits_1_with_the_reason() -> None:
    args = [*VECTOR, "--signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="]
    ok = run("verify", "--secret", SECRET, *args, "--now", "1614265330")
    assert (ok.returncode, ok.stdout) == (0, "ok\n")

    tampered = run("verify", "--secret", SECRET, *args, "--now", "1614265330", body=BODY + b" ")
    assert tampered.returncode == 1
    assert tampered.stdout == ""
    assert tampered.stderr.startswith("NoMatchingSignatureError: no signature matched")

    stale = run("verify", "--secret", SECRET, *args)
    assert stale.returncode == 1
    assert stale.stderr.startswith("TimestampTooOldError: ")

    wrong_key = run("verify", "--secret", generate_secret(), *args, "--now", "1614265330")
    assert wrong_key.returncode == 1


def test_verify_with_public_key_and_env_secret(tmp_path: Path) -> None:
    generated = run("generate", "--ed25519", "--json")
    keys = json.loads(generated.stdout)
    assert keys["private_key"].startswith("whsk_") and keys["public_key"].startswith("whpk_")

    signed = run("sign", *VECTOR, "--json", env={"WEBHOOK_SECRET": keys["private_key"]})
    headers = json.loads(signed.stdout)
    assert headers["webhook-signature"].startswith("v1a,")
    verified = run(
        "verify",
        "--public-key",
        keys["public_key"],
        *VECTOR,
        "--signature",
        headers["webhook-signature"],
        "--tolerance",
        "0",
        "--now",
        "1614265330",
    )
    assert (verified.returncode, verified.stdout) == (0, "ok\n")


def test_generate_secret() -> None:
    result = run("generate")
    assert result.returncode == 0
    name, value = result.stdout.strip().split(": ")
    assert name == "secret" and value.startswith("whsec_")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["sign", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2La"], id="short-key"),
        pytest.param(["sign"], id="no-key"),
        pytest.param(["sign", "--secret", SECRET, "/nonexistent/body"], id="no-file"),
    ],
)
def test_usage_and_key_errors_exit_2_without_echoing_the_key(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert "error:" in result.stderr
