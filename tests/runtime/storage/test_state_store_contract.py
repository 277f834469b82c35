"""One contract, three backends: SQLite (always), PostgreSQL and Redis (when their test URLs
are set; ``.ci/run`` sets both). Each test gets its own schema or key prefix."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import RefusedCall
from proctor.runtime.storage.base import MAX_VALUE_BYTES, StateStore

BACKENDS = ["sqlite", "postgres", "redis"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    kind = request.param
    unique = "t" + uuid.uuid4().hex[:12]
    if kind == "sqlite":
        from proctor.runtime.storage.sqlite import SqliteStateStore

        opened: Any = SqliteStateStore(tmp_path / "store.sqlite")
    elif kind == "postgres":
        url = os.environ.get("PROCTOR_TEST_DATABASE_URL")
        if not url:
            pytest.skip("PROCTOR_TEST_DATABASE_URL is unset: no PostgreSQL to test against")
        from proctor.runtime.storage.postgres import PostgresStateStore

        opened = PostgresStateStore(url, schema=unique)
    else:
        url = os.environ.get("PROCTOR_TEST_REDIS_URL")
        if not url:
            pytest.skip("PROCTOR_TEST_REDIS_URL is unset: no Redis to test against")
        from proctor.runtime.storage.redis import RedisStateStore

        opened = RedisStateStore(url, prefix=f"proctor-test:{unique}")
    try:
        yield opened
    finally:
        if kind != "sqlite":
            opened.drop()
        opened.close()


def test_events_are_numbered_from_one_and_read_after_a_cursor(store: StateStore) -> None:
    seqs = [store.append("pkg", "log", {"n": i}, f"k{i}")["seq"] for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    page = store.read("pkg", "log", 0, 2)
    assert [e["seq"] for e in page["events"]] == [1, 2]
    assert page["events"][0]["event"] == {"n": 0}
    rest = store.read("pkg", "log", page["next_cursor"], 100)
    assert [e["seq"] for e in rest["events"]] == [3, 4, 5]
    assert store.read("pkg", "log", 5, 10) == {"events": [], "next_cursor": 5}
    assert store.read("pkg", "other", 0, 10)["events"] == []


def test_a_write_under_a_used_key_changes_nothing(store: StateStore) -> None:
    first = store.append("pkg", "log", {"a": 1}, "same")
    again = store.append("pkg", "log", {"a": 2}, "same")
    assert first["already_done"] is False and again["already_done"] is True
    assert again["seq"] == first["seq"] == 1
    assert [e["event"] for e in store.read("pkg", "log", 0, 10)["events"]] == [{"a": 1}]
    put = store.put("pkg", "k", "v1", "p1")
    assert store.put("pkg", "k", "v2", "p1") == {**put, "already_done": True}
    assert store.get("pkg", "k")["value"] == "v1"
    assert store.applied("pkg", "p1") is not None and store.applied("pkg", "nope") is None


@pytest.mark.parametrize(
    "first, second",
    [
        (("put", "k"), ("append", "log")),
        (("append", "log"), ("put", "k")),
        (("append", "log"), ("append", "other")),
        (("put", "k"), ("put", "j")),
    ],
)
def test_a_key_used_by_another_write_is_refused_and_writes_nothing(
    store: StateStore, first: tuple[str, str], second: tuple[str, str]
) -> None:
    def write(kind: str, target: str, value: str) -> dict[str, Any]:
        if kind == "put":
            return store.put("pkg", target, value, "shared")
        return store.append("pkg", target, value, "shared")

    def state() -> object:
        return (
            [store.read("pkg", s, 0, 10)["events"] for s in ("log", "other")],
            [store.get("pkg", k) for k in ("k", "j")],
        )

    write(*first, "one")
    before = state()
    with pytest.raises(RefusedCall) as refused:
        write(*second, "two")
    assert refused.value.code == "idempotency_key_reused"
    assert state() == before
    again = write(*first, "one")  # the write that owns the key is still answered as done
    assert again["already_done"] is True


def test_keys_have_versions_and_list_in_pages(store: StateStore) -> None:
    assert store.get("pkg", "a") == {"found": False, "value": None, "version": None}
    assert store.put("pkg", "a", {"x": 1}, "1")["version"] == 1
    assert store.put("pkg", "a", {"x": 2}, "2")["version"] == 2
    assert store.get("pkg", "a") == {"found": True, "value": {"x": 2}, "version": 2}
    for name in ["issue/1", "issue/2", "issue/3", "other"]:
        store.put("pkg", name, 0, "put-" + name)
    page = store.list_keys("pkg", "issue/", "", 2)
    assert page == {"keys": ["issue/1", "issue/2"], "next_cursor": "issue/2"}
    assert store.list_keys("pkg", "issue/", "issue/2", 2) == {
        "keys": ["issue/3"],
        "next_cursor": None,
    }
    assert store.list_keys("pkg", "", "", 10)["keys"] == [
        "a",
        "issue/1",
        "issue/2",
        "issue/3",
        "other",
    ]


def test_namespaces_never_see_each_other(store: StateStore) -> None:
    store.append("alpha", "log", "secret-event", "k")
    store.put("alpha", "token", "secret-value", "k2")
    # the same stream, key and even idempotency key in another namespace: nothing shared
    assert store.read("beta", "log", 0, 10)["events"] == []
    assert store.get("beta", "token")["found"] is False
    assert store.list_keys("beta", "", "", 10)["keys"] == []
    assert store.append("beta", "log", "mine", "k") == {
        "seq": 1, "stream": "log", "already_done": False,
    }  # fmt: skip
    assert store.applied("beta", "k2") is None


def test_a_value_over_the_bound_is_refused_and_nothing_is_written(store: StateStore) -> None:
    with pytest.raises(RefusedCall) as refused:
        store.append("pkg", "log", "x" * MAX_VALUE_BYTES, "big")
    assert refused.value.code == "store_value_too_large"
    assert store.read("pkg", "log", 0, 10)["events"] == []
    assert store.applied("pkg", "big") is None


def test_concurrent_appenders_never_share_a_sequence_number(store: StateStore) -> None:
    def work(who: int) -> None:
        for i in range(10):
            store.append("pkg", "log", {"who": who, "i": i}, f"{who}-{i}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    seqs = [e["seq"] for e in store.read("pkg", "log", 0, 1000)["events"]]
    assert seqs == list(range(1, 41))


def test_migrate_moves_a_namespace_whole_and_never_merges(store: StateStore) -> None:
    from proctor.errors import UsageError

    store.append("local:old", "log", {"n": 1}, "a1")
    store.append("local:old", "log", {"n": 2}, "a2")
    store.put("local:old", "k", "v", "p1")
    store.put("local:other", "k", "theirs", "o1")
    assert store.migrate("local:old", "local:new") == {"events": 2, "keys": 1, "writes": 3}
    assert [e["event"] for e in store.read("local:new", "log", 0, 10)["events"]] == [
        {"n": 1},
        {"n": 2},
    ]
    assert store.get("local:new", "k")["value"] == "v"
    # the idempotency records moved with it: a repeat changes nothing
    assert store.put("local:new", "k", "v2", "p1")["already_done"] is True
    assert store.append("local:new", "log", {"n": 3}, "a3")["seq"] == 3
    assert store.get("local:old", "k")["found"] is False
    assert store.read("local:old", "log", 0, 10)["events"] == []
    for source, target, code in (
        ("local:new", "local:other", "store_target_not_empty"),
        ("local:old", "local:fresh", "store_source_empty"),
        ("local:new", "local:new", "store_migrate_same"),
    ):
        with pytest.raises(UsageError) as caught:
            store.migrate(source, target)
        assert caught.value.code == code
    assert store.get("local:other", "k")["value"] == "theirs"  # nothing merged or moved
    assert store.get("local:new", "k")["value"] == "v"
