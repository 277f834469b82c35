"""The workspace's command lock: two runs' process tools never run at once in one workspace.

A workspace asks for it in ``proctor.toml``::

    [workspace]
    exclusive_commands = true

Off by default: workers sharing one workspace drive runs in parallel, and most commands do not
step on each other. When on, every process tool of a run (``command.execute`` for its whole
life, a worker step for its whole life, ``process.start`` while it starts its program) holds
the lock ``.proctor/locks/commands.lock`` (an ``flock``, so every process on the host that opens
the workspace sees it; the kernel drops it when its holder dies, so a crash never leaves it
held). Runs of one tree (a root and its child runs, which drive in threads of the root's
process) share their root's hold: a child's command never waits on its own root, and
siblings of a fan-out run side by side as they would without the lock. A run of another tree
waits until the holder's command ends.

The tree is named by its root run's id, which a child run's record keeps as ``tree``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from proctor.errors import ConfigError
from proctor.runtime.tools.base import ToolContext

__all__ = ["exclusive_commands", "hold", "tree_of"]

_LOCK_NAME = "commands.lock"


def exclusive_commands(root: Path) -> bool:
    """``[workspace] exclusive_commands`` of ``<root>/proctor.toml`` (false when absent).

    Raises:
        ConfigError: ``bad_config``: not valid TOML, ``[workspace]`` not a table, or the value
            not a boolean.
    """
    path = root / "proctor.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("proctor.toml cannot be read as UTF-8 text", code="bad_config") from exc
    if "exclusive_commands" not in text:
        return False
    import tomllib  # only a workspace that names the setting pays for the parser

    try:
        section = tomllib.loads(text).get("workspace", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"proctor.toml is not valid TOML: {exc}", code="bad_config") from None
    if not isinstance(section, dict):
        raise ConfigError("proctor.toml: [workspace] must be a table", code="bad_config")
    value = section.get("exclusive_commands", False)
    if not isinstance(value, bool):
        raise ConfigError(
            "proctor.toml: [workspace] exclusive_commands must be true or false",
            code="bad_config",
        )
    return value


def tree_of(ctx: ToolContext) -> str:
    """The root run of the call's run tree (a child run's record names it as ``tree``)."""
    record = ctx.store.get_run(ctx.run_id)
    tree = (record.data if record is not None else {}).get("tree")
    return tree if isinstance(tree, str) else ctx.run_id


class _Hold:
    """One lock file's hold in this process: the tree holding it and how many of its calls."""

    def __init__(self) -> None:
        self.owner: str | None = None
        self.count = 0
        self.fd: int | None = None
        self.ready = threading.Event()
        self.failed: BaseException | None = None


_HOLDS: dict[str, _Hold] = {}
_CHANGED = threading.Condition()


@contextlib.contextmanager
def hold(ctx: ToolContext) -> Iterator[None]:
    """Hold the workspace's command lock for the block when the workspace asks for it;
    otherwise do nothing. Waits while a run of another tree holds it.

    Raises:
        ConfigError: ``bad_config`` (:func:`exclusive_commands`).
        OSError: the lock file cannot be opened.
    """
    root = ctx.workspace.root
    if not exclusive_commands(root):
        yield
        return
    path = ctx.workspace.private_dir("locks") / _LOCK_NAME
    key = os.path.realpath(path)
    tree = tree_of(ctx)
    with _CHANGED:
        held = _HOLDS.setdefault(key, _Hold())
        while held.owner is not None and held.owner != tree:
            _CHANGED.wait()
        first = held.owner is None
        held.owner = tree
        held.count += 1
        ready = held.ready
    try:
        if first:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # other processes' trees
                except BaseException:
                    os.close(fd)
                    raise
                held.fd = fd
            except BaseException as exc:
                held.failed = exc
                raise
            finally:
                ready.set()
        else:
            ready.wait()  # the tree's first call takes the file lock
            if held.failed is not None:
                raise held.failed
        yield
    finally:
        with _CHANGED:
            held.count -= 1
            if held.count == 0:
                if held.fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(held.fd)  # closing the only descriptor drops the flock
                held.owner, held.fd, held.failed = None, None, None
                held.ready = threading.Event()
                _CHANGED.notify_all()
