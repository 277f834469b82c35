"""Two processes using a fresh home at once: the one that finds the key gone, then receipts
signed by a key it does not know, reads the key again before refusing ``signing_key_missing``
(the other process made that key meanwhile). Issue 31, item 4."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import ConfigError
from proctor.runtime.home.keys import load_signer

MAKE_KEY = (
    "import os; from proctor.runtime.home.keys import load_signer;"
    " print(load_signer(dict(os.environ)).signer.key_id)"
)


def test_a_key_another_process_made_meanwhile_is_read_not_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {"PROCTOR_HOME": str(home)}
    made: list[str] = []

    def held() -> list[str]:
        # the other process: between this one's look at the key and its decision, it makes
        # the key and signs a receipt with it (so that key's id is now held here)
        out = subprocess.run(
            [sys.executable, "-c", MAKE_KEY], env={**os.environ, **env},
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        made.append(out.stdout.strip())
        return made

    key = load_signer(env, held_key_ids=held)
    assert made and key.signer.key_id == made[0]
    assert key.created is False


def test_a_key_that_is_really_gone_is_still_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {"PROCTOR_HOME": str(home)}
    with pytest.raises(ConfigError) as info:
        load_signer(env, held_key_ids=lambda: ["sha256:" + "ab" * 32])
    assert info.value.code == "signing_key_missing"
    assert not (home / "signing_key.pem").exists()
