"""The program a worker step's function runs in (started by :mod:`proctor.runtime.tools.pyfunc`).

Standard library only, run as ``python -I -S pyfunc_runner.py`` inside the sandbox. It reads
one JSON line on stdin (the module's source as proctor read and digested it, the function's
name, the inputs), runs ``function(inputs, ctx)`` and writes its JSON result as the last line
of the protocol. ``ctx.call(tool, args)`` and ``ctx.read(ref, offset, length)`` are requests on
the same two pipes, answered by proctor after admission. What the function prints goes to
stderr: stdout carries the protocol only.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any


class CallFailed(Exception):
    """A ``ctx.call`` or ``ctx.read`` proctor refused or that failed: ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Context:
    """What a worker function may use besides its inputs."""

    CallFailed = CallFailed

    def __init__(self, reply_in: Any, out: Any) -> None:
        self._in = reply_in
        self._out = out
        self._next = 0

    def _ask(self, request: dict[str, Any]) -> Any:
        self._next += 1
        request["id"] = self._next
        self._out.write(json.dumps(request) + "\n")
        self._out.flush()
        reply = json.loads(self._in.readline() or "{}")
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise CallFailed(str(error.get("code", "failed")), str(error.get("message", "")))
        return reply.get("result")

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        """Call a tool through proctor's admission; returns its result.

        Raises:
            CallFailed: the call was refused (outside the allowance, past max_calls ...) or
                failed.
        """
        return self._ask({"type": "call", "tool": tool, "args": args})

    def read(self, ref: str, offset: int = 0, length: int = 1024 * 1024) -> dict[str, Any]:
        """One page of an artifact of the run: ``data`` (bytes), ``next_offset``, ``eof``,
        ``digest`` and ``range_digest``.

        Raises:
            CallFailed: an unknown or changed artifact.
        """
        page = dict(self._ask({"type": "read", "ref": ref, "offset": offset, "length": length}))
        page["data"] = base64.b64decode(page["data"])
        return page


def main() -> int:
    """Run the function once; the protocol's last line says how it ended."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    start = json.loads(sys.stdin.readline())

    def finish(message: dict[str, Any]) -> int:
        out.write(json.dumps(message, allow_nan=False) + "\n")
        out.flush()
        return 0

    try:
        namespace: dict[str, Any] = {"__name__": "proctor_worker", "__file__": start["filename"]}
        exec(compile(start["source"], start["filename"], "exec"), namespace)
        function = namespace.get(start["function"])
        if not callable(function):
            return finish({"type": "error", "kind": "function_missing", "message": ""})
        output = function(start["inputs"], Context(sys.stdin, out))
    except MemoryError:
        return finish({"type": "error", "kind": "memory", "message": "MemoryError"})
    except BaseException as exc:
        message = f"{type(exc).__name__}: {exc}"[:2000]
        return finish({"type": "error", "kind": "exception", "message": message})
    try:
        return finish({"type": "done", "output": output})
    except (TypeError, ValueError) as exc:
        return finish({"type": "error", "kind": "output_invalid", "message": str(exc)[:500]})


if __name__ == "__main__":
    sys.exit(main())
