"""User guards: a workspace's guard modules, executed only once a person trusted their bytes.

The modules are named in ``proctor.toml`` or ``.proctor/config`` and read once by
:func:`proctor.policy.guard_files.read_guard_files`. :func:`load_user_guards` is the only
place a guard module is executed, and it takes a :data:`GuardTrust` with no default: the trust
is asked about the very :class:`~proctor.policy.guard_files.GuardFiles` whose bytes are then
executed (never a file opened again by name), and it refuses with ``guards_untrusted`` unless a
person trusted that digest. A repository someone cloned therefore runs no Python of its own in
proctor's process until a person said so (``proctor trust``); the home's trust records and the
audited ``PROCTOR_TRUST_WORKSPACE=1`` are :mod:`proctor.runtime.home.trust`.

Each module is executed afresh on every load, with ``register_guard`` pointed at the registry
being filled, so two workspaces (or two tests) never share guards through ``sys.modules``. It
is compiled from the bytes read, never from a ``__pycache__`` file, and executed as a lone
module (not a package: a relative import would read a file nobody trusted). A user guard can
never take a shipped guard's name.

A module written for the reference kernel loads unchanged: ``from auro_runtime.guards import
GuardContext, GuardVerdict, register_guard`` resolves, for that module alone, to proctor's names
(:mod:`proctor.policy.auro_guards`, which also shows its guards calls under the reference's
tool and argument names).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from hashlib import sha256

from proctor.errors import ConfigError, PolicyLoadError
from proctor.policy.guard_files import CONFIG_FILES, GuardFiles, guard_modules, read_guard_files
from proctor.policy.registry import GuardRegistry, registering_into

__all__ = [
    "CONFIG_FILES",
    "GuardTrust",
    "guard_modules",
    "load_user_guards",
    "read_guard_files",
    "refuse_untrusted",
    "trusting",
]

GuardTrust = Callable[[GuardFiles], None]
"""Asked before any guard module of a workspace runs, with exactly the files that would run:
returns to admit them, raises :class:`~proctor.errors.ConfigError` (``guards_untrusted``) to
refuse. Only asked when the config names at least one module."""


def refuse_untrusted(files: GuardFiles) -> None:
    """The :data:`GuardTrust` that trusts nothing: a caller that did not say whom to trust.

    Raises:
        ConfigError: ``guards_untrusted``, always.
    """
    raise ConfigError(
        f"this workspace names guard modules ({_names(files)}) that no one trusted; review "
        "them and run `proctor trust` in the workspace (or, from Python, pass trust=)",
        code="guards_untrusted",
        details={"digest": files.digest},
    )


def trusting(digest: str) -> GuardTrust:
    """A :data:`GuardTrust` admitting exactly the guard files whose digest is ``digest``
    (:attr:`GuardFiles.digest`): a caller that reviewed those bytes."""

    def admit(files: GuardFiles) -> None:
        if files.digest != digest:
            raise ConfigError(
                f"the guard files ({_names(files)}) are not the ones trusted "
                f"(digest {files.digest}, trusted {digest})",
                code="guards_untrusted",
                details={"digest": files.digest, "trusted": digest},
            )

    return admit


def _names(files: GuardFiles) -> str:
    return ", ".join(f.path for f in files.modules)


def load_user_guards(
    files: GuardFiles, registry: GuardRegistry, *, trust: GuardTrust
) -> tuple[str, ...]:
    """Execute the guard modules of ``files`` (their bytes as read), registering their guards
    into ``registry``, once ``trust`` admitted exactly those files.

    Returns the guard names the modules added (empty, and ``trust`` not asked, when the config
    names no module).

    Raises:
        ConfigError: ``guards_untrusted`` (from ``trust``: nothing was executed), or a module
            raised while it ran (``guard_module_failed``).
        PolicyLoadError: a module registered a name already taken (``duplicate_guard``).
    """
    if not files.modules:
        return ()
    trust(files)
    before = set(registry.names())
    for module_file in files.modules:
        path = files.root / module_file.path
        module_name = f"_proctor_user_guards_{sha256(str(path).encode()).hexdigest()[:16]}"
        import types

        module = types.ModuleType(module_name)
        module.__file__ = str(path)
        module.__dict__["__builtins__"] = _builtins_with_aliases()
        sys.modules[module_name] = module
        try:
            code = compile(module_file.data, str(path), "exec", dont_inherit=True)
            with registering_into(registry):
                exec(code, module.__dict__)
        except PolicyLoadError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"guard module '{module_file.ref}' failed to import: {type(exc).__name__}",
                code="guard_module_failed",
            ) from exc
        finally:
            sys.modules.pop(module_name, None)
    return tuple(sorted(set(registry.names()) - before))


def _builtins_with_aliases() -> dict[str, object]:
    """The builtins a guard module runs with: the interpreter's, with an ``__import__`` that
    answers the reference kernel's guard module names (its functions keep these builtins, so
    an import inside a guard resolves the same way)."""
    import builtins

    from proctor.policy.auro_guards import aliased_import

    namespace = dict(vars(builtins))
    namespace["__import__"] = aliased_import(builtins.__import__)
    return namespace
