"""The people who may sign in to the console: one token each, kept hashed in the home.

``<home>/console_users.json`` holds ``{schema, users: {NAME: {token_sha256, created_at}}}``.
A token is shown once, when it is made (``proctor console user add NAME``); only its SHA-256
is kept (a token is 256 random bits, so a fast hash is enough: there is nothing to guess).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, UsageError
from proctor.runtime.home.files import write_private

__all__ = ["USERS_FILE", "USERS_SCHEMA", "ConsoleUser", "UserBook"]

USERS_FILE = "console_users.json"
USERS_SCHEMA = "proctor.console.users.v1"
TOKEN_PREFIX = "pct_"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class ConsoleUser:
    """A person who may sign in."""

    name: str
    created_at: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class UserBook:
    """The console's users in the home ``home``.

    Raises (every method that reads the file):
        ConfigError: ``console_users_invalid`` when the file is not the document it should be.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / USERS_FILE

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(
                f"cannot read {USERS_FILE}: {exc.strerror}", code="console_users_invalid"
            ) from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{USERS_FILE} is not JSON", code="console_users_invalid") from exc
        users = doc.get("users") if isinstance(doc, dict) else None
        if doc.get("schema") != USERS_SCHEMA or not isinstance(users, dict):
            raise ConfigError(
                f"{USERS_FILE} is not a {USERS_SCHEMA} document", code="console_users_invalid"
            )
        for name, entry in users.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("token_sha256"), str):
                raise ConfigError(
                    f"{USERS_FILE}: user {name!r} has no token hash", code="console_users_invalid"
                )
        return users

    def _save(self, users: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        doc = {"schema": USERS_SCHEMA, "users": users}
        write_private(self.path, json.dumps(doc, indent=2, sort_keys=True).encode("utf-8"))

    def add(self, name: str, *, rotate: bool = False) -> str:
        """Make a token for ``name`` and return it (the only time it is shown).

        Raises:
            UsageError: ``user_name_invalid`` (1-64 letters, digits, ``.``, ``_``, ``-``);
                ``user_exists`` (give ``rotate`` to replace the token: the old one stops
                working).
        """
        if not NAME.match(name):
            raise UsageError(
                "a console user name is 1-64 letters, digits, '.', '_' or '-'",
                code="user_name_invalid",
            )
        users = self._load()
        if name in users and not rotate:
            raise UsageError(
                f"console user {name!r} exists; --rotate replaces the token", code="user_exists"
            )
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        users[name] = {"token_sha256": _hash(token), "created_at": created}
        self._save(users)
        return token

    def remove(self, name: str) -> None:
        """Remove ``name``; their sessions end at their next request.

        Raises:
            UsageError: ``user_not_found``.
        """
        users = self._load()
        if name not in users:
            raise UsageError(f"no console user {name!r}", code="user_not_found")
        del users[name]
        self._save(users)

    def list(self) -> list[ConsoleUser]:
        """Every user, by name."""
        return [
            ConsoleUser(name, str(entry.get("created_at") or ""))
            for name, entry in sorted(self._load().items())
        ]

    def exists(self, name: str) -> bool:
        """Whether ``name`` may still sign in."""
        return name in self._load()

    def who(self, token: str) -> str | None:
        """The user whose token ``token`` is, or ``None`` (every hash is compared, in constant
        time, so the time does not say which user was near)."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        given = _hash(token)
        found = None
        for name, entry in self._load().items():
            if hmac.compare_digest(given, str(entry["token_sha256"])):
                found = name
        return found
