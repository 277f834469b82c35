"""The ``proctor`` command: a click group whose sub-commands load lazily.

Each command group lives in its own module and is imported only when it is invoked, so
``proctor --help`` stays instant; a plain ``proctor run``, ``resume`` or ``verify`` command line
is read without click at all (:mod:`proctor.cli.running`, :mod:`proctor.cli.resuming`,
:mod:`proctor.cli.verifying`), and ended by Ctrl-C as click ends one (``Aborted.``, 130); the
console script's process of such a command ends as soon as its threads, atexit handlers and
open files are finished, without the interpreter's teardown of its modules. The CLI catches
:class:`proctor.errors.ProctorError` alone, prints it (sanitized) and exits with its code;
anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    pass


def _wants_json(argv: list[str] | None) -> bool:
    """Whether the command line asks for ``--json`` (before a ``--`` that ends the options)."""
    args = sys.argv[1:] if argv is None else argv
    return "--json" in args[: args.index("--")] if "--" in args else "--json" in args


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the console script; maps ProctorError to its exit code.

    An error is ``error[code]: message`` on stderr; under ``--json`` it is also a
    ``proctor.error.v1`` object on stdout (code, message, exit code). An argument holding a NUL
    byte (which no process's command line can, but ``main(argv)`` can be given) is refused as a
    usage error before any command reads it. When the reader of standard output goes away
    (``proctor history | head``) the command ends quietly with exit 1, as click ends one; what
    it recorded before stays recorded.
    """
    try:
        return _main(argv)
    except BrokenPipeError:
        if not _output_gone():
            raise  # a pipe of proctor's own broke: a bug, shown as one
        _quiet_output()
        sys.exit(1)


def _main(argv: list[str] | None) -> Any:
    from proctor.errors import ProctorError, UsageError

    as_json = _wants_json(argv)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if any("\0" in arg for arg in args):
            raise UsageError("a command-line argument holds a NUL byte", code="argument_nul")
        if args in (["--help"], ["-h"]):
            from proctor.cli.top_help import terminal_columns, top_help

            text = top_help(terminal_columns())
            if text is not None:
                sys.stdout.write(text)
                return 0
        plain = _plain_command(args)
        if plain is not None:
            command, params = plain
            if args[0] != "verify":  # verify reads no YAML
                from proctor.cli.caches import use_home_caches

                use_home_caches()
            try:
                if argv is None:
                    _end_when_done(lambda: command(**params))
                return command(**params)
            except (EOFError, KeyboardInterrupt):  # as click ends a command it runs
                sys.stderr.write("\nAborted.\n")
                sys.exit(130)
        if argv is None:
            _end_when_done(lambda: _click_main(None, as_json))
        return _click_main(argv, as_json)
    except ProctorError as exc:
        from proctor.cli.render import print_error

        print_error(exc, as_json=as_json)
        sys.exit(exc.exit_code)


def _output_gone() -> bool:
    """Whether standard output (or error) is a pipe whose reader has gone (``proctor run |
    head``): its write end then polls with an error."""
    import select

    for stream in (sys.stdout, sys.stderr):
        try:
            poller = select.poll()
            poller.register(stream.fileno(), select.POLLOUT)
            if any(events & select.POLLERR for _fd, events in poller.poll(0)):
                return True
        except (OSError, ValueError):
            continue
    return False


def _quiet_output() -> None:
    """Point standard output and error at the null device, so the writes still buffered
    there end without a second error when the process ends."""
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(null, stream.fileno())
    os.close(null)


def _end_when_done(command: Callable[[], Any]) -> NoReturn:
    """Run the command of the process's own command line, then end the process with its exit
    status without the interpreter's teardown of every module it loaded (a sixth of a
    hello-world run's CPU time).

    What teardown would still do is done first: every non-daemon thread is joined, the
    ``atexit`` handlers run, and every open file object is flushed, standard output and error
    included. By then a run's store, audit log and receipts are closed and durable (a run is
    built to survive being killed at any point; ending here is a clean stop after its last
    write). A :class:`~proctor.errors.ProctorError` leaves as from any command.
    """
    try:
        returned = command()
    except SystemExit as exc:
        returned = exc.code
    if returned is not None and not isinstance(returned, int):
        sys.exit(returned)  # a message for the interpreter to print: its own way out
    _finish_like_teardown()
    os._exit(returned or 0)


def _finish_like_teardown() -> None:
    """What the interpreter's own shutdown does before it tears modules down, in its order:
    the thread machinery's exit hooks (an executor stops its idle workers) and the join of every
    non-daemon thread (``threading._shutdown``, which the interpreter itself calls), then the
    ``atexit`` handlers; and every open file object flushed."""
    import atexit
    import gc
    import io
    import itertools

    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    writers = {io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair, io.TextIOWrapper}
    every = gc.get_objects()
    # The objects are picked out in C (a loop over them in Python would cost more than the
    # teardown it replaces): the file objects of open() and the standard streams.
    for obj in itertools.compress(every, map(writers.__contains__, map(type, every))):
        if not obj.closed:
            with contextlib.suppress(OSError, ValueError):
                obj.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _plain_command(args: list[str]) -> tuple[Callable[..., Any], dict[str, Any]] | None:
    """A plain ``proctor run``, ``resume`` or ``verify`` command line read without click (see
    :mod:`proctor.cli.plain_argv`): the command and its parameters, else None."""
    if args and args[0] == "run":
        from proctor.cli.running import parse_run_argv, run_command

        params = parse_run_argv(args[1:])
        return None if params is None else (run_command, params)
    if args and args[0] == "resume":
        from proctor.cli.resuming import parse_resume_argv, resume_command

        params = parse_resume_argv(args[1:])
        return None if params is None else (resume_command, params)
    if args and args[0] == "verify":
        from proctor.cli.verifying import parse_verify_argv, verify_command

        params = parse_verify_argv(args[1:])
        return None if params is None else (verify_command, params)
    return None


def _click_main(argv: list[str] | None, as_json: bool) -> Any:
    """The command line read by click: its usage errors printed, with their exit codes."""
    import click

    from proctor.cli.group import cli

    try:
        return cli.main(args=argv, prog_name="proctor", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        code = 2 if isinstance(exc, click.UsageError) else exc.exit_code
        if as_json:
            from proctor.cli.render import print_json_error

            print_json_error("usage_error", exc.format_message(), code)
        exc.show()
        sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)


def __getattr__(name: str) -> Any:
    """``cli``, the click group, imported on first use (``proctor.cli.group``)."""
    if name == "cli":
        from proctor.cli.group import cli

        return cli
    raise AttributeError(name)


if __name__ == "__main__":  # pragma: no cover
    main()
