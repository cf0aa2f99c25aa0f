"""A real coding agent as the reader: OpenCode (`opencode run`), isolated per attempt.

Each attempt runs `opencode run --format json --agent benchmark` in a fresh root inside the
attempt's temporary directory: its own HOME, XDG config/data/cache/state dirs (so its own
database), TMPDIR and working directory, every `OPENCODE_*` and `DEMARKUS_*` variable of
the caller removed, no project config, no external skills, compaction, pruning, sharing
and updates off, output capped. Its one config file names the agent `benchmark` (the
policy prompt, `steps` as its step limit), permissions that deny everything except the
tools of the MCP server `fixture`, and that server: the same read-only, scope-confined
`demarkus mcp` command the runner verified for this attempt. The task text goes on stdin.

OpenCode does its own accounting: each completed model step is a `step_finish` event with
`tokens {input, output, reasoning, cache {read, write}, total}`, where `input` excludes
cached tokens and `output` excludes reasoning. The trace keeps this project's convention
(`input` = every prompt token, cached ones included; `cache` repeats how many were read or
written), so `input + output + reasoning` is OpenCode's `total`; a `total` that is not that
sum makes the usage incomplete. Tool calls come from `tool_use` events, named as OpenCode
names them (`fixture_mark_lookup`), with the text the model was given back.

The run spec records the OpenCode version and the sha256 of the canonical reader config:
the config with the run's paths, binaries, endpoint and prompt replaced by placeholders
(the prompt has its own hash), so two runs with different OpenCode setups never compare.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import EvalError, RunRefused
from .policies import Policy, task_text
from .questions import Question
from .reader import AttemptResult, McpServer, Session
from .records import CallRecord, Usage, empty_usage

SERVER_NAME = "fixture"
"""The MCP server's name in OpenCode's config: tool calls appear as `fixture_mark_lookup`, etc."""
AGENT = "benchmark"
PLUGIN_SDK = "@opencode-ai/plugin"
OUTPUT_CAP = 32 * 1024 * 1024
"""Bytes of OpenCode's JSON event stream kept per attempt; more fails the attempt."""
STDERR_CAP = 64 * 1024
"""Bytes of OpenCode's stderr kept per attempt (the tail goes into an error message)."""
FLAGS = {
    "OPENCODE_PURE": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_AUTOCOMPACT": "1",
    "OPENCODE_DISABLE_PRUNE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}
"""What every attempt's OpenCode runs with (the caller's own `OPENCODE_*` are removed first)."""
DIRS = ("home", "config", "data", "cache", "state", "tmp", "work")


def find_opencode(explicit: str | None) -> Path:
    """The OpenCode executable: `explicit`, else the one `scripts/bootstrap` installs beside
    this interpreter's environment (`<venv>/opencode/node_modules/.bin/opencode`), else
    `opencode` on PATH.

    Raises:
        RunRefused: none of them exists.
    """
    if explicit:
        found = Path(explicit)
        if not found.is_file():
            raise RunRefused(f"--opencode-bin {explicit} is not a file; pass the `opencode` executable")
        return found
    beside = Path(sys.prefix) / "opencode" / "node_modules" / ".bin" / "opencode"
    if beside.is_file():
        return beside
    on_path = shutil.which("opencode")
    if on_path:
        return Path(on_path)
    raise RunRefused(
        f"no OpenCode found (looked for {beside} and `opencode` on PATH): run scripts/bootstrap, "
        "which installs the pinned release, or pass --opencode-bin"
    )


def isolated_env(root: Path, *, api_key_env: str, max_output_tokens: int, offline_catalogue: bool) -> dict[str, str]:
    """OpenCode's environment under `root` (whose `DIRS` exist): this process's variables
    without any `OPENCODE_*`, `DEMARKUS_*`, `XDG_*`, HOME, TMPDIR or PWD, then the fresh
    directories and `FLAGS`. The key variable `api_key_env` passes through unchanged."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENCODE", "XDG_", "DEMARKUS_")) and key not in ("HOME", "TMPDIR", "PWD")
    }
    env = {
        **inherited,
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_STATE_HOME": str(root / "state"),
        "TMPDIR": str(root / "tmp"),
        # the MCP server's bytecode cache beside the installed sources is not the attempt's to write
        "PYTHONDONTWRITEBYTECODE": "1",
        **FLAGS,
        "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX": str(max_output_tokens),
    }
    if offline_catalogue:
        env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
    if api_key_env in os.environ:
        env[api_key_env] = os.environ[api_key_env]
    return env


def prepare_root(root: Path, config: Mapping[str, Any], *, offline_catalogue: bool, version: str) -> None:
    """Create the fresh directories and write OpenCode's only config file. Two background
    downloads OpenCode starts on a first run are answered in advance, as a second run finds
    them: the plugin SDK (listed in the config folder's lock) and, when the model's provider
    is fully defined in the config, the model catalogue (an empty one)."""
    for name in DIRS:
        (root / name).mkdir(parents=True, exist_ok=True)
    folder = root / "config" / "opencode"
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"packages": {"": {"dependencies": {PLUGIN_SDK: version}}}}
    (folder / "package-lock.json").write_text(json.dumps(lock), encoding="utf-8")
    (folder / "opencode.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    if offline_catalogue:
        (root / "cache" / "opencode").mkdir(parents=True, exist_ok=True)
        (root / "cache" / "opencode" / "models.json").write_text("{}", encoding="utf-8")


def reader_config(
    *,
    prompt: str,
    steps: int,
    server: McpServer,
    model: str,
    base_url: str | None,
    api_key_env: str,
    max_output_tokens: int,
) -> dict[str, Any]:
    """OpenCode's config for one attempt (pure). With `base_url` the model's provider is an
    OpenAI-compatible one defined here (`@ai-sdk/openai-compatible`, bundled with OpenCode),
    its key read by OpenCode from `$api_key_env`; without it OpenCode resolves `model` from
    its own catalogue and reads the provider's usual key variable."""
    allow = {"*": "deny", f"{SERVER_NAME}_*": "allow"}
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "compaction": {"auto": False, "prune": False},
        "permission": allow,
        "agent": {
            AGENT: {"mode": "primary", "prompt": prompt, "steps": steps, "permission": allow},
        },
        "mcp": {
            SERVER_NAME: {
                "type": "local",
                "command": list(server.command),
                "environment": dict(sorted(server.environment.items())),
                "timeout": 30000,
            }
        },
    }
    if base_url:
        provider, _, name = model.partition("/")
        config["provider"] = {
            provider: {
                "npm": "@ai-sdk/openai-compatible",
                "name": provider,
                "options": {"baseURL": base_url, "apiKey": "{env:" + api_key_env + "}"},
                "models": {name: {"name": name, "limit": {"context": 200000, "output": max_output_tokens}}},
            }
        }
    return config


PLACEHOLDERS_SERVER = McpServer(
    command=("<mcp>", "mcp", "--host", "<authority>", "--ca", "<ca>", "--read-only", "--scope", "<scope>"),
    environment={"DEMARKUS_HOME": "<attempt-home>"},
    workdir=Path("<attempt-dir>"),
)


def config_hash(*, steps: int, model: str, base_url: str | None, max_output_tokens: int, version: str) -> str:
    """sha256 of the canonical reader config: `reader_config` with placeholders for the
    prompt (hashed on its own), the MCP command's binary and paths (a baseline's MCP and
    this tree's give one hash: the implementation hashes tell them apart), the endpoint and
    the key's variable, plus the isolation flags and the OpenCode version, as sorted
    compact JSON."""
    canonical = {
        "config": reader_config(
            prompt="<policy-prompt>",
            steps=steps,
            server=PLACEHOLDERS_SERVER,
            model=model,
            base_url="<base-url>" if base_url else None,
            api_key_env="<key-variable>",
            max_output_tokens=max_output_tokens,
        ),
        "env": {**FLAGS, "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX": str(max_output_tokens)},
        "run": ["<opencode>", "run", "--format", "json", "--agent", AGENT, "-m", model, "--title", "<task>"],
        "opencode_version": version,
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return "sha256-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def opencode_version(binary: Path, timeout: float = 60.0) -> str:
    """`opencode --version`, run isolated in a temporary root removed afterwards.

    Raises:
        RunRefused: it fails or hangs.
    """
    with tempfile.TemporaryDirectory(prefix="demarkus-opencode-version-") as name:
        root = Path(name)
        for sub in DIRS:
            (root / sub).mkdir()
        env = isolated_env(root, api_key_env="", max_output_tokens=4096, offline_catalogue=True)
        try:
            done = subprocess.run(
                [str(binary), "--version"],
                cwd=root / "work",
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RunRefused(f"{binary} --version did not answer within {timeout} s") from None
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise RunRefused(f"{binary} --version failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return version


@dataclass(frozen=True, slots=True)
class Events:
    """What one `opencode run --format json` event stream says happened."""

    session: str
    usage: Usage
    turn_usage: tuple[Usage, ...]
    usage_complete: bool
    turns: int
    calls: tuple[CallRecord, ...]
    final: str | None
    errors: tuple[str, ...]


def parse_events(lines: Iterable[str]) -> Events:
    """Read OpenCode's JSON events (pure). Parts are deduplicated by id (the last state
    wins); turns are completed model steps; the final answer is the text of the last
    message that had text."""
    steps: dict[str, dict[str, Any]] = {}
    tools: dict[str, dict[str, Any]] = {}
    texts: dict[str, list[tuple[str, str]]] = {}
    order: list[str] = []
    errors: list[str] = []
    session = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            errors.append(f"OpenCode printed a line that is not JSON: {line[:200]}")
            continue
        if not isinstance(event, dict):
            continue
        session = session or str(event.get("sessionID") or "")
        found = event.get("part")
        part: dict[str, Any] = found if isinstance(found, dict) else {}
        kind = event.get("type")
        pid = str(part.get("id") or len(steps) + len(tools))
        if kind == "step_finish":
            steps[pid] = part
        elif kind == "tool_use":
            tools[pid] = part
        elif kind == "text":
            message = str(part.get("messageID") or "")
            if message not in texts:
                texts[message] = []
                order.append(message)
            texts[message] = [t for t in texts[message] if t[0] != pid] + [(pid, str(part.get("text") or ""))]
        elif kind == "error":
            detail = event.get("error")
            errors.append("OpenCode reported an error: " + json.dumps(detail, sort_keys=True)[:500])
    usage = empty_usage()
    turns: list[Usage] = []
    complete = bool(steps)
    for part in steps.values():
        tokens = part.get("tokens")
        if not isinstance(tokens, dict):
            complete = False
            continue
        cache = tokens.get("cache") or {}
        read, write = int(cache.get("read") or 0), int(cache.get("write") or 0)
        fresh, output, reasoning = (int(tokens.get(key) or 0) for key in ("input", "output", "reasoning"))
        turn: Usage = {
            "input": fresh + read + write,
            "output": output,
            "reasoning": reasoning,
            "cache": {"read": read, "write": write},
        }
        turns.append(turn)
        usage["input"] += turn["input"]
        usage["output"] += output
        usage["reasoning"] += reasoning
        usage["cache"]["read"] += read
        usage["cache"]["write"] += write
        total = tokens.get("total")
        if total is not None and int(total) != fresh + read + write + output + reasoning:
            complete = False
            errors.append(f"OpenCode's step total {total} is not the sum of its token counts")
    calls = tuple(_call(part) for part in tools.values())
    final = next(("".join(t for _, t in texts[m]) for m in reversed(order) if any(t for _, t in texts[m])), None)
    return Events(session, usage, tuple(turns), complete and not errors, len(steps), calls, final, tuple(errors))


def _call(part: Mapping[str, Any]) -> CallRecord:
    found = part.get("state")
    state: Mapping[str, Any] = found if isinstance(found, dict) else {}
    arguments = state.get("input")
    record: CallRecord = {
        "name": str(part.get("tool") or ""),
        "input": arguments if isinstance(arguments, dict) else {},
    }
    if state.get("status") == "completed":
        record["output"] = str(state.get("output") or "")
    else:
        record["output"] = str(state.get("error") or f"tool call ended {state.get('status') or 'without a state'}")
        record["error"] = True
    return record


class OpenCodeReader:
    """`demarkus eval run --reader opencode`: one isolated `opencode run` per attempt."""

    kind = "opencode"

    def __init__(
        self,
        binary: Path,
        version: str,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_output_tokens: int = 4096,
        prefix: Sequence[str] = (),
    ) -> None:
        self.binary = binary
        self.version = version
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.max_output_tokens = max_output_tokens
        self.prefix = tuple(prefix)
        """A command put before OpenCode's (e.g. strace, to watch what it does)."""

    @classmethod
    def from_options(
        cls,
        binary: str | None,
        model: str,
        base_url: str | None,
        api_key_env: str,
        *,
        max_output_tokens: int = 4096,
        prefix: Sequence[str] = (),
    ) -> OpenCodeReader:
        """The reader `--reader opencode` asks for.

        Raises:
            RunRefused: no model as provider/name, no OpenCode, no key for a custom endpoint,
                or OpenCode does not run.
        """
        if not model or "/" not in model or model == "oracle":
            raise RunRefused("the opencode reader needs --model provider/name (e.g. openai/gpt-5.1 or local/qwen3)")
        if base_url and not os.environ.get(api_key_env):
            raise RunRefused(f"the opencode reader reads the key for --base-url from ${api_key_env}, which is empty")
        found = find_opencode(binary)
        return cls(
            found,
            opencode_version(found),
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            max_output_tokens=max_output_tokens,
            prefix=prefix,
        )

    def config_hash(self, steps: int) -> str:
        return config_hash(
            steps=steps,
            model=self.model,
            base_url=self.base_url,
            max_output_tokens=self.max_output_tokens,
            version=self.version,
        )

    async def attempt(self, question: Question, session: Session, policy: Policy, steps: int) -> AttemptResult:
        root = session.server.workdir / "opencode"
        offline = self.base_url is not None
        config = reader_config(
            prompt=policy.prompt,
            steps=steps,
            server=session.server,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            max_output_tokens=self.max_output_tokens,
        )
        prepare_root(root, config, offline_catalogue=offline, version=self.version)
        env = isolated_env(
            root, api_key_env=self.api_key_env, max_output_tokens=self.max_output_tokens, offline_catalogue=offline
        )
        args = [*self.prefix, str(self.binary), "run", "--format", "json", "--agent", AGENT, "-m", self.model]
        args += ["--title", question.id]
        stdout, stderr, code = await _run(args, root / "work", env, task_text(question).encode("utf-8"))
        events = parse_events(stdout.decode("utf-8", errors="replace").splitlines())
        session.calls.extend(events.calls)
        errors = list(events.errors)
        if code != 0:
            tail = stderr.decode("utf-8", errors="replace").strip()[-1000:]
            errors.append(f"opencode exited with {code}: {tail or 'no stderr'}")
        result: AttemptResult = {
            "final": events.final,
            "usage": events.usage,
            "usage_complete": events.usage_complete and code == 0,
            "turns": events.turns,
            "errors": errors,
            "session": events.session,
            "turn_usage": list(events.turn_usage),
        }
        return result


async def _run(args: list[str], cwd: Path, env: dict[str, str], stdin: bytes) -> tuple[bytes, bytes, int]:
    """Run `args` in its own process group with `stdin`; keep at most `OUTPUT_CAP` bytes of
    stdout and the last `STDERR_CAP` of stderr. A cancelled attempt (the runner's timeout)
    kills the whole group: OpenCode and the MCP server it started."""
    process = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(stdin)
        await process.stdin.drain()
        process.stdin.close()
        out, err = await asyncio.gather(
            _read(process.stdout, OUTPUT_CAP, keep="head"), _read(process.stderr, STDERR_CAP)
        )
        code = await process.wait()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.shield(process.wait())
    return out, err, code


async def _read(stream: asyncio.StreamReader, cap: int, keep: str = "tail") -> bytes:
    """All of `stream`; beyond `cap` bytes its tail (`keep="tail"`), or an error
    (`keep="head"`: an event stream that long is refused, not cut).

    Raises:
        EvalError: `keep="head"` and the stream passed `cap` bytes.
    """
    data = bytearray()
    while chunk := await stream.read(65536):
        data += chunk
        if len(data) > cap:
            if keep == "head":
                raise EvalError(f"OpenCode printed more than {cap} bytes of events; the attempt was stopped")
            del data[: len(data) - cap]
    return bytes(data)
