"""The README's five minutes, run as it writes them: ``make run`` (``webhook-service up``, the
Makefile's recipe) with loopback allowed, ``webhook-service listen`` in a second terminal and
``webhook-service send`` in a third, ending in a verified 204 that the history and the
dashboard show, and the endpoint gone after Ctrl-C. Also what listen does with a forged
request, with ``--forward-to``, and when the service refuses loopback.

The commands are read from the README's code blocks and checked against the ones run here,
so the README cannot drift from what is tested. The one change: the API's port is a free one
rather than 8000 (WEBHOOK_PORT, and WEBHOOK_API_URL for the clients), since tests never
count on a port of the machine being theirs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from signer import Signer, generate_secret
from tests.integration.conftest import serve_api, wait_for
from tests.support.stack import migrate_log, service_env, settings_of
from webhook_service.embedded import EmbeddedValkey

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
# The venv `make run` installs into: `. .venv/bin/activate` puts it first on PATH.
VENV_BIN = Path(sys.executable).parent

# What the README's three terminals type, in order (comments left out).
TERMINALS = [
    ["WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 make run"],
    [
        ". .venv/bin/activate",
        "export WEBHOOK_API_KEY=$(cat var/admin.key)",
        "webhook-service listen --types invoice.paid",
    ],
    [
        ". .venv/bin/activate",
        "export WEBHOOK_API_KEY=$(cat var/admin.key)",
        "webhook-service send invoice.paid '{\"invoice\": 42}'",
        "webhook-service deliveries list --event-type invoice.paid",
    ],
]
# What `make run` runs.
RUN_RECIPE = "$(BIN)/webhook-service up"
# Three Python processes and a Valkey on a busy 2-core machine: a generous bound.
STARTUP_SECONDS = 150
CLI_SECONDS = 60


def readme_terminals() -> list[list[str]]:
    """The commands of each ``# terminal N`` block of the five-minute section."""
    section = README.read_text().split("\n## Five minutes to a signed webhook\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return [
        [line for line in block.splitlines() if line and not line.startswith("#")]
        for block in blocks
        if block.startswith("# terminal ")
    ]


def test_the_readme_shows_the_commands_this_test_runs() -> None:
    assert readme_terminals() == TERMINALS
    # And listen's lines as it prints them (the ids shortened).
    section = README.read_text().split("\n## Five minutes to a signed webhook\n", 1)[1]
    shown = section.split("Terminal 2 shows:\n\n```\n", 1)[1].split("```", 1)[0].splitlines()
    assert re.fullmatch(
        r"Ready: http://127\.0\.0\.1:\d+/webhooks receives invoice\.paid as endpoint ep_\S+ "
        r"\(deleted when this stops\)",
        shown[0],
    )
    assert shown[1:4] == ["Signing secret: whsec_…", "Ctrl-C stops.", ""]
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d  invoice\.paid  msg_\S+  attempt 1  verified  → 204", shown[4]
    )
    recipe = MAKEFILE.read_text().split("\nrun: $(STAMP) jemalloc\n", 1)[1].splitlines()[0]
    assert recipe.strip() == RUN_RECIPE


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_")}


@dataclass
class Terminal:
    """A shell in the service's directory, as the README's lines leave it."""

    cwd: Path
    env: dict[str, str] = field(default_factory=_clean_env)

    def argv(self, line: str) -> list[str] | None:
        """Apply an ``. activate`` or ``export`` line; the argv of a command line."""
        if line == ". .venv/bin/activate":
            self.env["PATH"] = f"{VENV_BIN}{os.pathsep}{self.env.get('PATH', '')}"
            return None
        exported = re.fullmatch(r"export (\w+)=\$\(cat ([\w./]+)\)", line)
        if exported:
            self.env[exported[1]] = (self.cwd / exported[2]).read_text().strip()
            return None
        argv = shlex.split(line)
        assert argv[0] == "webhook-service", line
        # Found on PATH as the shell would: the activated venv's script.
        found = [p for p in self.env["PATH"].split(os.pathsep) if (Path(p) / argv[0]).exists()]
        return [str(Path(found[0]) / argv[0]), *argv[1:]]

    def commands(self, lines: list[str]) -> list[list[str]]:
        return [argv for line in lines if (argv := self.argv(line)) is not None]


@dataclass
class Service:
    """``make run`` in a directory of its own."""

    cwd: Path
    base: str
    process: subprocess.Popen[bytes]

    @property
    def key(self) -> str:
        return (self.cwd / "var" / "admin.key").read_text().strip()

    def terminal(self) -> Terminal:
        made = Terminal(self.cwd)
        made.env["WEBHOOK_API_URL"] = self.base  # the free port, not 8000
        return made

    async def call(self, method: str, path: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.key}"}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, self.base + path, headers=headers) as answer,
        ):
            return answer.status, await answer.json(content_type=None)


