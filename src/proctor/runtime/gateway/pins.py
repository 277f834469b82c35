"""Pinned upstream tool definitions: ``proctor-mcp.lock`` at the workspace root.

The first time an upstream tool is used, its definition (name, title, description, input and
output schemas, annotations) is pinned by digest in the lock, a file a team commits beside
``.mcp.json``. From then on the tool offered to models and clients is the pinned definition,
and every session compares the server's live definition with it: a changed definition (a
"rug pull": a new description telling the model to do something else, a wider schema) is
refused ``tool_definition_changed`` until a person has seen the difference and approved it
(``proctor mcp diff`` then ``proctor mcp approve SERVER/TOOL --digest D``).

The lock is JSON, sorted, one definition per tool; a run can never write it (it is an
authority file, like ``proctor.toml``). Writes replace the file atomically under a lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from proctor.errors import ConfigError, ParseError
from proctor.receipts.canonical import digest

__all__ = [
    "LOCK_FILE",
    "LOCK_SCHEMA",
    "Pins",
    "definition_digest",
    "definition_of",
    "diff_lines",
]

LOCK_FILE = "proctor-mcp.lock"
LOCK_SCHEMA = "proctor.mcp_lock.v1"
_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def definition_of(listed: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned part of a tool as ``tools/list`` gave it (absent fields left out)."""
    return {k: listed[k] for k in _FIELDS if k in listed and listed[k] is not None}


def definition_digest(definition: Mapping[str, Any]) -> str:
    """``sha256:`` over the definition's canonical JSON."""
    return digest(dict(definition))


class Pins:
    """The lock of one workspace: ``{server: {tool: definition}}``, read from and written to
    ``<root>/proctor-mcp.lock``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / LOCK_FILE
        # the lock as last read, by the file's identity (device, inode, size, change time): a
        # call reads the pins once per change of the file, not once per call
        self._read: tuple[tuple[int, ...], dict[str, dict[str, dict[str, Any]]]] | None = None
        self._digests: dict[tuple[str, str, int], str] = {}

    def read(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every pinned definition, by server and tool (empty when there is no lock).

        Raises:
            ConfigError: ``mcp_lock_invalid``: the lock is not a lock proctor wrote.
        """
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(
                f"{LOCK_FILE} cannot be read: {exc.strerror}", code="mcp_lock_invalid"
            ) from exc
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        cached = self._read
        if cached is not None and cached[0] == key:
            return cached[1]
        found = self._parse()
        self._read = (key, found)
        self._digests = {}
        return found

    def _parse(self) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{LOCK_FILE} cannot be read: {exc}", code="mcp_lock_invalid"
            ) from exc
        from proctor.contracts import json_strict

        try:
            # strict: a pin given twice reads as one digest to a reviewer of the file and as
            # another to a reader keeping the last copy
            doc = json_strict.loads(text, source=LOCK_FILE)
        except ParseError as exc:
            raise ConfigError(
                f"{LOCK_FILE} is not JSON proctor reads ({exc.code}: {exc}); restore it from"
                " version control",
                code="mcp_lock_invalid",
            ) from None
        servers = doc.get("servers") if isinstance(doc, dict) else None
        if (
            not isinstance(doc, dict)
            or doc.get("schema") != LOCK_SCHEMA
            or not isinstance(servers, dict)
        ):
            raise ConfigError(
                f"{LOCK_FILE} is not a {LOCK_SCHEMA} document; restore it from version control",
                code="mcp_lock_invalid",
            )
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for server, tools in servers.items():
            if not isinstance(tools, dict):
                raise ConfigError(
                    f"{LOCK_FILE}: servers.{server} is not an object", code="mcp_lock_invalid"
                )
            out[server] = {}
            for name, entry in tools.items():
                if (
                    not isinstance(entry, dict)
                    or not isinstance(entry.get("definition"), dict)
                    or entry.get("digest") != definition_digest(entry["definition"])
                ):
                    raise ConfigError(
                        f"{LOCK_FILE}: the pin of {server}/{name} does not match its digest;"
                        " restore the lock from version control",
                        code="mcp_lock_invalid",
                    )
                out[server][name] = entry["definition"]
        return out

    def pinned(self, server: str, tool: str) -> dict[str, Any] | None:
        """The pinned definition of ``server``'s ``tool``, or ``None``."""
        return self.read().get(server, {}).get(tool)

    def pinned_digest(self, server: str, tool: str) -> str | None:
        """The digest of the pinned definition of ``server``'s ``tool``, or ``None`` (computed
        once per change of the lock)."""
        pinned = self.pinned(server, tool)
        if pinned is None:
            return None
        key = (server, tool, id(pinned))
        found = self._digests.get(key)
        if found is None:
            found = self._digests[key] = definition_digest(pinned)
        return found

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        guard = self.root / ".proctor" / "mcp-lock.guard"
        guard.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(guard, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def pin(
        self, server: str, definitions: Mapping[str, Mapping[str, Any]], *, replace: bool = False
    ) -> list[str]:
        """Pin each definition not pinned yet (or, with ``replace``, each one given); returns
        the tools whose pin was written.

        Raises:
            ConfigError: ``mcp_lock_invalid``; ``mcp_lock_unwritable``.
        """
        with self._locked():
            current = self._parse()  # a fresh copy: the cached one is shared with readers
            tools = current.setdefault(server, {})
            written = []
            for name, definition in sorted(definitions.items()):
                if name in tools and not replace:
                    continue
                tools[name] = dict(definition)
                written.append(name)
            if written:
                self._write(current)
            return written

    def ensure(self) -> None:
        """Create an empty lock when there is none (before a sandboxed server starts: a file
        that exists then is read-only inside its sandbox, and never taken afterwards for one
        the server planted).

        Raises:
            ConfigError: ``mcp_lock_unwritable``.
        """
        if self.path.exists():
            return
        with self._locked():
            if not self.path.exists():
                self._write({})

    def _write(self, servers: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        doc = {
            "schema": LOCK_SCHEMA,
            "servers": {
                server: {
                    name: {"digest": definition_digest(d), "definition": d}
                    for name, d in sorted(tools.items())
                }
                for server, tools in sorted(servers.items())
            },
        }
        text = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        tmp = self.path.with_name(f".{LOCK_FILE}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise ConfigError(
                f"{LOCK_FILE} cannot be written: {exc.strerror}", code="mcp_lock_unwritable"
            ) from exc


def diff_lines(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """A unified diff of two definitions' pretty JSON (what a person reads before approving)."""
    import difflib

    def text(d: Mapping[str, Any] | None) -> list[str]:
        if d is None:
            return []
        return json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return list(difflib.unified_diff(text(old), text(new), "pinned", "upstream now", lineterm=""))
