"""Skill packages from outside the workspace: installed registry packages and core skills.

Owns: :mod:`.package` (the exact files of a package, its content digest and version),
:mod:`.manifest` (publisher statements, the registry's countersigned manifest and its
verification, trust tiers), :mod:`.installed` (registry keys the user trusts, verifying an
installed folder against its signature, resolving ``<publisher>/<name>@<version>``),
:mod:`.core` (the core skills shipped in the wheel, materialised into the home and verified on
each use) and :mod:`.resolve` (:func:`~.resolve.resolve_skill`: the one way the engine, the
test runner and the CLI turn any skill reference into a loaded package).

Surface for the parts above: ``resolve.resolve_skill``, ``resolve.reload_skill``,
``core.core_skill_names``, ``installed.*``, ``manifest.*``, ``package.*``. Imports the home,
the skills reader, receipts, parser and errors; never the engine, admission or tools, and never
the network (``proctor.registry`` above it downloads; this part only reads what is on disk).
"""
