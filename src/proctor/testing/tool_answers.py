"""A test's declared answers to calls of named tools, matched on tool and exact arguments.

The one matching rule behind ``providers.mcp`` and ``providers.processes``: an entry is a tool
name, its arguments (compared as canonical JSON) and the result to give; two entries with the
same tool and arguments are refused when the test is read (``test_exchange_invalid``). Each
use is counted and each call that matched no entry is kept (by argument digest, never the
arguments), so a test can fail on an entry no call used or a call no entry answered.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from proctor.errors import UsageError
from proctor.receipts.canonical import digest

__all__ = ["ToolAnswers"]


class ToolAnswers:
    """Declared results by tool and arguments, with how often each was used and what matched
    none (safe to use from the threads of one run)."""

    def __init__(
        self,
        entries: Iterable[tuple[str, Mapping[str, Any], dict[str, Any]]],
        source: str,
        field: str,
    ) -> None:
        """Raises:
        UsageError: ``test_exchange_invalid``: two entries with the same tool and arguments.
        """
        self.field = field
        self.declared: list[tuple[str, str, dict[str, Any]]] = []
        seen: set[tuple[str, str]] = set()
        for index, (tool, arguments, result) in enumerate(entries):
            key = (tool, digest(dict(arguments)))
            if key in seen:
                raise UsageError(
                    f"{source}: {field}[{index}] repeats the tool and arguments of an earlier"
                    " entry",
                    code="test_exchange_invalid",
                )
            seen.add(key)
            self.declared.append((tool, key[1], result))
        self.counts = [0] * len(self.declared)
        self.unmatched: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def take(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """A copy of the result of the entry matching this call, counted; ``None`` (and the
        call kept as unmatched) when no entry matches."""
        wanted = digest(dict(arguments))
        with self._lock:
            for index, (declared, args_digest, result) in enumerate(self.declared):
                if declared == tool and args_digest == wanted:
                    self.counts[index] += 1
                    return dict(result)
            self.unmatched.append({"tool": tool, "args_digest": wanted})
        return None
