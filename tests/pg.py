"""A fresh PostgreSQL schema per test (``PROCTOR_TEST_DATABASE_URL``), dropped afterwards.

Each test gets its own schema on the shared test database, reached through a URL whose
``search_path`` names it, so tests in parallel (and other suites using the same database)
never see each other's tables. Tests needing PostgreSQL skip, saying why, when the variable
is unset (``.ci/run`` sets it).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pytest

ENV = "PROCTOR_TEST_DATABASE_URL"


def base_url() -> str:
    """The test database's URL, or a skip naming the variable."""
    url = os.environ.get(ENV)
    if not url:
        pytest.skip(f"{ENV} is unset: no PostgreSQL to test against")
    return url


def schema_url(url: str, schema: str) -> str:
    """``url`` with its ``search_path`` set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A URL into a new, empty schema; the schema (and this process's pool) go afterwards."""
    import psycopg

    from proctor.runtime.records.postgres import close_pools

    url = base_url()
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema_url(url, schema)
    finally:
        close_pools()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
