"""Reading the AOF's size from its directory: only the incremental files the manifest lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.aof import appended_bytes, commands, costs, incremental_files, kind

MANIFEST = """file appendonly.aof.2.base.rdb seq 2 type b
file appendonly.aof.1.incr.aof seq 1 type h
file appendonly.aof.2.incr.aof seq 2 type i
file "append only.aof.3.incr.aof" seq 3 type i
"""


def test_only_the_incremental_files_count_in_the_manifests_order() -> None:
    assert incremental_files(MANIFEST) == [
        "appendonly.aof.2.incr.aof",
        "append only.aof.3.incr.aof",
    ]


def test_an_empty_manifest_lists_nothing() -> None:
    assert incremental_files("") == []


def test_the_appended_bytes_are_the_incremental_files_sizes(tmp_path: Path) -> None:
    (tmp_path / "appendonly.aof.manifest").write_text(MANIFEST)
    (tmp_path / "appendonly.aof.2.base.rdb").write_bytes(b"b" * 1000)
    (tmp_path / "appendonly.aof.1.incr.aof").write_bytes(b"h" * 500)
    (tmp_path / "appendonly.aof.2.incr.aof").write_bytes(b"i" * 30)
    (tmp_path / "append only.aof.3.incr.aof").write_bytes(b"i" * 12)
    assert appended_bytes(tmp_path) == 42


def _resp(*argv: bytes) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv)


def test_commands_are_read_back_with_the_bytes_each_takes() -> None:
    first = _resp(b"MULTI")
    second = _resp(b"HSET", b"whs:1:delivery:dlv_01ABCDEFGH", b"status", b"a\r\nb")
    assert list(commands(first + second)) == [
        ([b"MULTI"], len(first)),
        ([b"HSET", b"whs:1:delivery:dlv_01ABCDEFGH", b"status", b"a\r\nb"], len(second)),
    ]


def test_bytes_that_do_not_start_a_command_are_refused() -> None:
    with pytest.raises(ValueError, match="not a command"):
        list(commands(b"$3\r\nabc\r\n"))


def test_a_kind_is_the_command_and_its_keys_shape() -> None:
    assert kind([b"hset", b"whs:1:delivery:dlv_01ABCDEFGH", b"f", b"v"]) == (
        "HSET whs:1:delivery:dlv_*"
    )
    assert kind([b"HINCRBY", b"whs:1:stats:ep:ep_01XYZXYZ:m:29935565", b"a", b"1"]) == (
        "HINCRBY whs:1:stats:ep:ep_*:m:*"
    )
    assert kind([b"EXEC"]) == "EXEC"


def test_costs_rank_the_kinds_by_bytes_and_add_up_the_rest() -> None:
    data = (
        _resp(b"XADD", b"whs:1:log:outbox", b"*", b"e", b"x" * 100)
        + _resp(b"ZADD", b"whs:1:due", b"1", b"dlv_01ABCDEFGH") * 2
        + _resp(b"MULTI")
    )
    ranked = costs(data, top=1)
    assert ranked[0]["kind"] == "XADD whs:1:log:outbox"
    assert ranked[0]["count"] == 1
    assert ranked[1] == {
        "kind": "2 other kinds",
        "count": 3,
        "bytes": len(data) - int(ranked[0]["bytes"]),
    }
