"""The console's rendering boundary: every value a page shows passes through :func:`finalize`,
jinja's hook on each ``{{ ... }}`` output, before autoescaping.

A template cannot forget it: the hook runs on every expression of every page. It shows each
control, escape, bidirectional or invisible character of run data (see
:mod:`proctor.core.inert_text`) as its escape (``\\u202e``) inside a visible mark
(``<span class="inert">``), and escapes the rest as HTML. Two filters name the places that
take something else:

- ``plain``: the escapes without the mark, for a context that holds text only (an attribute,
  the page title);
- ``form_value``: the value exactly as it is, HTML-escaped, for a form field the browser posts
  back (an address, an option) and never shows; a value that must round-trip to be decided.

A value that is already markup (``tojson``, the ``q`` filter) keeps its markup; a hostile
character in it is still shown as its escape, without the mark.
"""

from __future__ import annotations

from markupsafe import Markup, escape

from proctor.core.inert_text import escape_of, pieces, visible

__all__ = ["FILTERS", "finalize", "form_value", "plain"]


class _FormValue(Markup):
    """A value for a form field, left as it is by :func:`finalize`."""

    __slots__ = ()


def _mark(char: str) -> str:
    return (
        f'<span class="inert" title="U+{ord(char):04X} shown as its escape">'
        f"{escape(escape_of(char))}</span>"
    )


def finalize(value: object) -> object:
    """What a page shows of ``value``: markup in which no run data acts on the browser's
    rendering (see the module docstring). ``None`` and numbers pass as they are."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, _FormValue):
        return value
    if isinstance(value, Markup):
        return Markup(visible(str(value))[0])
    text = str(value)
    if text.isprintable():
        return escape(text)
    return Markup(
        "".join(_mark(piece) if hostile else str(escape(piece)) for piece, hostile in pieces(text))
    )


def plain(value: object) -> Markup:
    """``value`` with hostile characters as escapes and no mark: for attributes and titles."""
    return escape(visible(str(value))[0])


def form_value(value: object) -> Markup:
    """``value`` as it is, HTML-escaped, for a form field posted back and never shown."""
    return _FormValue(escape(str(value)))


FILTERS = {"plain": plain, "form_value": form_value}
"""The filters a console environment registers."""
