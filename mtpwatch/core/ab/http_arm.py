"""Arms over HTTP: `HttpArm` talks to a running vLLM (or the simulator); `LaunchedArm` also starts it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from mtpwatch.core.ab.arms import ArmRequest, ArmResult
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.core.launch.launcher import Launch
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.provenance import probe_arm


class HttpArm:
    """An arm that talks to a running vLLM (or the simulator) through `VllmClient`."""

    def __init__(
        self,
        url: str,
        *,
        label: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        chat: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`url`: anything `normalize_url` accepts (else `ValueError`, one line); `label`: the name
        in reports (default: the URL); `model`: the served model, asked for and whose counters are
        read; `api_key`: Bearer token (else VLLM_API_KEY); `chat`: /v1/chat/completions, not
        /v1/completions; `transport`: an httpx transport for tests."""
        # a stream may stay silent for 10 minutes (a long prefill) before it fails
        self.client = VllmClient(url, api_key=api_key, transport=transport, stream_timeout=600.0)
        self.url = self.client.base_url
        self.label = label or self.url
        self.model = model
        self.chat = chat

    def name_model(self, model: str | None) -> None:
        """Ask for `model` from now on where no model was given (the served model, once known)."""
        self.model = self.model or model

    async def generate(self, request: ArmRequest) -> ArmResult:
        """Stream one request (asking for token ids) and return the client-side numbers."""
        extra: dict[str, Any] = {} if request.min_tokens is None else {"min_tokens": request.min_tokens}
        result = await self.client.generate(
            GenerationRequest(
                prompt=request.prompt,
                model=self.model,
                chat=self.chat,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                return_token_ids=True,
                ignore_eos=request.ignore_eos,
                extra=extra,
            )
        )
        return ArmResult(
            tokens=result.completion_tokens,
            ttft_s=result.ttft_s,
            decode_tok_s=result.decode_tok_s,
            # reasoning parsers move text out of `content`; compare everything the model wrote
            text=result.reasoning + result.text,
            token_ids=result.token_ids,
            error=result.error,
            e2el_s=result.t_last - result.t_start
            if result.t_last is not None and result.t_start is not None
            else None,
            itl_s=result.itl_s,
        )

    async def counters(self) -> MetricsSnapshot | None:
        """The model's /metrics snapshot; None when speculation is off (no spec-decode counters)."""
        snap = await self.client.scrape(self.model)
        return snap if snap.speculative else None

    async def check(self) -> None:
        """Raise `ServerError` (one line) when the server cannot be reached or refuses the key."""
        await self.client.models()

    async def aclose(self) -> None:
        await self.client.aclose()


class LaunchedArm(HttpArm):
    """An `HttpArm` whose server the bench starts and stops itself (the restart schedule)."""

    def __init__(
        self,
        url: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 900.0,
        **kwargs: Any,
    ) -> None:
        """`argv`: the whole server command line (`vllm serve MODEL --port 8001 ...`), listening at `url`,
        run with `env` added; `startup_timeout_s`: how long /health may stay silent before the start fails."""
        super().__init__(url, **kwargs)
        self.argv = tuple(argv)
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self._launch: Launch | None = None
        self.log_facts: Any = None
        """What the start-up log of the last start said (`LogFacts`), for the report's provenance."""
        self.probed: Any = None
        """What the server said about itself while it was up (a `core.provenance.ArmInfo`)."""

    async def start(self) -> None:
        """Start the server process and wait for /health; raises `StartupError` (one line + log tail)."""
        self._launch = launch = Launch(self.argv, env=self.env)
        await launch.start()
        headers = {"Authorization": f"Bearer {self.client.api_key}"} if self.client.api_key else None
        try:
            await launch.wait_ready(self.url, self.startup_timeout_s, headers=headers, poll_s=0.5)
        except BaseException:
            await self.stop()
            raise
        self.log_facts = launch.watcher.facts
        if self.probed is None:
            self.probed = await probe_arm(self.client, self.model)

    async def stop(self) -> None:
        """Stop the server's whole process group (idempotent)."""
        launch, self._launch = self._launch, None
        if launch is not None and launch.started:
            await launch.stop()
