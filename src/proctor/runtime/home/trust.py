"""Which workspaces' guard modules a person trusted, by digest: ``<home>/trusted-guards.json``.

A workspace's guard modules are Python that proctor executes in its own process
(:mod:`proctor.policy.user_guards`). They run only once a person trusted exactly those bytes:
``proctor trust`` shows the config and every module, asks, and records here the workspace's
folder with the digest of its guard files (:attr:`proctor.policy.guard_files.GuardFiles.digest`:
the config files and each module's bytes). Any change to one of those files is a new digest,
and the next command that would load them refuses ``guards_untrusted`` until a person trusts
them again. The record lives in the home, never in the workspace: a cloned repository cannot
bring its own.

CI and tests trust without a record by setting ``PROCTOR_TRUST_WORKSPACE=1``
(:data:`TRUST_ENV`); each use is reported to the caller (:class:`HomeTrust`'s
``on_environment``), which audits it. Any other value of that variable is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, ParseError
from proctor.policy.guard_files import GuardFiles
from proctor.runtime.home.files import home_dir, write_private

__all__ = [
    "TRUST_ENV",
    "HomeTrust",
    "TrustRecord",
    "TrustState",
    "record_trust",
    "revoke_trust",
    "trust_env_set",
    "trust_record",
    "trust_state",
]

TRUST_ENV = "PROCTOR_TRUST_WORKSPACE"
"""``1``: trust whatever guard modules the workspace names, for this process (CI, tests);
audited at each use."""

_FILE = "trusted-guards.json"
_SCHEMA = "proctor.trusted_guards.v1"
TrustState = Literal["none", "trusted", "changed", "untrusted"]
"""``none``: the workspace names no guard module; ``trusted``: its guard files are the ones a
person trusted; ``changed``: a person trusted other bytes; ``untrusted``: never trusted."""


@dataclass(frozen=True, slots=True)
class TrustRecord:
    """What a person trusted for one workspace.

    Attributes:
        files: ``[path, sha256]`` of each file the digest covers, as trusted.
        trusted_by: the OS user who trusted them.
        how: ``prompt`` (asked on a terminal) or ``yes`` (``--yes``).
    """

    workspace: str
    digest: str
    files: tuple[tuple[str, str], ...]
    trusted_at: str
    trusted_by: str
    how: str

    def to_json(self) -> dict[str, Any]:
        """The record as stored (and as ``proctor trust --json`` shows it)."""
        return {
            "digest": self.digest,
            "files": [list(f) for f in self.files],
            "trusted_at": self.trusted_at,
            "trusted_by": self.trusted_by,
            "how": self.how,
        }


def trust_env_set(environ: Mapping[str, str]) -> bool:
    """Whether ``PROCTOR_TRUST_WORKSPACE=1`` (unset or empty: no).

    Raises:
        ConfigError: ``trust_env_invalid``: any other value (a typo must not read as a no
            that someone takes for a yes, nor the reverse).
    """
    value = environ.get(TRUST_ENV, "")
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ConfigError(
        f"{TRUST_ENV} must be 1 (trust this workspace's guard modules) or unset",
        code="trust_env_invalid",
    )


def _path(environ: Mapping[str, str]) -> Path:
    return home_dir(environ)[0] / _FILE


def _load(path: Path) -> dict[str, Any]:
    """The stored document (an empty one when there is none).

    Raises:
        ConfigError: ``trust_store_invalid``: unreadable, or not a document this wrote.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {"schema": _SCHEMA, "workspaces": {}}
    except OSError as exc:
        raise ConfigError(
            f"the home's {_FILE} cannot be read ({exc.strerror}); nothing is trusted until it can",
            code="trust_store_invalid",
        ) from None
    from proctor.contracts import json_strict

    try:
        doc = json_strict.loads(raw, source=_FILE)
    except ParseError as exc:
        # a key given twice reads one way here and another to a reader keeping the first copy
        # (which workspace is trusted, with which digest): refused, never taken either way
        raise ConfigError(
            f"the home's {_FILE} is not a trust record proctor wrote ({exc.code}: {exc});"
            " nothing is trusted until it is removed (then trust each workspace again with"
            " `proctor trust`)",
            code="trust_store_invalid",
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("schema") != _SCHEMA
        or not isinstance(doc.get("workspaces"), dict)
    ):
        raise ConfigError(
            f"the home's {_FILE} is not a trust record proctor wrote; nothing is trusted until"
            " it is removed (then trust each workspace again with `proctor trust`)",
            code="trust_store_invalid",
        )
    return doc


