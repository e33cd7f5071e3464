"""The Lua scripts take every key name from keys.LUA_KEYS, so names live in one place, and
every one of them under the hash tag of the script's bucket (the tag of its KEYS[1]), so
that no script crosses a cluster slot."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from webhook_service.ids import delivery_id, new_id
from webhook_service.operations import OPERATIONAL_EVENT_TYPES
from webhook_service.store import keys
from webhook_service.store.applications import DEFAULT_APP_ID, DEFAULT_APP_NAME, DEFAULT_APP_UID
from webhook_service.store.scripts import FLAGS, NAMES, library, preamble, script
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


def _definition(name: str) -> str:
    """The line of the preamble that defines ``name``."""
    (found,) = [line for line in preamble().split("\n") if line.startswith(f"local {name} = ")]
    return found


def test_the_library_is_the_preamble_then_each_script_as_a_function() -> None:
    made = library()
    digest = made.name.removeprefix("webhook_")
    assert re.fullmatch(r"webhook_[0-9a-f]{16}", made.name)  # what drop_other_releases deletes
    assert made.code.startswith(f"#!lua name={made.name}\n{preamble()}\n")
    assert sorted(made.functions) == sorted(NAMES)
    for name in NAMES:
        flags, body = script(name)
        first = (LUA_DIR / f"{name}.lua").read_text().split("\n", 1)[0]
        assert FLAGS[first] == flags
        assert made.functions[name] == f"webhook_{name}_{digest}"
        quoted = ", ".join(f'"{f}"' for f in flags)
        registered = (
            f"redis.register_function{{function_name = '{made.functions[name]}', "
            f"flags = {{{quoted}}}, callback = function(KEYS, ARGV)\nbind(KEYS)\n{body}\nend}}"
        )
        assert registered in made.code, name


def test_the_key_table_is_bound_before_anything_else_runs() -> None:
    # A script's own code may use K from its first line: bind comes first in every function.
    assert library().code.count("callback = function(KEYS, ARGV)\nbind(KEYS)\n") == len(NAMES)
    assert "K = NO_BUCKET" in preamble()  # a call of no bucket: the parts of names alone


def test_the_preamble_names_every_key_template_and_the_default_buckets_head() -> None:
    table = dict(PREAMBLE_ENTRY.findall(_definition("KT")[len("local KT = {") : -1]))
    assert not set(table) & keys.LUA_PARTS  # the parts are KP's
    table.update(PREAMBLE_ENTRY.findall(_definition("KP")[len("local KP = {") : -1]))
    assert table == keys.LUA_KEYS
    assert _definition("DEFAULT_HEAD") == f'local DEFAULT_HEAD = "{keys.head(0)}"'


def test_only_the_steps_that_finish_accepted_work_run_at_maxmemory() -> None:
    allowed = {name for name in NAMES if script(name)[0] == ("allow-oom",)}
    # ops_emit makes the operational events record steps asked for: their work, to its end.
    assert allowed == {"lease", "record", "claim_due", "release", "ops_emit"}


def test_the_preamble_names_the_outbox_fields_as_keys_spells_them() -> None:
    line = _definition("LOG")
    fields = dict(re.findall(r'(\w+) = "([^"]*)"', line))
    assert fields == {f.name.lower(): f.value for f in keys.OutboxField}


def test_the_preamble_names_exactly_the_operational_event_types() -> None:
    line = _definition("OPS_TYPES")
    assert re.findall(r'\["([^"]+)"\] = true', line) == list(OPERATIONAL_EVENT_TYPES)


def test_the_preamble_names_the_final_states_and_the_window_lifetimes() -> None:
    final = _definition("FINAL")
    assert set(re.findall(r'\["([^"]+)"\] = true', final)) == set(FINAL_STATUSES)
    ttl = _definition("TTL")
    assert dict(re.findall(r"(\w+) = (\d+)", ttl)) == {
        k: str(v) for k, v in keys.WINDOW_TTL.items()
    }


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
    assert "scripts.py puts the key table" not in _code("common.lua")


def test_the_scan_would_notice_an_unknown_key() -> None:
    sample = "redis.call('ZADD', K.due, 1, id)\nlocal x = K.nonexistent .. id -- K.in_comment"
    assert set(K_FIELD.findall(sample)) - set(keys.LUA_KEYS) == {"nonexistent", "in_comment"}


def test_lua_keys_are_what_follows_a_buckets_head() -> None:
    for field, value in keys.LUA_KEYS.items():
        if field in keys.LUA_PARTS:
            assert field.endswith(("_suffix", "_infix")) and value.startswith(":"), field
        else:
            # The head (prefix and tag) is the script's: no template spells its own.
            assert not value.startswith((keys.PREFIX, ":", "{")), field
            assert "{" not in value and "}" not in value, field


@pytest.mark.parametrize("file", LUA_FILES)
def test_every_key_template_a_script_uses_carries_the_buckets_tag(file: str) -> None:
    used = set(K_FIELD.findall(_code(file))) - keys.LUA_PARTS
    for bucket in (0, 7, keys.BUCKETS - 1):
        for name in used:
            key = keys.in_bucket(bucket, name, "x")
            # Redis Cluster hashes the text of the first {...}: the bucket's, for every key.
            assert keys.tag_of(key) == f"b{bucket}", (file, name)
            assert keys.bucket_of_key(key) == bucket


def test_ratelimit_uses_its_one_key_alone() -> None:
    assert not K_FIELD.findall(_code("ratelimit.lua"))
    assert "KEYS[1]" in _code("ratelimit.lua")


@pytest.mark.parametrize("name", NAMES)
def test_every_script_but_ratelimit_says_which_key_is_its_keys_1(name: str) -> None:
    head = (LUA_DIR / f"{name}.lua").read_text().split("-- ARGV")[0]
    assert "-- KEYS[1]: " in head, name


def test_python_key_helpers_match_the_lua_templates() -> None:
    ep, app = new_id("ep", 1, mark=7), new_id("app", 1, mark=7)  # bucket 7
    b = keys.head(7)
    assert b == "whs:1:{b7}:"
    assert keys.endpoint(ep) == b + keys.LUA_KEYS["endpoint"] + ep
    assert keys.backlog(ep) == b + keys.LUA_KEYS["backlog"] + ep
    assert keys.inflight(ep) == b + keys.LUA_KEYS["inflight"] + ep
    assert keys.endpoint_minute(ep, 7) == f"{b}{keys.LUA_KEYS['ep_stats']}{ep}:m:7"
    assert keys.endpoint_hour(ep, 7) == f"{b}{keys.LUA_KEYS['ep_stats']}{ep}:h:7"
    assert keys.idempotency(app, "k1", "abc") == f"{b}{keys.LUA_KEYS['idem']}{app}:k1:abc"
    assert keys.app(app) == b + keys.LUA_KEYS["app"] + app
    assert keys.app_endpoints(app) == f"{b}{keys.LUA_KEYS['app']}{app}:endpoints"
    assert keys.sub_type(app, "a.b") == f"{b}{keys.LUA_KEYS['sub_type']}{app}:a.b"
    assert keys.sub_all(app) == b + keys.LUA_KEYS["sub_all"] + app
    assert keys.app_limit(app) == b + "limit:app:" + app
    for name in ("due", "endpoints", "apps", "metrics", "outbox", "release"):
        assert getattr(keys, name)(7) == b + keys.LUA_KEYS[name], name
    assert keys.apps_uid("acme") == keys.head(keys.uid_bucket("acme")) + "apps:uid"
    # An event, its deliveries and a replay's are of the event's bucket: ids carry its mark.
    event = new_id("msg", 1, mark=7)
    assert keys.bucket_of(delivery_id(event, ep, 3)) == keys.bucket_of(event) == 7
    assert keys.delivery(delivery_id(event, ep, 3)).startswith(b)
    assert keys.wakeup_more(f"{event}.1").startswith(b)
    # The default application, its uid, and ids older than the epoch: bucket 0.
    assert keys.bucket_of(DEFAULT_APP_ID) == keys.uid_bucket(DEFAULT_APP_UID) == 0


def test_only_a_few_keys_stand_outside_every_bucket() -> None:
    for key in (keys.job("job_1"), keys.job_owner("job_1"), keys.JOBS_RUNNING):
        assert keys.tag_of(key) == "jobs"
    for key in (keys.api_key("key_1"), keys.API_KEYS):
        assert keys.tag_of(key) == "apikeys"
    for key in (keys.limit("apikey:k"), keys.SCHEMA, keys.HEARTBEATS, keys.API_KEY_PEPPER):
        assert keys.tag_of(key) is None


def test_a_key_of_schema_4_takes_its_schema_5_name() -> None:
    assert keys.tagged("whs:1:due") == "whs:1:{b0}:due"
    assert keys.tagged("whs:1:endpoint:ep_1") == "whs:1:{b0}:endpoint:ep_1"
    assert keys.tagged("whs:1:limit:app:app_1") == "whs:1:{b0}:limit:app:app_1"
    assert keys.tagged("whs:1:job:job_1:owner") == keys.job_owner("job_1")
    assert keys.tagged("whs:1:jobs:running") == keys.JOBS_RUNNING
    assert keys.tagged("whs:1:apikey:key_1") == keys.api_key("key_1")
    assert keys.tagged("whs:1:apikeys") == keys.API_KEYS
    for kept in ("whs:1:limit:apikey:k", "whs:1:schema", "whs:1:lock:tick",
                 "whs:1:apikeys:pepper", "whs:1:heartbeats", "whs:1:apps:uid",
                 "whs:1:{b0}:due", "whs.deliveries"):  # fmt: skip
        assert keys.tagged(kept) is None, kept
    assert keys.untagged(keys.due(5)) == "whs:1:due"


def test_an_idempotency_record_of_schema_3_is_told_from_one_of_today() -> None:
    old = keys.in_bucket(0, "idem", "key_1:order:1")  # where migrate renamed it first
    assert keys.idempotency_key_of(old, "key_1") == "order:1"
    assert keys.idempotency_key_of(old, "key_2") is None
    assert keys.schema4_idempotency(old, "app_default") == keys.idempotency(
        "app_default", "key_1", "order:1"
    )
    assert keys.schema4_idempotency(keys.idempotency("app_x", "key_1", "o"), "app_y") is None
    assert keys.schema4_idempotency(keys.event("msg_1"), "app_y") is None


def test_the_preamble_names_the_default_application() -> None:
    line = _definition("DEFAULT_APP")
    assert dict(re.findall(r'(\w+) = "([^"]*)"', line)) == {
        "id": DEFAULT_APP_ID, "uid": DEFAULT_APP_UID, "name": DEFAULT_APP_NAME,
    }  # fmt: skip
