"""User guards: a workspace names a Python module whose ``@register_guard`` functions become guards.

The module is named in ``proctor.toml`` or ``.proctor/config`` (same TOML)::

    [policy]
    guards = "guards.py"          # a path in the workspace, or a dotted module name
                                  # (a list of either is accepted too)

A dotted name ``a.b`` is found as ``a/b.py`` or ``a/b/__init__.py`` in the workspace; nothing is
imported from outside the workspace. The module is executed afresh on every load, with
``register_guard`` pointed at the registry being filled, so two workspaces (or two tests) never
share guards through ``sys.modules``. It is compiled from its source text each time, never
from a ``__pycache__`` file: Python trusts a cached file whose source has the same size and
modification second, so an edit within that second would otherwise run the old guard.
A user guard can never take a shipped guard's name.

A module written for the reference kernel loads unchanged: ``from auro_runtime.guards import
GuardContext, GuardVerdict, register_guard`` resolves, for that module alone, to proctor's names
(:mod:`proctor.policy.auro_guards`, which also shows its guards calls under the reference's
tool and argument names).
"""

from __future__ import annotations

import sys
from hashlib import sha256
from pathlib import Path

from proctor.errors import ConfigError, PolicyLoadError
from proctor.policy.registry import GuardRegistry, registering_into

__all__ = ["CONFIG_FILES", "guard_module_paths", "guard_modules", "load_user_guards"]

CONFIG_FILES: tuple[str, ...] = ("proctor.toml", ".proctor/config")
"""Where a workspace may name its guard module, relative to the workspace."""

_POLICY_KEYS = frozenset({"guards"})


def guard_modules(workspace: Path) -> tuple[str, ...]:
    """The guard module references the workspace's config names (empty when none).

    Raises:
        ConfigError: a config file is not valid TOML, ``[policy]`` holds an unknown key or a
            ``guards`` value that is not a string or list of strings, or the two config files
            name different modules.
    """
    found: dict[str, tuple[str, ...]] = {}
    for name in CONFIG_FILES:
        path = workspace / name
        if not path.is_file():
            continue
        import tomllib  # read only when a workspace has a config file

        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{name}: not readable as TOML ({exc})", code="bad_config") from None
        section = doc.get("policy")
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ConfigError(f"{name}: [policy] must be a table", code="bad_config")
        unknown = sorted(set(section) - _POLICY_KEYS)
        if unknown:
            raise ConfigError(
                f"{name}: [policy] has unknown key(s) {unknown}; it accepts only 'guards'",
                code="bad_config",
            )
        value = section.get("guards")
        if value is None:
            continue
        refs = (value,) if isinstance(value, str) else value
        if not isinstance(refs, list | tuple) or not all(isinstance(r, str) and r for r in refs):
            raise ConfigError(
                f"{name}: [policy] guards must be a module path or a list of them",
                code="bad_config",
            )
        found[name] = tuple(refs)
    distinct = set(found.values())
    if len(distinct) > 1:
        raise ConfigError(
            f"{' and '.join(found)} name different guard modules; name them in one place",
            code="bad_config",
        )
    return next(iter(distinct), ())


def guard_module_paths(workspace: Path) -> tuple[Path, ...]:
    """The files of the guard modules the workspace's config names, in config order.

    Raises:
        ConfigError: as :func:`guard_modules`; a module outside the workspace or missing.
    """
    root = workspace.resolve()
    return tuple(_module_path(root, ref) for ref in guard_modules(workspace))


def load_user_guards(workspace: Path, registry: GuardRegistry) -> tuple[str, ...]:
    """Execute the workspace's guard modules, registering their guards into ``registry``.

    Returns the guard names the modules added.

    Raises:
        ConfigError: the config is invalid (see :func:`guard_modules`), a module is outside the
            workspace or missing, or importing it raised (code ``guard_module_failed``).
        PolicyLoadError: a module registered a name already taken (``duplicate_guard``).
    """
    before = set(registry.names())
    root = workspace.resolve()
    for ref in guard_modules(workspace):
        path = _module_path(root, ref)
        digest = sha256(str(path).encode()).hexdigest()[:16]
        module_name = f"_proctor_user_guards_{digest}"
        import importlib.util

        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"guard module '{ref}' cannot be imported", code="bad_guard_module")
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__builtins__"] = _builtins_with_aliases()
        sys.modules[module_name] = module
        try:
            code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            with registering_into(registry):
                exec(code, module.__dict__)
        except PolicyLoadError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"guard module '{ref}' failed to import: {type(exc).__name__}",
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


def _module_path(root: Path, ref: str) -> Path:
    if ref.endswith(".py") or "/" in ref or "\\" in ref:
        candidates = [root / ref]
    else:
        parts = ref.split(".")
        if not all(p.isidentifier() for p in parts):
            raise ConfigError(
                f"guard module '{ref}' is not a module name or a .py path", code="bad_guard_module"
            )
        candidates = [
            root.joinpath(*parts).with_suffix(".py"),
            root.joinpath(*parts, "__init__.py"),
        ]
    for candidate in candidates:
        resolved = candidate.resolve()
        if not resolved.is_relative_to(root):
            raise ConfigError(
                f"guard module '{ref}' lies outside the workspace", code="bad_guard_module"
            )
        if resolved.is_file():
            return resolved
    raise ConfigError(
        f"guard module '{ref}' is not found in the workspace", code="bad_guard_module"
    )
