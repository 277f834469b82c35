"""Bad input at ``proctor approve``/``decline`` (flags, answers, digests, addresses) is a clear
error with its code, never a traceback, and leaves the workspace's records exactly as they
were (hypothesis, in-process CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.cli.main import main

SKILL = "---\nname: q\ndescription: Ask which colour.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  pick:
    steps:
      - id: colour
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
"""


def _state(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted((root / ".proctor").rglob("*")) if p.is_file())


def test_fuzz_approve_flags_refuse_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "skills" / "q").mkdir(parents=True)
    (root / "skills" / "q" / "SKILL.md").write_text(SKILL)
    (root / "skills" / "q" / "run.yaml").write_text(RUN_YAML)
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit) as paused:
        main(["run", "q#pick", "--json"])
    assert paused.value.code == 10
    import json

    run_id = json.loads(capsys.readouterr().out)["run_id"]
    before = _state(root)

    @settings(max_examples=60, deadline=None)
    @given(
        command=st.sampled_from(["approve", "decline"]),
        address=st.one_of(
            st.none(), st.sampled_from(["colour", "nowhere", "a/b"]), st.text(max_size=20)
        ),
        digest=st.one_of(st.text(max_size=80), st.just("sha256:" + "0" * 64)),
        answers=st.lists(st.text(max_size=30), max_size=3),
    )  # fmt: skip
    def call(command: str, address: str | None, digest: str, answers: list[str]) -> None:
        argv = [command, run_id, *([address] if address is not None else [])]
        argv += ["--yes", "--digest", digest]
        if command == "approve":
            for answer in answers:
                argv += ["--answer", answer]
        with pytest.raises(SystemExit) as done:
            main(argv)
        out = capsys.readouterr()
        assert done.value.code == 2, (argv, out)
        assert "Traceback" not in out.err and "error" in out.err.lower()
        assert _state(root) == before

    call()
