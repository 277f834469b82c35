"""Limits read from the environment (the impure side of :mod:`proctor.core.budget`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from proctor.core.budget import MAX_RUN_RECEIPTS
from proctor.errors import ConfigError

__all__ = ["DEFAULT_MAX_CONCURRENCY", "max_concurrency_from_env", "max_receipts_from_env"]


def max_receipts_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The host's receipt budget of a run: ``PROCTOR_MAX_RECEIPTS``, default and ceiling
    16,000,000 (:data:`~proctor.core.budget.MAX_RUN_RECEIPTS`); a run's authority
    (``max_receipts``) may narrow it further.

    Raises:
        ConfigError: (code ``max_receipts_invalid``) the variable is set but is not a decimal
            integer between 1 and 16,000,000; a run never starts under a limit it cannot honour.
    """
    env = os.environ if environ is None else environ
    raw = env.get("PROCTOR_MAX_RECEIPTS")
    if raw is None or raw.strip() == "":
        return MAX_RUN_RECEIPTS
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(
            "PROCTOR_MAX_RECEIPTS must be a whole number between 1 and "
            f"{MAX_RUN_RECEIPTS}; unset it to use the default",
            code="max_receipts_invalid",
        )
    value = int(text)
    if not 1 <= value <= MAX_RUN_RECEIPTS:
        raise ConfigError(
            f"PROCTOR_MAX_RECEIPTS is {value}; it must be between 1 and {MAX_RUN_RECEIPTS} "
            "(no verifier accepts a larger tree)",
            code="max_receipts_invalid",
        )
    return value


DEFAULT_MAX_CONCURRENCY = 16
"""How many child runs run at once in a run's tree when ``PROCTOR_MAX_CONCURRENCY`` is unset."""


def max_concurrency_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The host's ceiling on child runs running at once: ``PROCTOR_MAX_CONCURRENCY``, default 16.

    Raises:
        ConfigError: (code ``max_concurrency_invalid``) the variable is set but is not a
            positive decimal integer; no run starts under a ceiling it cannot read.
    """
    env = os.environ if environ is None else environ
    raw = env.get("PROCTOR_MAX_CONCURRENCY")
    if raw is None:
        return DEFAULT_MAX_CONCURRENCY
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ConfigError(
            "PROCTOR_MAX_CONCURRENCY must be a positive whole number (how many child runs may"
            " run at once); unset it to use the default of 16",
            code="max_concurrency_invalid",
        )
    return int(text)
