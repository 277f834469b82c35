"""The JSON text of runs' data, kept member by member so that an update encodes only its own.

A run's ``data`` is stored as :func:`.rows.dumps` writes it: one object, keys sorted, compact.
An update (:meth:`RunStore.update_run`) adds or replaces top-level members: the text written
is ``dumps({**stored, **update})``. Decoding the stored text and encoding every member again
costs more than the rest of the update (a seal's update is a run's largest JSON text).

:class:`DataTexts` keeps, for the runs this store wrote, the text it wrote and each top-level
member's value text (strings only: nothing a caller holds or may change later; a few runs, each
text of a bounded length). When the stored text is, byte for byte, the one kept, its members are
those kept (the text was joined from them), so the merged text is joined from them and the
update's members, encoded alone: the same bytes ``dumps`` of the decoded and updated document
gives, since ``dumps`` of a value decoded from ``dumps``'s text is that text again. A stored
text that differs in any way (another process's update, a rolled-back one) is decoded and
merged as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from proctor.runtime.records.rows import dumps

__all__ = ["DataTexts"]

_KEY: Callable[[str], str] = json.encoder.encode_basestring  # C-accelerated when present
_KEPT_MAX = 64  # runs kept for (more: the oldest is forgotten, its next update decodes)
_KEPT_LONGEST = 65536  # a longer text is not kept (its next update decodes): memory stays small


def _members(data: Mapping[str, Any]) -> dict[str, str] | None:
    """Each member's value text (``dumps`` of the value; the common leaves written directly,
    the same text), or ``None`` when a key is not a ``str`` (then ``dumps`` decides)."""
    members = {}
    for key, value in data.items():
        if type(key) is not str:
            return None
        kind = type(value)
        if kind is str:
            members[key] = _KEY(value)
        elif value is None:
            members[key] = "null"
        elif kind is bool:
            members[key] = "true" if value else "false"
        elif kind is int:
            members[key] = str(value)
        elif not value and (kind is dict or kind is list):
            members[key] = "{}" if kind is dict else "[]"
        else:
            members[key] = dumps(value)
    return members


def _joined(members: Mapping[str, str]) -> str:
    """``dumps`` of the object whose members' value texts are ``members``."""
    heads = _HEADS
    try:  # every key's head known (the usual case): one comprehension, no call per member
        return "{" + ",".join([heads[key] + members[key] for key in sorted(members)]) + "}"
    except KeyError:
        pass
    found: dict[str, str] = {}
    for key in members:
        head = heads.get(key)
        if head is None:
            if len(heads) >= _HEADS_MAX:
                heads.clear()
            head = heads[key] = _KEY(key) + ":"
        found[key] = head
    return "{" + ",".join([found[key] + members[key] for key in sorted(members)]) + "}"


# a member's key text and colon, by key (runs' data have the same few keys)
_HEADS: dict[str, str] = {}
_HEADS_MAX = 1024


class DataTexts:
    """The data texts a store wrote, by run id, with their members (see the module)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, dict[str, str]]] = {}
        # the audit anchor text the store last wrote, with the document that text decodes to
        self._anchor: tuple[str, dict[str, Any]] | None = None

    def _keep(self, run_id: str, text: str, members: dict[str, str] | None) -> str:
        self._kept.pop(run_id, None)
        if members is not None and len(text) <= _KEPT_LONGEST:
            if len(self._kept) >= _KEPT_MAX:
                del self._kept[next(iter(self._kept))]
            self._kept[run_id] = (text, members)
        return text

    def made(self, run_id: str, data: Mapping[str, Any]) -> str:
        """``dumps(data)``, the text of a new run's data (kept with its members)."""
        members = _members(data) if type(data) is dict else None
        if members is None:
            return self._keep(run_id, dumps(data), None)
        return self._keep(run_id, _joined(members), members)

    def merged(self, run_id: str, stored: str, update: Mapping[str, Any] | None) -> str:
        """``dumps({**json.loads(stored), **update})``: the run's data text after an update."""
        kept = self._kept.get(run_id)
        if kept is not None and kept[0] == stored:
            if not update:
                return stored
            added = _members(update)
            if added is not None:
                members = {**kept[1], **added}
                return self._keep(run_id, _joined(members), members)
        merged = json.loads(stored)
        if update:
            merged.update(update)
        found = _members(merged) if type(merged) is dict else None
        if found is None:
            return self._keep(run_id, dumps(merged), None)
        return self._keep(run_id, _joined(found), found)

    def anchor_text(self, anchor: Mapping[str, Any]) -> str:
        """``dumps(anchor)``, the text of an audit anchor the store writes, kept with the
        document it decodes to when every member is a ``str``, ``int``, ``bool`` or ``None``
        (``json.loads`` of the text gives those values back, keys in the text's sorted order)."""
        text = dumps(anchor)
        plain = all(v is None or type(v) in _SCALARS for v in anchor.values())
        self._anchor = (text, {k: anchor[k] for k in sorted(anchor)}) if plain else None
        return text

    def anchor(self, stored: str) -> dict[str, Any]:
        """``dict(json.loads(stored))``: a copy of the kept document when ``stored`` is, byte for
        byte, the text kept (a text another writer stored differs, and is decoded)."""
        kept = self._anchor
        if kept is not None and kept[0] == stored:
            return dict(kept[1])
        return dict(json.loads(stored))


_SCALARS = (str, int, bool)
