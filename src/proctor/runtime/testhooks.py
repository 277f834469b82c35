"""Crash-test hooks: kill the process at a named point (only when ``PROCTOR_TEST_HOOKS=1``).

``PROCTOR_TEST_KILL_AT=<point>:<n>`` SIGKILLs the process the ``n``-th time (from 1) it passes
``<point>`` (the crash harness in ``tests/crash/`` lists the points). The flag is read once,
when this module is first imported (the harness sets it in the environment of the process it
starts); without it the environment is not read past that flag, so production paths carry one
test of a module global and nothing else.
"""

from __future__ import annotations

import os

__all__ = ["kill_point"]

_COUNTS: dict[str, int] = {}
_TARGET: tuple[str, int] | bool | None = False
_ENABLED = os.environ.get("PROCTOR_TEST_HOOKS") == "1"


def _target() -> tuple[str, int] | None:
    global _TARGET
    if _TARGET is False:
        spec = os.environ.get("PROCTOR_TEST_KILL_AT", "")
        point, _, n = spec.rpartition(":")
        _TARGET = (point, int(n)) if point and n.isdigit() else None
    assert _TARGET is not True
    return _TARGET if _TARGET else None


def kill_point(name: str) -> None:
    """Pass a named point; SIGKILL the process if the crash test targets this passage."""
    if not _ENABLED:
        return
    count = _COUNTS.get(name, 0) + 1
    _COUNTS[name] = count
    trace = os.environ.get("PROCTOR_TEST_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{name}:{count}\n")
    target = _target()
    if target is not None and target == (name, count):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
