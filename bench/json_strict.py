"""Print the cost of the strict JSON reader beside json.loads: median and p95 per document.

The strict reader adds a depth scan before parsing and a duplicate-key check per object; the
peer is the standard library's json.loads on the same text, measured in the same run.

Run: .venv/bin/python bench/json_strict.py
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from _timing import measure as timed
from proctor.contracts.json_strict import loads
from proctor.errors import ParseError


def refuse(text: str) -> None:
    with contextlib.suppress(ParseError):
        loads(text)


def measure(label: str, fn: Callable[[], Any], rounds: int = 5000, warm: int = 3) -> float:
    return timed(label, fn, rounds, warm=warm, width=52)


def main() -> None:
    resume = json.dumps(
        {"answers": {"draft": {"request_digest": "sha256:" + "a" * 64, "value": {"reply": "hi"}}}}
    )
    inputs = json.dumps({"export": "notes/issue.json", "labels": ["bug", "ui"], "n": 3})
    item = {"tags": ["a", "b"], "n": {"x": [1, {"y": "z"}]}}
    nested = json.dumps({"items": [{"id": i, **item} for i in range(20000)]})
    text = json.dumps({"content": "The quick brown fox. " * 50_000})
    for label, doc, rounds in (
        ("resume document (small)", resume, 5000),
        ("inputs document (small)", inputs, 5000),
        (f"1.1 MB text in one string ({len(text) // 1024} KiB)", text, 50),
        (f"80k objects, 160k brackets ({len(nested) // 1024} KiB)", nested, 20),
    ):
        peer = measure(f"json.loads   {label}", lambda d=doc: json.loads(d), rounds)
        strict = measure(f"strict loads {label}", lambda d=doc: loads(d), rounds)
        print(f"{'':<52} ratio {strict / peer:.2f}x")
    measure("strict refusal of 100,000 [", lambda: refuse("[" * 100_000), 50)
    measure('strict refusal of {"a": repeated 100,000 deep', lambda: refuse('{"a":' * 100_000), 20)


if __name__ == "__main__":
    main()
