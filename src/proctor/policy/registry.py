"""The guard registry: guards by name, the shipped ones protected, and ``register_guard``.

A registry built :meth:`GuardRegistry.with_shipped` holds every guard of
:mod:`proctor.policy.shipped_guards` and refuses to let a user guard replace one.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from proctor.errors import PolicyLoadError
from proctor.policy.shipped_guards import SHIPPED_GUARDS

__all__ = ["GuardRegistry", "default_registry", "register_guard", "registering_into"]

_F = TypeVar("_F")


class GuardRegistry:
    """Guards by name. ``default_registry()`` holds the shipped ones; tests build their own.

    The registry stores whatever it is given: whether an entry is callable with one argument is
    judged when policies load (a load error naming the rule), not here, so a broken user guard
    surfaces against the rule that uses it.
    """

    __slots__ = ("_guards", "_protected")

    def __init__(self, guards: Mapping[str, object] | None = None) -> None:
        self._guards: dict[str, object] = {}
        self._protected: frozenset[str] = frozenset()
        for name, guard in (guards or {}).items():
            self.register(name, guard)

    @classmethod
    def with_shipped(cls) -> GuardRegistry:
        """A new registry holding exactly the shipped guards (which it then refuses to replace)."""
        registry = cls(SHIPPED_GUARDS)
        registry._protected = frozenset(SHIPPED_GUARDS)
        return registry

    def copy(self) -> GuardRegistry:
        """An independent registry with the same entries (registering into it leaves this alone)."""
        other = GuardRegistry()
        other._guards = dict(self._guards)
        other._protected = self._protected
        return other

    def register(self, name: str, guard: object) -> None:
        """Register ``guard`` under ``name``.

        Raises:
            PolicyLoadError: ``name`` is empty, or already names a different guard (a user guard
                can never replace a shipped one, nor two modules claim one name silently).
        """
        if not isinstance(name, str) or not name.strip():
            raise PolicyLoadError("a guard name must be a non-empty string", code="bad_guard_name")
        existing = self._guards.get(name)
        if existing is not None and existing is not guard:
            what = "a shipped guard" if name in self._protected else "another guard"
            raise PolicyLoadError(
                f"guard name '{name}' is already registered to {what}; choose another name",
                code="duplicate_guard",
                details={"guard": name},
            )
        self._guards[name] = guard

    def guard(self, name: str) -> Callable[[_F], _F]:
        """Decorator form of :meth:`register`."""

        def decorator(fn: _F) -> _F:
            self.register(name, fn)
            return fn

        return decorator

    def get(self, name: str) -> object | None:
        """The entry registered under ``name``, or ``None``."""
        return self._guards.get(name)

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        return tuple(sorted(self._guards))

    def __contains__(self, name: object) -> bool:
        return name in self._guards

    def __len__(self) -> int:
        return len(self._guards)

    def __repr__(self) -> str:
        return f"GuardRegistry({', '.join(self.names())})"


_DEFAULT: GuardRegistry | None = None
_TARGET: contextvars.ContextVar[GuardRegistry | None] = contextvars.ContextVar(
    "proctor_guard_target", default=None
)


def default_registry() -> GuardRegistry:
    """The process-wide registry: the shipped guards plus any registered by ``register_guard``."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = GuardRegistry.with_shipped()
    return _DEFAULT


@contextmanager
def registering_into(registry: GuardRegistry) -> Iterator[GuardRegistry]:
    """Within the block, ``register_guard`` registers into ``registry`` (loads user guards)."""
    token = _TARGET.set(registry)
    try:
        yield registry
    finally:
        _TARGET.reset(token)


def register_guard(name: str) -> Callable[[_F], _F]:
    """Decorator: register the function as a guard named ``name``.

    It registers into the registry a user-guard load is filling, or else the default registry.

    Raises:
        PolicyLoadError: the name is taken by a different guard (see ``GuardRegistry.register``).
    """

    def decorator(fn: _F) -> _F:
        target = _TARGET.get()
        if target is None:  # an empty registry being filled is falsy, and still the target
            target = default_registry()
        target.register(name, fn)
        return fn

    return decorator
