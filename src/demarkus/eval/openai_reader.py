"""A paid reader: any OpenAI-compatible chat-completions endpoint with tool calling.

Usage comes from the API's own counts: `input` = prompt_tokens (cached tokens included;
`cache.read` repeats how many of them were cached), `output` = completion_tokens minus
reasoning tokens, `reasoning` = completion_tokens_details.reasoning_tokens. A response
without `usage` makes the attempt's usage incomplete. One API call is one turn; every
tool call the model asks for in a turn is executed and answered in order.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from .errors import RunRefused
from .policies import Policy, task_text
from .questions import Question
from .reader import AttemptResult, Session
from .records import empty_usage


class OpenAIReader:
    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str,
        *,
        max_output_tokens: int = 4096,
        transport: httpx.AsyncBaseTransport | None = None,
        request_timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.max_output_tokens = max_output_tokens
        self.transport = transport
        self.request_timeout = request_timeout

    @classmethod
    def from_options(
        cls, base_url: str | None, model: str, api_key_env: str, *, max_output_tokens: int = 4096
    ) -> OpenAIReader:
        """The reader `demarkus eval run --reader openai` asks for, its key read from `$api_key_env`.

        Raises:
            RunRefused: the base url, the model or the key is missing.
        """
        if not base_url:
            raise RunRefused("the openai reader needs --base-url (e.g. https://api.openai.com/v1)")
        if not model or model == "oracle":
            raise RunRefused("the openai reader needs --model")
        key = os.environ.get(api_key_env, "")
        if not key:
            raise RunRefused(f"the openai reader reads its key from ${api_key_env}, which is empty")
        return cls(base_url, model, key, max_output_tokens=max_output_tokens)

    async def attempt(self, question: Question, session: Session, policy: Policy, steps: int) -> AttemptResult:
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description") or "",
                    "parameters": t.get("inputSchema") or {"type": "object"},
                },
            }
            for t in session.tools
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": policy.prompt},
            {"role": "user", "content": task_text(question)},
        ]
        usage = empty_usage()
        complete, turns = True, 0
        errors: list[str] = []
        final: str | None = None
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(transport=self.transport, timeout=self.request_timeout) as http:
            while turns < steps:
                body: dict[str, Any] = {
                    "model": self.model,
                    "messages": messages,
                    "tools": tools,
                    "max_completion_tokens": self.max_output_tokens,
                }
                if turns == steps - 1:
                    body["tool_choice"] = "none"
                response = await http.post(f"{self.base_url}/chat/completions", json=body, headers=headers)
                turns += 1
                if response.status_code != 200:
                    errors.append(f"HTTP {response.status_code}: {response.text[:300]}")
                    complete = False
                    break
                data = response.json()
                counted = data.get("usage")
                if not counted:
                    complete = False
                else:
                    reasoning = int((counted.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
                    usage["input"] += int(counted.get("prompt_tokens", 0))
                    usage["output"] += int(counted.get("completion_tokens", 0)) - reasoning
                    usage["reasoning"] += reasoning
                    usage["cache"]["read"] += int(
                        (counted.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                    )
                message = data["choices"][0]["message"]
                calls = message.get("tool_calls") or []
                if not calls:
                    final = message.get("content") or ""
                    break
                messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
                for call in calls:
                    name = call["function"]["name"]
                    try:
                        arguments = json.loads(call["function"].get("arguments") or "{}")
                    except json.JSONDecodeError:
                        arguments = None
                    if not isinstance(arguments, dict):
                        text = "arguments must be a JSON object"
                        session.calls.append({"name": name, "input": {}, "output": text, "error": True})
                    else:
                        text = (await session.call(name, arguments)).get("output") or ""
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        # usage total: input already holds cached tokens, so cache.read is informational only
        return {"final": final, "usage": usage, "usage_complete": complete, "turns": turns, "errors": errors}
