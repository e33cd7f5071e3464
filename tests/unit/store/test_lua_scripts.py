"""The Lua scripts take every key name from keys.LUA_KEYS, so names live in one place."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID
from webhook_service.store.scripts import NAMES, SHEBANGS, source
from webhook_service.store.states import FINAL_STATUSES

LUA_DIR = files("webhook_service.store") / "lua"
LUA_FILES = sorted(p.name for p in LUA_DIR.iterdir() if p.name.endswith(".lua"))
# K.name, but not a longer identifier that merely ends in K (e.g. "BACK.x").
K_FIELD = re.compile(r"(?<![A-Za-z0-9_])K\.([A-Za-z_][A-Za-z0-9_]*)")
PREAMBLE_ENTRY = re.compile(r'([A-Za-z_][A-Za-z0-9_]*) = "((?:[^"\\]|\\.)*)"')


def _code(file: str) -> str:
    """A script's text without Lua comments (block comments first, then line comments)."""
    text = (LUA_DIR / file).read_text()
    text = re.sub(r"--\[(=*)\[.*?\]\1\]", "", text, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", "", text)


def _preamble(name: str) -> str:
    """Every line between the shebang and common.lua: the key table, the operational event
    types, the unindexed values, the log outbox's fields, the final states, the window
    lifetimes, the default application."""
    text = source(name).split("\n", 1)[1]
    return text[: text.index((LUA_DIR / "common.lua").read_text())].rstrip("\n")


def _line(name: str, start: str) -> str:
    (line,) = [line for line in _preamble(name).split("\n") if line.startswith(start)]
    return line


def test_every_script_name_has_a_file_and_every_file_is_used() -> None:
    assert sorted(f"{name}.lua" for name in NAMES) == sorted(set(LUA_FILES) - {"common.lua"})
    assert "common.lua" in LUA_FILES
    assert len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_source_starts_with_its_shebang_then_the_key_table(name: str) -> None:
    shebang, text = source(name).split("\n", 1)
    assert shebang in SHEBANGS
    assert text.startswith("local K = {")
    first = _preamble(name).split("\n")[0]
    assert first.endswith("}")
    table = dict(PREAMBLE_ENTRY.findall(first[len("local K = {") : -1]))
    assert table == keys.LUA_KEYS


@pytest.mark.parametrize("name", NAMES)
def test_each_source_is_preamble_then_common_then_the_script(name: str) -> None:
    text = source(name)
    common = (LUA_DIR / "common.lua").read_text()
    shebang, own = (LUA_DIR / f"{name}.lua").read_text().split("\n", 1)
    assert text == "\n".join((shebang, _preamble(name), common, own))


def test_only_the_steps_that_finish_accepted_work_run_at_maxmemory() -> None:
    allowed = {name for name in NAMES if source(name).startswith("#!lua flags=allow-oom\n")}
    assert allowed == {"lease", "record", "claim_due", "release"}


def test_the_preamble_names_the_outbox_fields_as_keys_spells_them() -> None:
    line = _line("record", "local LOG = {")
    fields = dict(re.findall(r'(\w+) = "([^"]*)"', line))
    assert fields == {f.name.lower(): f.value for f in keys.OutboxField}


def test_the_preamble_names_exactly_the_operational_event_types() -> None:
    line = _line("record", "local OPS_TYPES = {")
    assert re.findall(r'\["([^"]+)"\] = true', line) == list(OPERATIONAL_EVENT_TYPES)


def test_the_preamble_names_the_final_states_and_the_window_lifetimes() -> None:
    final = _line("record", "local FINAL = {")
    assert set(re.findall(r'\["([^"]+)"\] = true', final)) == set(FINAL_STATUSES)
    ttl = _line("record", "local TTL = {")
    assert dict(re.findall(r"(\w+) = (\d+)", ttl)) == {
        k: str(v) for k, v in keys.WINDOW_TTL.items()
    }


def test_every_script_gets_the_same_preamble() -> None:
    assert len({_preamble(name) for name in NAMES}) == 1


def test_the_preamble_is_the_only_place_k_is_defined() -> None:
    for file in LUA_FILES:
        text = _code(file)
        assert re.search(r"\blocal\s+K\b", text) is None, file
        assert re.search(r"(?<![.\w])K\s*=", text) is None, file


@pytest.mark.parametrize("file", LUA_FILES)
def test_every_k_field_a_script_uses_exists_in_lua_keys(file: str) -> None:
    text = (LUA_DIR / file).read_text()
    used = set(K_FIELD.findall(text))
    missing = used - set(keys.LUA_KEYS)
    assert not missing, f"{file} uses K.{sorted(missing)} which keys.LUA_KEYS does not define"


def test_scripts_spell_no_key_prefix_of_their_own() -> None:
    # A literal "whs:1:" in Lua would be a second place where a key name is spelled.
    for file in LUA_FILES:
        assert keys.PREFIX not in (LUA_DIR / file).read_text(), file


def test_comment_stripping_keeps_code() -> None:
    assert "K.due" in _code("claim_due.lua")
    assert "scripts.py prepends" not in _code("common.lua")


def test_the_scan_would_notice_an_unknown_key() -> None:
    sample = "redis.call('ZADD', K.due, 1, id)\nlocal x = K.nonexistent .. id -- K.in_comment"
    assert set(K_FIELD.findall(sample)) - set(keys.LUA_KEYS) == {"nonexistent", "in_comment"}


def test_lua_keys_all_live_under_the_prefix() -> None:
    for field, value in keys.LUA_KEYS.items():
        if field.endswith(("_suffix", "_infix")):
            assert value.startswith(":"), field
        else:
            assert value.startswith(keys.PREFIX), field


def test_python_key_helpers_match_the_lua_templates() -> None:
    assert keys.endpoint("ep_1") == keys.LUA_KEYS["endpoint"] + "ep_1"
    assert keys.delivery("d") == keys.LUA_KEYS["delivery"] + "d"
    assert keys.event("m") == keys.LUA_KEYS["event"] + "m"
    assert keys.backlog("ep") == keys.LUA_KEYS["backlog"] + "ep"
    assert keys.endpoint_minute("ep", 7) == f"{keys.LUA_KEYS['ep_stats']}ep:m:7"
    assert keys.endpoint_hour("ep", 7) == f"{keys.LUA_KEYS['ep_stats']}ep:h:7"
    assert keys.idempotency("app_1", "k1", "abc") == keys.LUA_KEYS["idem"] + "app_1:k1:abc"
    assert keys.LUA_KEYS["due"] == keys.DUE
    assert keys.LUA_KEYS["endpoints"] == keys.ENDPOINTS
    assert keys.LUA_KEYS["apps"] == keys.APPS
    assert keys.LUA_KEYS["apps_uid"] == keys.APPS_UID
    assert keys.app("app_1") == keys.LUA_KEYS["app"] + "app_1"
    assert keys.app_endpoints("app_1") == f"{keys.LUA_KEYS['app']}app_1:endpoints"
    assert keys.sub_type("app_1", "a.b") == f"{keys.LUA_KEYS['sub_type']}app_1:a.b"
    assert keys.sub_all("app_1") == keys.LUA_KEYS["sub_all"] + "app_1"
    assert keys.app_limit("app_1") == keys.limit("app:app_1")


def test_an_idempotency_record_of_schema_3_is_told_from_one_of_today() -> None:
    old = keys.LUA_KEYS["idem"] + "key_1:order:1"
    assert keys.idempotency_key_of(old, "key_1") == "order:1"
    assert keys.idempotency_key_of(old, "key_2") is None
    assert keys.schema4_idempotency(old, "app_default") == keys.idempotency(
        "app_default", "key_1", "order:1"
    )
    assert keys.schema4_idempotency(keys.idempotency("app_x", "key_1", "o"), "app_y") is None
    assert keys.schema4_idempotency(keys.event("msg_1"), "app_y") is None


def test_the_preamble_names_the_default_application() -> None:
    line = _line("record", "local DEFAULT_APP = {")
    assert dict(re.findall(r'(\w+) = "([^"]*)"', line)) == {
        "id": DEFAULT_APP_ID, "uid": DEFAULT_APP_UID, "name": DEFAULT_APP_NAME,
    }  # fmt: skip
