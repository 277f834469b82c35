"""Replay retention: what a run keeps so that ``proctor test record --from`` can replay it.

By default the run store keeps a call's argument *digest*, not its arguments, and nothing of a
managed turn's model answers. A workspace that wants its runs replayable offline opts in with

.. code-block:: toml

    [replay]
    retain = true

in ``proctor.toml``. The choice is read when a run starts and recorded in the run
(``data.retain``), so whatever process resumes it keeps retaining. A retaining run keeps:

- each call's arguments beside its settled result (``args`` in the call's stored result; a
  refused call's too, when its refusal is recorded), scrubbed by the run's sanitizer first
  (its taint set of delivered secrets, credential shapes, secret-named fields): a secret is a
  ``[REDACTED:…]`` marker, never a value;
- each answer of a managed turn's model, the provider's own document, scrubbed the same way,
  as a ``model_answer`` event of the run (``step``, ``request``, ``dialect``, ``model``,
  ``document``).

Decisions (answers, approvals) and results were kept before; with these two the run can be
turned into a test file. The receipts commit the digests of what ran (a call receipt's
``inputs_digest`` and ``outputs_digest``); the recorder checks the retained bytes against them.
"""

from __future__ import annotations

import os
from pathlib import Path

from proctor.errors import ConfigError
from proctor.runtime.boundary.plain_file import regular_file

__all__ = ["MODEL_ANSWER_EVENT", "RETAINED_ARGS", "replay_retain"]

RETAINED_ARGS = "args"
"""The key of a retaining run's call record that holds the call's scrubbed arguments."""
MODEL_ANSWER_EVENT = "model_answer"
"""The run event that keeps one scrubbed answer of a managed turn's model."""


def replay_retain(workspace_root: Path) -> bool:
    """Whether ``<workspace>/proctor.toml`` says ``[replay] retain = true`` (false when either
    is absent).

    Raises:
        ConfigError: ``replay_config_invalid``: the file is not valid TOML, ``[replay]`` is
            not a table, holds another key, or ``retain`` is not a boolean.
    """
    path = os.path.join(workspace_root, "proctor.toml")  # asked every run: no Path built
    if not regular_file(path):
        return False
    import tomllib  # read only when the workspace has a proctor.toml

    try:
        with open(path, encoding="utf-8") as handle:
            document = tomllib.loads(handle.read())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"proctor.toml is not valid TOML: {exc}", code="replay_config_invalid"
        ) from exc
    section = document.get("replay", {})
    if not isinstance(section, dict):
        raise ConfigError("proctor.toml: [replay] must be a table", code="replay_config_invalid")
    unknown = sorted(set(section) - {"retain"})
    if unknown:
        raise ConfigError(
            f"proctor.toml: unknown key in [replay]: {unknown[0]}", code="replay_config_invalid"
        )
    retain = section.get("retain", False)
    if not isinstance(retain, bool):
        raise ConfigError(
            "proctor.toml: replay.retain must be true or false", code="replay_config_invalid"
        )
    return retain
