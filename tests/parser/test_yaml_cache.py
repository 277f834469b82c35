"""The CLI's parse cache: a document read back from it is exactly what the parser gives, and
the cache never changes what is refused, never trusts a damaged entry, never creates a home."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import ParseError
from proctor.parser import yaml_strict
from proctor.parser.yaml_strict import load_yaml_with_positions, use_parse_cache

DOC = (
    "name: x\nsteps:\n  - id: a\n    n: 0x1f\n    f: 1.5\n    s: 'yes'\n    none:\n"
    "  - [1, {b: c}]\n"
)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    folder = home / "cache" / "yaml"
    use_parse_cache(folder)
    yield folder
    use_parse_cache(None)


def test_a_cached_document_reads_back_exactly(cache: Path) -> None:
    first = load_yaml_with_positions(DOC, source="run.yaml")
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o777 == 0o600
    again = load_yaml_with_positions(DOC, source="other.yaml")
    assert again == first
    assert [type(v) for v in again[0]["steps"][0].values()] == [str, int, float, str, type(None)]
    assert all(isinstance(path, tuple) for path in again[1])


def test_a_refusal_is_raised_every_time_and_never_kept(cache: Path) -> None:
    for _ in range(2):
        with pytest.raises(ParseError) as caught:
            load_yaml_with_positions("a: 1\na: 2\n", source="run.yaml")
        assert caught.value.code == "yaml_duplicate_key"
    assert not cache.exists() or not list(cache.iterdir())


@pytest.mark.parametrize(
    "damage", [b"", b"{", b"[1, 2]", b'[1, {"a": 1}, [[["a"], "x", 1]]]', b"\xff\xfe"]
)
def test_a_damaged_entry_is_parsed_again(cache: Path, damage: bytes) -> None:
    expected = load_yaml_with_positions(DOC, source="run.yaml")
    (entry,) = cache.iterdir()
    entry.write_bytes(damage)
    assert load_yaml_with_positions(DOC, source="run.yaml") == expected


def test_an_entry_is_bound_to_the_text(cache: Path) -> None:
    load_yaml_with_positions(DOC, source="run.yaml")
    (entry,) = cache.iterdir()
    kept = json.loads(entry.read_bytes())
    kept[1]["name"] = "forged"
    entry.write_text(json.dumps(kept))
    # the same text reads the entry (the home is trusted) ...
    assert load_yaml_with_positions(DOC, source="run.yaml")[0]["name"] == "forged"
    # ... and any other text, however close, is parsed on its own
    assert load_yaml_with_positions(DOC + "\n", source="run.yaml")[0]["name"] == "x"


def test_no_home_no_cache(tmp_path: Path) -> None:
    use_parse_cache(tmp_path / "absent-home" / "cache" / "yaml")
    try:
        assert load_yaml_with_positions(DOC, source="run.yaml")[0]["name"] == "x"
    finally:
        use_parse_cache(None)
    assert not (tmp_path / "absent-home").exists()


def test_past_the_limit_the_older_half_goes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_strict, "_CACHE_LIMIT", 8)
    for n in range(9):
        load_yaml_with_positions(f"n: {n}\n", source="x.yaml")
    assert len(list(cache.iterdir())) == 9 - 9 // 2


def test_the_cli_run_reads_its_skill_without_pyyaml(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    home = tmp_path / "home"
    probe = (
        "import sys\n"
        "from proctor.cli.main import main\n"
        "try:\n"
        f"    main(['run', {str(root / 'examples' / 'hello-world')!r}, '-i', 'message=hi'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {"PROCTOR_HOME": str(home), "PATH": "/usr/bin:/bin"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        for _ in range(3)
    ]
    assert [r.returncode for r in runs] == [0, 0, 0], runs[-1].stderr
    # the first run makes the home after its skill was parsed; the second keeps the parse
    assert [r.stdout.splitlines()[-1] for r in runs] == ["True", "True", "False"]


def test_a_loader_that_cannot_name_its_entries_parses_and_keeps_nothing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(text: str) -> str:
        raise PermissionError("the loader's files cannot be read")

    monkeypatch.setattr(yaml_strict, "_entry_name", unreadable)
    assert load_yaml_with_positions(DOC, source="run.yaml")[0]["name"] == "x"
    assert not cache.exists()
