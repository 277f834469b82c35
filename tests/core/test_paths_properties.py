"""Property tests: no spelling of a sensitive or authority path escapes its rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.core.paths import authority_reason, sensitive_reason
from tests.core.test_paths import AUTHORITY, SENSITIVE

SEPARATORS = st.sampled_from(["/", "//", "\\", "/./", "\\.\\", "/.//"])


@st.composite
def respelled(draw: st.DrawFn, path: str) -> str:
    """``path`` with random case, separators, ``./`` prefixes, trailing ``/``, dots and spaces."""
    parts = path.split("/")
    out = []
    for part in parts:
        part = "".join(c.upper() if draw(st.booleans()) else c for c in part)
        if draw(st.integers(0, 5)) == 0:
            part += draw(st.sampled_from([" ", ".", " .", "::$DATA", ":stream"]))
        out.append(part)
    text = out[0]
    for part in out[1:]:
        text += draw(SEPARATORS) + part
    prefix = draw(st.sampled_from(["", "./", ".//", ".\\", "x/../", "a/b/../../"]))
    suffix = draw(st.sampled_from(["", "/", "//", "\\", "/."]))
    return prefix + text + suffix


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_sensitive_paths_survive_respelling(data: st.DataObject) -> None:
    path, _rule = data.draw(st.sampled_from(SENSITIVE))
    variant = data.draw(respelled(path))
    assert sensitive_reason(variant) is not None, variant


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_sensitive_paths_nested_anywhere(data: st.DataObject) -> None:
    path, _rule = data.draw(st.sampled_from(SENSITIVE))
    prefix = data.draw(st.sampled_from(["", "sub/", "a/b/c/", "deep/er/"]))
    variant = data.draw(respelled(prefix + path))
    assert sensitive_reason(variant) is not None, variant


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_authority_paths_survive_respelling(data: st.DataObject) -> None:
    path, _rule = data.draw(st.sampled_from(AUTHORITY))
    variant = data.draw(respelled(path))
    assert authority_reason(variant, frozenset()) is not None, variant


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_declared_authority_files_survive_respelling(data: st.DataObject) -> None:
    declared = "tools/guards/mine.py"
    variant = data.draw(respelled(declared))
    assert authority_reason(variant, frozenset({declared})) is not None, variant


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.binary(max_size=64))
def test_never_raises(text: str, head: bytes) -> None:
    sensitive_reason(text, head)
    authority_reason(text, frozenset({text}))


_KEY_PIECES = st.sampled_from(
    [b"-", b"---", b"-----", b" ", b"\n", b"\x00", b"BEGIN", b"begin", b"RSA", b"OPENSSH",
     b"PRIVATE", b"private", b"KEY", b"Key", b"BLOCK", b"PuTTY", b"putty", b"-User-Key-File-",
     b"-USER-key-FILE-", b"2", b"x", b"\xc3\xa9"]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(_KEY_PIECES | st.binary(max_size=6), max_size=24).map(b"".join))
def test_private_key_cue_hides_no_key(head: bytes) -> None:
    # the cheap cues in content_reason only skip bytes the full pattern cannot match
    from proctor.core.paths import _PRIVATE_KEY_CONTENT, content_reason

    data = head.replace(b"\x00", b"")
    expected = "private_key_content" if _PRIVATE_KEY_CONTENT.search(data) else None
    assert content_reason(head) == expected
