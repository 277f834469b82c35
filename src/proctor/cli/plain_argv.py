"""Plain command lines read without click, for the commands whose start-up is measured
(``proctor run``, ``proctor resume``, ``proctor verify``).

A command declares its options once as :data:`Option` rows; its click command is built from the
same rows. :func:`read_plain` reads a command line with them the way click does, or returns
``None`` and leaves it to click: help, an option it does not know or a malformed one, a missing
or an extra argument, ``--``, and the options the command leaves to click. Click then reads it,
or refuses it, as it always has; property tests hold this reader to click's reading of every
command line it accepts (``tests/cli/test_run_argv.py``, ``tests/cli/test_verify_argv.py``).

A path option (kind ``file`` or ``folder``) is read as click's ``click.Path`` reads it (not
required to exist; ``file``: not a folder, ``folder``: not a regular file; readable when it
exists): a path click would refuse leaves the command line to click, which says why.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Sequence
from typing import Any

__all__ = ["Option", "read_plain", "with_options"]

Option = tuple[str, tuple[str, ...], str, "str | None", str]
"""``(parameter, flags, kind, metavar, help)``; ``kind`` is ``value`` (one string, the last one
given), ``multiple`` (every one given, in order, as a tuple), ``flag``, or ``file`` / ``folder``
(a ``value`` that is a path, see the module docstring)."""

_PATH_KINDS = {"file": stat.S_ISDIR, "folder": stat.S_ISREG}
"""For each path kind, the kind of existing file ``click.Path`` refuses for it."""


def read_plain(
    args: Sequence[str],
    arguments: Sequence[tuple[str, str | None]],
    options: Sequence[Option],
    *,
    left_to_click: Collection[str] = (),
) -> dict[str, Any] | None:
    """The parameters of a command line as click would read them, or ``None``.

    ``arguments`` are the positional parameters in order, each with its default (``None``:
    required).
    """
    by_flag = {flag: (name, kind) for name, flags, kind, _m, _h in options for flag in flags}
    found: dict[str, Any] = {}
    many: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("-") or arg == "-":
            if len(positional) == len(arguments):
                return None  # an extra argument: click says so
            positional.append(arg)
            continue
        if arg.startswith("--"):
            flag, eq, attached = arg.partition("=")
            value: str | None = attached if eq else None
        elif len(arg) > 2:
            flag, value = arg[:2], arg[2:]  # a short option with its value attached
        else:
            flag, value = arg, None
        known = by_flag.get(flag)
        if known is None:
            return None  # help, an unknown option, ``--``
        name, kind = known
        if name in left_to_click:
            return None
        if kind == "flag":
            if value is not None:
                return None  # a flag given a value: click refuses it
            found[name] = True
            continue
        if value is None:
            if index >= len(args):
                return None  # no value: click refuses it
            value = args[index]
            index += 1
        if kind == "multiple":
            many.setdefault(name, []).append(value)
        else:
            found[name] = value
    params: dict[str, Any] = {}
    for name, _flags, kind, _m, _h in options:
        if kind == "flag":
            params[name] = found.get(name, False)
        elif kind == "multiple":
            params[name] = tuple(many.get(name, ()))
        else:
            params[name] = found.get(name)
            refused = _PATH_KINDS.get(kind)
            if refused is not None and name in found and not _path_taken(found[name], refused):
                return None  # a path click.Path refuses: click says why
    for at, (name, default) in enumerate(arguments):
        if at < len(positional):
            params[name] = positional[at]
        elif default is None:
            return None  # a missing argument: click says so
        else:
            params[name] = default
    return params


def _path_taken(path: str, refused: Callable[[int], bool]) -> bool:
    """Whether ``click.Path`` (``exists=False``, ``readable=True``) takes ``path``: it takes a
    path that does not exist, else one not of the ``refused`` kind that may be read; a path
    the system cannot name (a NUL byte) is left to click."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:
        return False
    except OSError:
        return True
    return not refused(mode) and os.access(path, os.R_OK)


def with_options(options: Sequence[Option]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click options of a command's :data:`~proctor.cli.plain_argv.Option` rows, listed in
    help in their order."""

    import click  # only a click command is built with these

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name, flags, kind, metavar, text in reversed(options):
            if kind == "flag":
                fn = click.option(*flags, name, is_flag=True, help=text)(fn)
            elif kind in _PATH_KINDS:
                path = click.Path(dir_okay=kind != "file", file_okay=kind != "folder")
                fn = click.option(*flags, name, type=path, metavar=metavar, help=text)(fn)
            else:
                fn = click.option(
                    *flags, name, multiple=kind == "multiple", metavar=metavar, help=text
                )(fn)
        return fn

    return decorate
