"""The home (``PROCTOR_HOME`` or ``~/.proctor``): what belongs to the person, not the workspace.

Owns: :mod:`.files` (where the home is; its private files, written whole or not at all),
:mod:`.keys` (the Ed25519 signing key: created once, an exposed one refused), :mod:`.config`
(``config.json``'s ``agent`` section), :mod:`.presets` (saved authority presets) and
:mod:`.credentials` (encrypted profiles, project bindings, resolution and readiness).

Surface: ``keys``, ``config``, ``presets``, ``credentials`` (its ``__init__`` names), and
``files`` (``home_dir``, ``write_private``: the registry keeps its trusted keys with them).
May import boundary (the sanitizer) and the shared runtime modules; never records, tools,
admission or the engine.
"""
