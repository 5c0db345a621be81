"""The `server` resource: a policy server for the round's checkpoint, started
for the duration of a step (touchstone.agent.serving).

    resources:
      server: {config: {kind: vllm, gpus: "0", args: ["--max-model-len", "32768"]}}
      # or the user's own server, which must list the checkpoint hash in /v1/models:
      server: {config: {kind: external, url: {env: POLICY_SERVER_URL}}}
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.serving import ServerSpec, ServingError, serve_checkpoint
from touchstone.config import field_of


class PolicyServerResource(dg.ConfigurableResource):
    """Serve the checkpoint a step rolls out (raw_trajectories, round_evaluation) over the OpenAI API."""

    kind: Literal["none", "transformers", "vllm", "sglang", "external"] = Field(
        default="none",
        description="none: load the checkpoint in-process (hf:PATH). transformers | vllm | sglang: start that "
        "server on the checkpoint, named by its content hash, for the step. external: a server you run, "
        "which must serve the checkpoint under its content hash.",
    )
    # the rest: the library's ServerSpec's fields and defaults
    url: str = field_of(ServerSpec, "url", description="external: the server's OpenAI base URL (…/v1); use an EnvVar.")
    host: str = field_of(ServerSpec, "host", description="Address the started server listens on.")
    port: int = field_of(
        ServerSpec, "port", description="Port of the started server (0: a free one). A busy port is refused."
    )
    command: list[str] = field_of(
        ServerSpec,
        "command",
        description="Replaces the default executable (e.g. ['python', '-m', 'vllm.entrypoints.openai.api_server']).",
    )
    args: list[str] = field_of(
        ServerSpec,
        "args",
        description="Extra server arguments (transformers: ['--device', 'cpu']; vllm: "
        "['--tensor-parallel-size', '2', '--max-model-len', '32768']).",
    )
    gpus: str = field_of(ServerSpec, "gpus", description="CUDA_VISIBLE_DEVICES of the server (empty: inherited).")
    tool_call_parser: str = field_of(
        ServerSpec, "tool_call_parser", description="Empty: hermes (vLLM) / qwen25 (SGLang), for Qwen2.5 templates."
    )
    startup_timeout_s: float = field_of(
        ServerSpec, "startup_timeout_s", description="Seconds to wait for /health (model load)."
    )

    @contextlib.contextmanager
    def serving(
        self, checkpoint: str | Path, checkpoint_hash: str, log_dir: Path | None = None, log=None
    ) -> Iterator[PolicySpec | None]:
        """`openai:URL#HASH` while the checkpoint is served; None when kind is none."""
        if self.kind == "none":
            yield None
            return
        spec = ServerSpec(
            kind=self.kind,
            checkpoint_hash=checkpoint_hash,
            checkpoint=Path(checkpoint),
            host=self.host,
            port=self.port,
            url=self.url,
            command=list(self.command),
            args=list(self.args),
            gpus=self.gpus,
            tool_call_parser=self.tool_call_parser,
            startup_timeout_s=self.startup_timeout_s,
            log_dir=log_dir,
        )
        try:
            with serve_checkpoint(spec) as served:
                if log:
                    log.info(f"policy server ({self.kind}) up: {served}")
                yield served
        except ServingError as exc:
            raise dg.Failure(f"policy server: {exc}") from exc
        if log:
            log.info(f"policy server ({self.kind}) stopped")
