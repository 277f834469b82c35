"""Shared rendering helpers for the CLI: JSON output and error printing.

JSON output is for programs, yet it often reaches a terminal: every control, escape,
bidirectional or invisible character in it (which can only sit inside a JSON string) is written
as its ``\\uXXXX`` escape, which a JSON reader turns back into exactly the same text. An
error's message goes through the terminal's boundary (:func:`proctor.cli.paint.inert`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from proctor.errors import ProctorError


def _json_escape(char: str) -> str:
    point = ord(char)
    if point < 0x10000:
        return f"\\u{point:04x}"
    point -= 0x10000  # a surrogate pair, as JSON writes a character past the BMP
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def inert_json(document: Any) -> str:
    """``document`` as JSON text (sorted keys, UTF-8, indented) in which no character can act
    on a terminal: the hostile ones are ``\\uXXXX`` escapes, the same text to a reader."""
    from proctor.core.inert_text import replace_hostile

    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return replace_hostile(text, _json_escape)[0]


def dump_json(document: Any, *, schema: str | None = None) -> None:
    """Print one JSON document on stdout (:func:`inert_json`, one trailing newline); with
    ``schema``, that id goes in its ``schema`` key (see :mod:`proctor.contracts.cli_json`)."""
    if schema is not None:
        document = {**document, "schema": schema}
    sys.stdout.write(inert_json(document) + "\n")
    sys.stdout.flush()


def print_error(exc: ProctorError, *, as_json: bool = False) -> None:
    """Print an error after scrubbing secrets: ``error[code]: message`` on stderr, and under
    ``as_json`` a ``proctor.error.v1`` object on stdout too (for the program reading it)."""
    from proctor.runtime.boundary.sanitize import scrub_text

    if as_json:
        print_json_error(
            exc.code, exc.message, exc.exit_code, exc.to_dict().get("details"), own=exc.own
        )
    from proctor.cli.paint import inert

    sys.stderr.write(f"error[{exc.code}]: {inert(scrub_text(exc.message, own=exc.own))}\n")
    sys.stderr.flush()


def print_json_error(
    code: str,
    message: str,
    exit_code: int,
    details: Any = None,
    *,
    own: Sequence[tuple[int, int]] = (),
) -> None:
    """Print a ``proctor.error.v1`` object on stdout, its message and details scrubbed (``own``:
    the spans of the message that are proctor's own words, see :class:`proctor.errors.Message`)."""
    from proctor.contracts.cli_json import ERROR_SCHEMA
    from proctor.runtime.boundary.sanitize import scrub_text

    doc: dict[str, Any] = {
        "schema": ERROR_SCHEMA,
        "code": code,
        "message": scrub_text(message, own=own),
        "exit_code": exit_code,
    }
    if details:
        # a scrubbed value that is no longer JSON is left out: the code and message say it
        with contextlib.suppress(ValueError):
            doc["details"] = json.loads(scrub_text(json.dumps(details, sort_keys=True)))
    dump_json(doc)
