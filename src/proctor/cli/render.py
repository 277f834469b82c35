"""Shared rendering helpers for the CLI: JSON output and error printing."""

from __future__ import annotations

import json
import sys
from typing import Any

from proctor.errors import ProctorError


def dump_json(document: Any) -> None:
    """Print one JSON document on stdout (sorted keys, UTF-8, one trailing newline)."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_error(exc: ProctorError) -> None:
    """Print an error on stderr as ``error[code]: message`` after scrubbing secrets."""
    from proctor.runtime.boundary.sanitize import scrub_text

    sys.stderr.write(f"error[{exc.code}]: {scrub_text(exc.message)}\n")
    sys.stderr.flush()