def _record(workspace: str, entry: object) -> TrustRecord:
    """One stored record, every field of the type this writes.

    Raises:
        ConfigError: ``trust_store_invalid``: anything else.
    """
    keys = ("digest", "trusted_at", "trusted_by", "how")
    files = entry.get("files") if isinstance(entry, dict) else None
    if (
        not isinstance(entry, dict)
        or set(entry) != {*keys, "files"}
        or not all(isinstance(entry[k], str) for k in keys)
        or not isinstance(files, list)
        or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
            for f in files
        )
    ):
        raise ConfigError(
            f"the home's {_FILE} holds a damaged record; nothing is trusted until it is removed",
            code="trust_store_invalid",
        )
    return TrustRecord(
        workspace,
        entry["digest"],
        tuple((f[0], f[1]) for f in files),
        entry["trusted_at"],
        entry["trusted_by"],
        entry["how"],
    )


def trust_record(root: Path, environ: Mapping[str, str]) -> TrustRecord | None:
    """What a person trusted for the workspace at ``root`` (None: nothing).

    Raises:
        ConfigError: ``home_missing``; ``trust_store_invalid``.
    """
    key = str(root.resolve())
    entry = _load(_path(environ))["workspaces"].get(key)
    return None if entry is None else _record(key, entry)


def trust_state(files: GuardFiles, environ: Mapping[str, str]) -> TrustState:
    """Whether ``files`` are what a person trusted for their workspace.

    Raises:
        ConfigError: ``home_missing``; ``trust_store_invalid``.
    """
    if not files.modules:
        return "none"
    held = trust_record(files.root, environ)
    if held is None:
        return "untrusted"
    return "trusted" if held.digest == files.digest else "changed"


def _edit(environ: Mapping[str, str], change: Callable[[dict[str, Any]], None]) -> None:
    """Read, change and write the document whole, under a lock in the home."""
    path = _path(environ)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(path.parent / (_FILE + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        doc = _load(path)
        change(doc["workspaces"])
        data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")
        write_private(path, data)
    finally:
        os.close(lock)


def record_trust(
    files: GuardFiles, environ: Mapping[str, str], *, trusted_by: str, how: str
) -> TrustRecord:
    """Record that a person trusted exactly ``files`` for their workspace (replacing what was
    trusted there before).

    Raises:
        ConfigError: ``home_missing``; ``trust_store_invalid``; ``trust_store_unwritable``.
    """
    record = TrustRecord(
        str(files.root),
        files.digest,
        tuple((f.path, f.sha256) for f in files.files),
        datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        trusted_by,
        how,
    )

    def put(workspaces: dict[str, Any]) -> None:
        workspaces[record.workspace] = record.to_json()

    try:
        _edit(environ, put)
    except OSError as exc:
        raise ConfigError(
            f"the trust could not be recorded in the home ({exc.strerror}); nothing was trusted",
            code="trust_store_unwritable",
        ) from None
    return record


def revoke_trust(root: Path, environ: Mapping[str, str]) -> bool:
    """Forget what was trusted for the workspace at ``root``; True when there was a record.

    Raises:
        ConfigError: ``home_missing``; ``trust_store_invalid``; ``trust_store_unwritable``.
    """
    key = str(root.resolve())
    found: list[bool] = []

    def drop(workspaces: dict[str, Any]) -> None:
        found.append(workspaces.pop(key, None) is not None)

    try:
        _edit(environ, drop)
    except OSError as exc:
        raise ConfigError(
            f"the trust could not be withdrawn in the home ({exc.strerror})",
            code="trust_store_unwritable",
        ) from None
    return found[0]


class HomeTrust:
    """The :data:`proctor.policy.user_guards.GuardTrust` of a session: the home's record, or
    ``PROCTOR_TRUST_WORKSPACE=1`` (each use handed to ``on_environment``, which audits it).

    Raises (when called):
        ConfigError: ``guards_untrusted`` (never trusted, or changed since), and the errors of
            :func:`trust_state` and :func:`trust_env_set`.
    """

    def __init__(
        self,
        environ: Mapping[str, str],
        on_environment: Callable[[GuardFiles], None] | None = None,
    ) -> None:
        self.environ = environ
        self.on_environment = on_environment

    def __call__(self, files: GuardFiles) -> None:
        env_trusts = trust_env_set(self.environ)
        try:
            state = trust_state(files, self.environ)
        except ConfigError as exc:
            if exc.code != "home_missing" or not env_trusts:
                raise
            state = "untrusted"  # no home to hold a trust: only the variable can give one
        if state in ("trusted", "none"):
            return
        if env_trusts:
            if self.on_environment is not None:
                self.on_environment(files)
            return
        names = ", ".join(f.path for f in files.modules)
        if state == "changed":
            why = f"its guard files changed since they were trusted ({names})"
        else:
            why = f"it names guard modules no one trusted yet ({names})"
        raise ConfigError(
            f"this workspace's guard modules are Python proctor would run in its own process,"
            f" and {why}; nothing of them ran. Review them and trust them with `proctor trust`"
            f" in the workspace (CI: {TRUST_ENV}=1)",
            code="guards_untrusted",
            details={"digest": files.digest, "state": state},
        )
