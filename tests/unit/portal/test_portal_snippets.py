"""The "verify our signature" snippets do what they say: each one we can run here is run
against requests signed as our workers sign them (signer/, the sender's own code), and
must accept those and refuse a tampered body, a wrong secret and an old timestamp."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from types import ModuleType

import pytest
from standardwebhooks import WebhookVerificationError

from signer import generate_secret, sign_headers
from tests.support.receiver import Receiver
from webhook_service.portal.verify_page import SNIPPETS, Snippet

BODY = b'{"type":"invoice.paid","timestamp":"2026-01-31T12:00:00.000Z","data":{"n": 1}}'
SNIPPET_FILES = {s.file: s for s in SNIPPETS}


def _signed(secret: str, body: bytes = BODY, age: int = 0) -> dict[str, str]:
    return sign_headers([secret], "msg_portal_snippet", int(time.time()) - age, body)


def _load(
    snippet: Snippet, tmp_path: Path, secret: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    source = tmp_path / snippet.file
    source.write_text(snippet.text)
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    spec = importlib.util.spec_from_file_location("portal_snippet", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_language_is_on_the_page() -> None:
    languages = {s.language for s in SNIPPETS}
    for name in ("Python", "Node.js", "Go", "Ruby", "PHP"):
        assert name in languages
    assert {"verify.sh", "send-test.sh"} <= set(SNIPPET_FILES)
    assert all(s.text.strip() for s in SNIPPETS)


def test_the_python_snippet_accepts_ours_and_refuses_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = generate_secret()
    snippet = _load(SNIPPET_FILES["verify.py"], tmp_path, secret, monkeypatch)
    assert snippet.verified_event(BODY, _signed(secret)) == {
        "type": "invoice.paid", "timestamp": "2026-01-31T12:00:00.000Z", "data": {"n": 1},
    }  # fmt: skip
    with pytest.raises(WebhookVerificationError):
        snippet.verified_event(BODY.replace(b"1", b"2"), _signed(secret))
    with pytest.raises(WebhookVerificationError):
        snippet.verified_event(BODY, _signed(generate_secret()))
    with pytest.raises(WebhookVerificationError):
        snippet.verified_event(BODY, _signed(secret, age=600))


def _shell(
    file: str, env: dict[str, str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["sh", "-c", SNIPPET_FILES[file].text],
        input=stdin,
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        timeout=30,
        check=False,
    )


def _headers_env(secret: str, headers: dict[str, str]) -> dict[str, str]:
    return {
        "WEBHOOK_SECRET": secret,
        "WEBHOOK_ID": headers["webhook-id"],
        "WEBHOOK_TIMESTAMP": headers["webhook-timestamp"],
        "WEBHOOK_SIGNATURE": headers["webhook-signature"],
    }


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_the_openssl_snippet_accepts_ours_and_refuses_the_rest() -> None:
    secret = generate_secret()
    ours = _shell("verify.sh", _headers_env(secret, _signed(secret)), BODY)
    assert (ours.returncode, ours.stdout) == (0, b"verified\n"), ours.stderr
    tampered = _shell("verify.sh", _headers_env(secret, _signed(secret)), BODY + b" ")
    assert tampered.returncode == 1 and b"no signature matches" in tampered.stdout
    forged = _shell("verify.sh", _headers_env(secret, _signed(generate_secret())), BODY)
    assert forged.returncode == 1
    old = _shell("verify.sh", _headers_env(secret, _signed(secret, age=600)), BODY)
    assert old.returncode == 1 and b"five minutes" in old.stdout
    # During a rotation the header carries two signatures; the new key's is enough.
    both = sign_headers([generate_secret(), secret], "msg_two", int(time.time()), BODY)
    rotated = _shell("verify.sh", _headers_env(secret, both), BODY)
    assert rotated.returncode == 0, rotated.stdout


@pytest.mark.skipif(
    shutil.which("openssl") is None or shutil.which("curl") is None, reason="no openssl/curl"
)
async def test_the_curl_snippet_sends_a_request_a_standard_receiver_accepts() -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        secret = generate_secret()
        receiver.secrets["mine"] = [secret]
        env = {"WEBHOOK_SECRET": secret, "ENDPOINT_URL": receiver.url("mine")}
        process = await _async_shell("send-test.sh", env)
        assert process == b"answer 200"
        [got] = receiver.for_endpoint("mine")
        assert got.verified and got.status == 200
        receiver.secrets["mine"] = [generate_secret()]  # a receiver with another secret
        assert await _async_shell("send-test.sh", env) == b"answer 401"
    finally:
        await receiver.stop()


async def _async_shell(file: str, env: dict[str, str]) -> bytes:
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", SNIPPET_FILES[file].text,
        env={"PATH": os.environ["PATH"], **env},
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    return out


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The npm package the Node snippet names, installed for the test (from npm's cache
    when it has it); skipped where neither node nor the package can be had."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node/npm")
    where = tmp_path_factory.mktemp("node")
    installed = subprocess.run(
        ["npm", "install", "--prefer-offline", "--no-audit", "--no-fund", "standardwebhooks"],
        cwd=where, capture_output=True, timeout=180, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        pytest.skip("the standardwebhooks npm package is not available here")
    return where / "node_modules"


def test_the_node_snippet_accepts_ours_and_refuses_the_rest(
    node_modules: Path, tmp_path: Path
) -> None:
    secret = generate_secret()
    (tmp_path / "verify.js").write_text(SNIPPET_FILES["verify.js"].text)
    check = (
        "const { verifiedEvent } = require('./verify.js');"
        "const [body, headers] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "try { console.log(JSON.stringify(verifiedEvent(body, headers).data)); }"
        "catch (e) { console.log('refused'); }"
    )

    def run(body: bytes, headers: dict[str, str]) -> str:
        done = subprocess.run(
            ["node", "-e", check],
            input=json.dumps([body.decode(), headers]).encode(),
            cwd=tmp_path,
            env={"PATH": os.environ["PATH"], "NODE_PATH": str(node_modules),
                 "WEBHOOK_SECRET": secret},
            capture_output=True, timeout=30, check=True,
        )  # fmt: skip
        return done.stdout.decode().strip()

    assert run(BODY, _signed(secret)) == '{"n":1}'
    assert run(BODY + b" ", _signed(secret)) == "refused"
    assert run(BODY, _signed(generate_secret())) == "refused"
    assert run(BODY, _signed(secret, age=600)) == "refused"
