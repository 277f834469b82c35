"""Audit forwarding: every audit line shipped, in order, at least once, to syslog or HTTP,
from a durable cursor that survives restarts (``proctor audit forward``).

The cursor (``<state>/forward/<digest of the destination>.json``) says how many lines of the
log were shipped, the byte offset after the last one and that line's digest. It is replaced
atomically (written, synced, renamed, folder synced) only after the destination took the
batch, so:

- a forwarder killed at any point ships again, on restart, from the last batch the cursor
  records: a line is never skipped; the batch in flight at the kill may arrive twice. Every
  line carries its line number (syslog: the ``line`` parameter of the ``proctor@32473``
  structured data; HTTP: the ``Proctor-Audit-First-Line`` header of its batch), so a receiver
  that keeps the highest number it stored gets each line exactly once;
- lines go in log order, one batch at a time: batch *n+1* is sent only after batch *n* was
  taken;
- a log changed under the cursor (the last shipped line is not at its offset any more: the
  log was cut, rewritten or replaced) is refused (``forward_log_rewritten``) and nothing is
  sent; ``proctor audit verify`` says what happened to it.

"Taken" means, for HTTP, a 2xx answer to the POST; for syslog over TCP (RFC 5424 messages in
RFC 6587 octet-counting frames), that every byte was written to the connection: TCP carries
no application acknowledgement, so a receiver that crashes after reading may lose what it had
not stored. At-least-once holds against the forwarder's crash over both, and against the
receiver's crash over HTTP only.

Only whole lines (ending in a newline) are shipped: a line still being written is shipped by
the next pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass
from proctor.errors import ParseError, StoreError, UsageError
from proctor.runtime.records.chain import GENESIS, line_digest
from proctor.runtime.records.chain_lines import LINE_DEPTH
from proctor.runtime.records.store_file import private_folders
from proctor.runtime.testhooks import kill_point

__all__ = [
    "CURSOR_SCHEMA",
    "FORWARD_ENV",
    "Cursor",
    "Destination",
    "Forwarder",
    "HttpSender",
    "SyslogSender",
    "background_forwarder",
    "parse_destination",
    "syslog_frame",
]

CURSOR_SCHEMA = "proctor.audit_forward_cursor.v1"
FORWARD_DIR = "forward"
MAX_BATCH_BYTES = 4 * 1024 * 1024
ENTERPRISE = "proctor@32473"  # RFC 5612's number for documentation: no private number yet
_PRI = "<134>"  # facility local0 (16), severity informational (6)
_NAME = re.compile(r"[!-~]{1,48}")
_HOST = re.compile(r"[A-Za-z0-9.\-\[\]:]{1,255}")


@dataclass(frozen=True)
class Destination:
    """Where lines go: ``kind`` is ``syslog`` or ``http``; ``url`` as given (never written to
    disk: the cursor is named by its digest, as a URL may carry a token)."""

    kind: str
    url: str
    host: str
    port: int

    @property
    def key(self) -> str:
        """The digest naming this destination's cursor."""
        return hashlib.sha256(self.url.encode("utf-8")).hexdigest()[:32]