def _run_line(line: str) -> tuple[dict[str, str], list[str]]:
    """``VAR=value make run``: the environment it sets, and the Makefile's recipe as argv."""
    *assignments, make, target = shlex.split(line)
    assert (make, target) == ("make", "run")
    env = dict(assignment.split("=", 1) for assignment in assignments)
    return env, [str(VENV_BIN / "webhook-service"), RUN_RECIPE.rsplit(" ", 1)[1]]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    cwd = tmp_path_factory.mktemp("five-minutes")
    port = _free_port()
    assigned, argv = _run_line(TERMINALS[0][0])
    env = {**_clean_env(), **assigned, "WEBHOOK_PORT": str(port)}
    log = (cwd / "up.log").open("ab")
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, process, cwd)
        yield Service(cwd, base, process)
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C in terminal 1
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_ready(base: str, process: subprocess.Popen[bytes], cwd: Path) -> None:
    """Until /readyz answers 200: the API, its store, and the worker and scheduler seen."""
    import requests

    deadline = time.monotonic() + STARTUP_SECONDS
    last = "no answer"
    while time.monotonic() < deadline:
        assert process.poll() is None, (cwd / "up.log").read_text()[-3000:]
        with contextlib.suppress(requests.ConnectionError):
            answer = requests.get(base + "/readyz", timeout=2)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text}"
        time.sleep(0.3)
    log = (cwd / "up.log").read_text()[-3000:]
    raise AssertionError(f"not ready in {STARTUP_SECONDS} s ({last}):\n{log}")


class Output:
    """A running command's standard output, read as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.text = ""
        self._reading = asyncio.ensure_future(self._read(process.stdout))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.text += chunk.decode()

    async def wait_for(self, found: Callable[[str], bool], timeout: float = CLI_SECONDS) -> str:
        deadline = time.monotonic() + timeout
        while not found(self.text):
            if time.monotonic() > deadline or self._reading.done():
                await asyncio.sleep(0.2)  # what is left in the pipe
                raise AssertionError(f"not printed; stdout so far:\n{self.text}")
            await asyncio.sleep(0.05)
        return self.text

    async def close(self) -> tuple[int, str]:
        """Ctrl-C; the exit status and standard error."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        return await self.ended()

    async def ended(self) -> tuple[int, str]:
        """The exit status and standard error, once it has exited."""
        assert self.process.stderr is not None
        err = await asyncio.wait_for(self.process.stderr.read(), CLI_SECONDS)
        code = await asyncio.wait_for(self.process.wait(), CLI_SECONDS)
        await self._reading
        return code, err.decode()


@asynccontextmanager
async def started(argv: list[str], terminal: Terminal) -> AsyncIterator[Output]:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=terminal.cwd, env=terminal.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    output = Output(process)
    try:
        yield output
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def run(argv: list[str], terminal: Terminal) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=terminal.cwd, env=terminal.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), CLI_SECONDS)
    assert process.returncode == 0, err.decode()
    return out.decode()


READY = re.compile(
    r"^Ready: (http://127\.0\.0\.1:\d+/webhooks) receives .* as endpoint (ep_\w+)", re.MULTILINE
)


def ready(text: str) -> tuple[str, str]:
    """The URL and the endpoint the banner names."""
    found = READY.search(text)
    assert found is not None, text
    return found[1], found[2]


def arrival_line(text: str, webhook_id: str) -> str | None:
    return next((line for line in text.splitlines() if f"  {webhook_id}  " in line), None)


async def test_the_five_minutes_end_in_a_verified_204_in_the_history_and_dashboard(
    service: Service,
) -> None:
    listen_terminal, send_terminal = service.terminal(), service.terminal()
    (listen,) = listen_terminal.commands(TERMINALS[1])
    send, history = send_terminal.commands(TERMINALS[2])
    async with started(listen, listen_terminal) as listening:
        url, endpoint_id = ready(await listening.wait_for(lambda t: "Ctrl-C stops." in t))
        status, endpoint = await service.call("GET", f"/v1/endpoints/{endpoint_id}")
        assert status == 200 and endpoint["url"] == url
        assert endpoint["event_types"] == ["invoice.paid"]

        event_id = (await run(send, send_terminal)).strip()
        assert event_id.startswith("msg_")
        text = await listening.wait_for(lambda t: arrival_line(t, event_id) is not None)
        line = arrival_line(text, event_id)
        assert line is not None and line.endswith(
            f"invoice.paid  {event_id}  attempt 1  verified  → 204"
        ), line
        assert '"invoice": 42' in text.split(line, 1)[1]

        # Anyone on loopback can post to it: a forged request is shown and refused.
        forged = b'{"type": "invoice.paid", "data": {"invoice": 43}}'
        headers = Signer([generate_secret()]).headers("msg_forged", int(time.time()), forged)
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=forged, headers=headers) as answer,
        ):
            assert answer.status == 401
        text = await listening.wait_for(lambda t: "msg_forged" in t)
        forged_line = arrival_line(text, "msg_forged")
        assert forged_line is not None and "not verified: no signature matched" in forged_line
        assert forged_line.endswith("→ 401")

        # The history reads the SQL log, which the shipper fills a moment later: wait for
        # it over HTTP (each CLI run is a Python start), then list as the README does.
        async def shipped() -> bool:
            _, page = await service.call("GET", f"/v1/deliveries?event_id={event_id}")
            return [d["status"] for d in page["data"]] == ["succeeded"]

        await wait_for(shipped)
        rows = [r for r in (await run(history, send_terminal)).splitlines() if endpoint_id in r]
        (row,) = rows
        assert row.split()[2:5] == ["succeeded", "1", "204"], row
        delivery_id = row.split()[0]
        await _dashboard_shows(service, delivery_id)

        code, err = await listening.close()  # Ctrl-C in terminal 2
    assert code == 0, err
    assert f"endpoint {endpoint_id} deleted" in err
    status, _ = await service.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert status == 404


