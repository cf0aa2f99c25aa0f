"""A server killed mid-stream of publishes leaves whole versions and a valid chain."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from demarkus import auth
from demarkus.client import Client
from demarkus.errors import OutcomeUnknownError, TransportError
from demarkus.store import FileStore
from demarkus.store.versionfile import parse_version

from .processes import DEMARKUS, running


def _serve_args(root: Path, tokens: Path) -> list[str]:
    return [*DEMARKUS, "serve", "--root", str(root), "--create", "--port", "0", "--tokens", str(tokens)]


@pytest.fixture
def writer_tokens(tmp_path: Path) -> tuple[Path, str]:
    file = tmp_path / "tokens.toml"
    token = auth.generate_token()
    auth.add_grant(file, "writer", token, ["/**"], ["publish"])
    return file, token


@pytest.mark.parametrize("kill_after", [3, 11, 25])
async def test_sigkill_during_publishes_leaves_no_partial_version(tmp_path: Path, writer_tokens, kill_after: int):
    tokens, token = writer_tokens
    root = tmp_path / "store"
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    payload = "line of text for a large document\n" * 6000
    acknowledged = 0
    with running(_serve_args(root, tokens), env=env) as (proc, url):
        async with Client(url, token=token, dial_host="127.0.0.1", timeout=5, retries=1) as client:
            for version in range(1, kill_after + 1):
                response = await client.publish("/stream.md", f"# v{version}\n{payload}", expected_version=version - 1)
                assert response.status == "created"
                acknowledged = version
            pending = [asyncio.create_task(client.publish(f"/other-{i}.md", payload)) for i in range(4)]
            pending.append(
                asyncio.create_task(client.publish("/stream.md", "# next\n" + payload, expected_version=acknowledged))
            )
            await asyncio.sleep(0)  # let the requests leave before the kill
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            for task in pending:
                try:
                    await task
                except (OutcomeUnknownError, TransportError):
                    pass
    store = FileStore(root)
    current = store.current_version("/stream.md")
    assert current in (acknowledged, acknowledged + 1)
    assert store.verify("/stream.md") is None
    for number in range(1, current + 1):
        version = store.read("/stream.md", number)
        assert version.body.startswith(f"# v{number}\n".encode()) or (
            number == acknowledged + 1 and version.body.startswith(b"# next\n")
        )
        assert parse_version(version.raw).body == version.body
    versions_dir = root / "versions"
    visible = sorted(p.name for p in versions_dir.iterdir() if not p.name.startswith("."))
    for name in visible:
        parse_version((versions_dir / name).read_bytes())


async def test_a_write_without_an_answer_is_reported_as_outcome_unknown(tmp_path: Path, writer_tokens):
    tokens, token = writer_tokens
    env = {"DEMARKUS_HOME": os.environ["DEMARKUS_HOME"]}
    with running(_serve_args(tmp_path / "store", tokens), env=env) as (proc, url):
        async with Client(url, token=token, dial_host="127.0.0.1", timeout=1, connect_timeout=1, retries=3) as client:
            assert (await client.fetch("/health")).status == "ok"
            proc.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(OutcomeUnknownError) as caught:
                    await client.publish("/w.md", "written once")
                assert "may or may not have been applied" in str(caught.value)
                with pytest.raises(TransportError) as read_failure:
                    await client.fetch("/health")
                assert not isinstance(read_failure.value, OutcomeUnknownError)
            finally:
                proc.send_signal(signal.SIGCONT)