def parse_destination(text: str) -> Destination:
    """``syslog+tcp://HOST:PORT`` or ``http(s)://HOST[:PORT]/PATH``.

    Raises:
        UsageError: (``forward_destination_invalid``) another scheme, no host, a port out of
            range, a syslog URL with a path, user or query, or control characters.
    """
    if len(text) > 2048 or any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
        raise _bad_destination("a destination is a URL without spaces or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise _bad_destination(f"{text[:80]!r} is not a URL: {exc}") from exc
    host = parts.hostname or ""
    if not host or _HOST.fullmatch(host) is None:
        raise _bad_destination(f"{text[:80]!r} names no host")
    if parts.scheme == "syslog+tcp":
        if port is None or parts.path not in ("", "/") or parts.query or parts.username:
            raise _bad_destination("a syslog destination is syslog+tcp://HOST:PORT, nothing else")
        return Destination("syslog", text, host, port)
    if parts.scheme in ("http", "https"):
        default = 443 if parts.scheme == "https" else 80
        return Destination("http", text, host, port if port is not None else default)
    raise _bad_destination(
        f"{parts.scheme or 'no scheme'!r} is not a destination: use syslog+tcp://HOST:PORT or"
        " http(s)://HOST/PATH"
    )


def _bad_destination(message: str) -> UsageError:
    return UsageError(message, code="forward_destination_invalid")


def _sd_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def syslog_frame(line: bytes, number: int, hostname: str) -> bytes:
    """One audit line as an RFC 5424 message in an RFC 6587 octet-counting frame:
    ``LEN SP <134>1 TIMESTAMP HOST proctor - EVENT [proctor@32473 line=".." run=".."] BOM LINE``.
    """
    try:
        # strict: the header names the event every reader of the line reads; a line with a
        # key twice (a tampered log) gets none, its bytes are shipped as they are
        record: Any = json_strict.loads(line, source="audit line", limit=LINE_DEPTH)
    except ParseError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    stamp = record.get("timestamp")
    event = record.get("event")
    run_id = record.get("run_id")
    header = " ".join(
        [
            f"{_PRI}1",
            stamp if isinstance(stamp, str) and _NAME.fullmatch(stamp) else "-",
            hostname if _HOST.fullmatch(hostname) else "-",
            "proctor",
            "-",
            event[:32] if isinstance(event, str) and _NAME.fullmatch(event[:32]) else "-",
        ]
    )
    sd = f'[{ENTERPRISE} line="{number}"'
    if isinstance(run_id, str):
        sd += f' run="{_sd_value(run_id[:128])}"'
    message = f"{header} {sd}] ".encode() + b"\xef\xbb\xbf" + line.rstrip(b"\n")
    return b"%d " % len(message) + message


class Sender(Protocol):
    """Takes one batch of whole lines, numbered from ``first``; returns once it was taken."""

    def send(self, first: int, lines: list[bytes]) -> None: ...

    def close(self) -> None: ...


class SyslogSender:
    """RFC 5424 over TCP, octet-counting framing; one connection, reopened after a failure."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0) -> None:
        self._address = (host, port)
        self._timeout = timeout
        self._sock: socket.socket | None = None
        self._hostname = socket.gethostname().split(".")[0] or "-"

    def send(self, first: int, lines: list[bytes]) -> None:
        """Raises: StoreError (``forward_unreachable``) the connection failed."""
        data = b"".join(
            syslog_frame(line, first + i, self._hostname) for i, line in enumerate(lines)
        )
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self._address, timeout=self._timeout)
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise _unreachable(f"syslog {self._address[0]}:{self._address[1]}", exc) from exc

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


class HttpSender:
    """POSTs each batch as JSON Lines (``application/x-ndjson``); a 2xx answer takes it."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        import httpx

        self._url = url
        self._client = httpx.Client(timeout=timeout, follow_redirects=False)
        self._shown = urlsplit(url).hostname or "the destination"

    def send(self, first: int, lines: list[bytes]) -> None:
        """Raises: StoreError (``forward_unreachable``, ``forward_refused``)."""
        import httpx

        try:
            answer = self._client.post(
                self._url,
                content=b"".join(lines),
                headers={
                    "Content-Type": "application/x-ndjson",
                    "Proctor-Audit-First-Line": str(first),
                    "Proctor-Audit-Lines": str(len(lines)),
                },
            )
        except httpx.HTTPError as exc:
            raise _unreachable(f"HTTP {self._shown}", exc) from exc
        if not 200 <= answer.status_code < 300:
            raise StoreError(
                f"{self._shown} answered {answer.status_code} to lines {first}-"
                f"{first + len(lines) - 1}; they stay unsent and are sent again next time",
                code="forward_refused",
            )

    def close(self) -> None:
        self._client.close()


def _unreachable(where: str, exc: Exception) -> StoreError:
    return StoreError(
        f"{where} could not be reached ({type(exc).__name__}); nothing after the cursor was"
        " counted as sent",
        code="forward_unreachable",
    )


@dataclass(frozen=True)
class Cursor:
    """How far the log was shipped: ``lines`` whole lines, ``offset`` bytes, the digest of the
    last line shipped (:data:`~.chain.GENESIS` before the first)."""

    lines: int = 0
    offset: int = 0
    last_digest: str = GENESIS


class Forwarder:
    """Ships ``log`` to ``sender`` from the cursor kept in ``cursor_dir`` for ``destination``.

    Raises (from its methods): StoreError ``forward_log_rewritten``, ``forward_cursor_invalid``,
    ``forward_cursor_unwritable``, and the sender's failures.
    """

    def __init__(
        self,
        log: Path,
        state_dir: Path,
        destination: Destination,
        sender: Sender,
        *,
        batch_lines: int = 500,
    ) -> None:
        self.log = log
        self.folder = state_dir / FORWARD_DIR
        self.path = self.folder / f"{destination.key}.json"
        self.sender = sender
        self.batch_lines = max(1, batch_lines)

    def cursor(self) -> Cursor:
        """The cursor on disk (none yet: the start of the log).

        Raises:
            StoreError: (``forward_cursor_invalid``) the file is not a cursor.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return Cursor()
        except OSError as exc:
            raise self._invalid(str(exc.strerror)) from exc
        try:
            doc = json_strict.loads(data, source=self.path.name)
        except ParseError as exc:
            raise self._invalid(f"not JSON proctor reads ({exc.code})") from None
        if (
            not isinstance(doc, dict)
            or doc.get("schema") != CURSOR_SCHEMA
            or type(doc.get("lines")) is not int
            or type(doc.get("offset")) is not int
            or not isinstance(doc.get("last_digest"), str)
            or doc["lines"] < 0
            or doc["offset"] < 0
        ):
            raise self._invalid("not a proctor.audit_forward_cursor.v1 document")
        return Cursor(doc["lines"], doc["offset"], doc["last_digest"])

    def _invalid(self, why: str) -> StoreError:
        return StoreError(
            f"the forwarding cursor {self.folder.name}/{self.path.name} is unusable ({why});"
            " delete it to ship the whole log again",
            code="forward_cursor_invalid",
        )

    def _save(self, cursor: Cursor) -> None:
        body = json.dumps(
            {
                "schema": CURSOR_SCHEMA,
                "lines": cursor.lines,
                "offset": cursor.offset,
                "last_digest": cursor.last_digest,
            },
            separators=(",", ":"),
        ).encode()
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            private_folders(self.folder)
            with open(temporary, "wb") as handle:
                handle.write(body + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
            fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise StoreError(
                f"the forwarding cursor could not be written ({exc.strerror}); the last batch"
                " will be sent again",
                code="forward_cursor_unwritable",
            ) from exc

    def _check_join(self, handle: Any, cursor: Cursor, size: int) -> None:
        """The last line shipped is still where the cursor says, unchanged."""
        if cursor.lines == 0 and cursor.offset == 0:
            return
        if size < cursor.offset or cursor.offset == 0:
            raise self._rewritten(cursor)
        start = max(0, cursor.offset - (1 << 20))
        while True:
            handle.seek(start)
            chunk = handle.read(cursor.offset - start)
            cut = chunk.rfind(b"\n", 0, len(chunk) - 1)
            if cut >= 0 or start == 0:
                break
            start = max(0, start - (1 << 20))
        last = chunk[cut + 1 :]
        if not last.endswith(b"\n") or line_digest(last) != cursor.last_digest:
            raise self._rewritten(cursor)

    def _rewritten(self, cursor: Cursor) -> StoreError:
        return StoreError(
            f"the audit log changed under the forwarding cursor (line {cursor.lines} is not"
            " what was shipped); nothing was sent. `proctor audit verify` says what happened",
            code="forward_log_rewritten",
        )

    def _batches(self, handle: Any, cursor: Cursor) -> Iterator[tuple[list[bytes], int]]:
        handle.seek(cursor.offset)
        batch: list[bytes] = []
        size = 0
        for line in handle:
            if not line.endswith(b"\n"):
                break  # still being written
            batch.append(line)
            size += len(line)
            if len(batch) >= self.batch_lines or size >= MAX_BATCH_BYTES:
                yield batch, size
                batch, size = [], 0
        if batch:
            yield batch, size

    def drain(self) -> int:
        """Ship every whole line after the cursor; the number of lines shipped.

        Raises:
            StoreError: see the class docstring; lines shipped before the failure stay
                counted.
        """
        cursor = self.cursor()
        shipped = 0
        try:
            handle = open(self.log, "rb")  # noqa: SIM115  (closed below; seeks both ways)
        except FileNotFoundError:
            if cursor.lines:
                raise self._rewritten(cursor) from None
            return 0
        with handle:
            self._check_join(handle, cursor, os.fstat(handle.fileno()).st_size)
            for batch, size in self._batches(handle, cursor):
                self.sender.send(cursor.lines + 1, batch)
                kill_point("forward.sent")
                cursor = Cursor(
                    cursor.lines + len(batch), cursor.offset + size, line_digest(batch[-1])
                )
                self._save(cursor)
                kill_point("forward.saved")
                shipped += len(batch)
        return shipped

    def follow(
        self,
        stopped: Callable[[], bool],
        *,
        wait: Callable[[float], object] = time.sleep,
        poll_s: float = 1.0,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> None:
        """Drain, then wait for the log to grow, until ``stopped()``; a failed delivery is
        retried with a growing pause (up to a minute). A rewritten log stops it.

        Raises:
            StoreError: ``forward_log_rewritten``, ``forward_cursor_invalid``.
        """
        pause = poll_s
        while not stopped():
            try:
                self.drain()
                pause = poll_s
            except StoreError as exc:
                if exc.code in ("forward_log_rewritten", "forward_cursor_invalid"):
                    raise
                if on_error is not None:
                    on_error(exc)
                pause = min(60.0, pause * 2)
            wait(pause)


FORWARD_ENV = "PROCTOR_AUDIT_FORWARD_TO"


def background_forwarder(
    log: Path,
    state_dir: Path,
    environ: Mapping[str, str],
    *,
    report: Callable[[str], None],
    poll_s: float = 1.0,
) -> Callable[[], None] | None:
    """Forward the audit log from a thread while a long-running command (``proctor worker``,
    ``proctor serve``) runs, when ``PROCTOR_AUDIT_FORWARD_TO`` names a destination; the
    function that stops it (after the pass in progress), or ``None`` when none is configured.

    Raises:
        UsageError: (``forward_destination_invalid``) the variable is not a destination.
    """
    import threading

    to = environ.get(FORWARD_ENV)
    if not to:
        return None
    destination = parse_destination(to)
    sender: Sender = (
        SyslogSender(destination.host, destination.port)
        if destination.kind == "syslog"
        else HttpSender(destination.url)
    )
    forwarder = Forwarder(log, state_dir, destination, sender)
    stop = threading.Event()

    def run() -> None:
        try:
            forwarder.follow(
                stop.is_set,
                wait=stop.wait,
                poll_s=poll_s,
                on_error=lambda exc: report(f"audit forward: {exc.code}: {exc.message}"),
            )
        except StoreError as exc:  # a rewritten log or a bad cursor: stop and say why
            report(f"audit forward stopped: {exc.code}: {exc.message}")

    thread = threading.Thread(target=run, name="proctor-audit-forward", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=30)
        sender.close()

    return halt