async def _dashboard_shows(service: Service, delivery_id: str) -> None:
    """Signed in with the admin key, the deliveries page lists it and its page says 204."""
    jar = aiohttp.CookieJar(unsafe=True)  # cookies for 127.0.0.1, as a browser keeps them
    base = service.base + "/dashboard"
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        async with browser.post(base + "/login", data={"key": service.key}) as signed_in:
            assert signed_in.status == 200
        async with browser.get(base + "/deliveries") as listing:
            assert listing.status == 200 and delivery_id in await listing.text()
        async with browser.get(f"{base}/deliveries/{delivery_id}") as page:
            html = await page.text()
    assert page.status == 200 and "succeeded" in html and "204" in html


@asynccontextmanager
async def app(status: int, body: bytes) -> AsyncIterator[tuple[str, list[web.Request]]]:
    """The user's own app: answers every POST with ``status`` and ``body``."""
    seen: list[web.Request] = []

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        seen.append(request)
        return web.Response(status=status, body=body, content_type="application/json")

    application = web.Application()
    application.router.add_post("/hooks", hook)
    server = TestServer(application, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/hooks")), seen
    finally:
        await server.close()


async def test_forward_to_answers_the_service_what_the_app_answered(service: Service) -> None:
    terminal = service.terminal()
    terminal.commands(TERMINALS[1][:2])  # activate, export the key
    listen = [str(VENV_BIN / "webhook-service"), "listen", "--types", "listen.forwarded"]
    async with (
        app(201, b'{"handled": true}') as (hooks, seen),
        started([*listen, "--forward-to", hooks], terminal) as listening,
    ):
        await listening.wait_for(lambda t: "Ctrl-C stops." in t)
        sent = [str(VENV_BIN / "webhook-service"), "send", "listen.forwarded", '{"n": 7}']
        event_id = (await run(sent, terminal)).strip()
        text = await listening.wait_for(lambda t: f"{hooks} answered 201" in t)
        line = arrival_line(text, event_id)
        assert line is not None and line.endswith("attempt 1  verified  → 201"), line
        assert '"handled": true' in text.split(f"{hooks} answered 201:", 1)[1]
        assert [r.headers["webhook-id"] for r in seen] == [event_id]

        # What the service recorded is what the app said, through the listener.
        attempts: list[dict[str, Any]] = []

        async def recorded() -> bool:
            _, event = await service.call("GET", f"/v1/events/{event_id}")
            (delivery,) = event["deliveries"]
            _, detail = await service.call("GET", f"/v1/deliveries/{delivery['id']}")
            attempts[:] = detail["attempt_log"]
            return bool(attempts)

        await wait_for(recorded)
        assert attempts[0]["status_code"] == 201
        assert attempts[0]["response_body"] == '{"handled": true}'
        code, err = await listening.close()
    assert code == 0, err


async def test_a_service_refusing_loopback_gets_a_hint_and_keeps_no_endpoint(
    valkey: EmbeddedValkey, tmp_path: Path
) -> None:
    # The service as a plain `make run` starts it: loopback not allowed.
    env = service_env(valkey.url, {"WEBHOOK_DATA_DIR": str(tmp_path)})
    del env["WEBHOOK_ALLOWED_NETWORKS"]
    migrate_log(env)
    async with serve_api(settings_of(env)) as (_, api):
        terminal = Terminal(tmp_path)
        terminal.env.update(
            {"WEBHOOK_API_URL": api.base, "WEBHOOK_API_KEY": env["WEBHOOK_ADMIN_KEY"]}
        )
        async with started([str(VENV_BIN / "webhook-service"), "listen"], terminal) as listening:
            code, err = await listening.ended()
        assert code == 1
        assert "destination" in err.lower() or "cannot receive webhooks" in err
        assert "hint: the service refuses loopback URLs unless allowed" in err
        assert "WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8 make run" in err
        status, page, _ = await api.call("GET", "/v1/endpoints")
        assert status == 200 and page["data"] == []
