"""A checkpoint's held-out evaluation: sampled attempts graded by the verifier, the
figures of `touchstone.evaluate`. What `base_evaluation`, a round's `round_evaluation` and
its control arm (`control_evaluation`) all measure, the same way."""

import shutil

from orchestration.resources import HeldoutEvalConfig
from touchstone.evaluate.schema import RoundMetrics
from touchstone.paths import Asset


def heldout_metrics(
    context, store, ckpt, ckpt_hash: str, label: str, work, out, config: HeldoutEvalConfig, *, sandbox, policy, verifier,
    server,
) -> RoundMetrics:  # fmt: skip
    """`ckpt` on the held-out tasks, `config.attempts` each (rollouts resumable in `work`,
    published to `out/rollouts`), graded by the verifier; with `config.likelihood`, likelihoods on the
    held-out reference runs (cached per held-out set): they move before pass@1 does."""
    from touchstone.agent.plan import checkpoint_policy
    from touchstone.tasks import load_task_set
    from training.round_engine import evaluate, roll_out

    heldout = load_task_set(store.local_dir(Asset.HELDOUT_TASKS))
    with server.serving(ckpt, ckpt_hash, work, context.log) as served:  # stopped before grading
        spec = checkpoint_policy(policy.spec, ckpt, served)
        rollouts = roll_out(
            heldout,
            spec,
            config.attempts,
            work,
            sandbox.sandboxes(),
            sampling=policy.sampling(),
            limits=policy.limits(spec),
            progress=True,
            log=context.log.info,
        )
    shutil.copytree(rollouts, out / "rollouts")
    return evaluate(
        ckpt,
        heldout,
        out / "rollouts",
        out,
        sandbox.sandboxes(),
        verifier.grading(),
        label=label,
        k=config.attempts,
        resamples=config.bootstrap,
        matched_samples=config.matched_samples,
        sampling=policy.sampling(),
        likelihood=config.likelihood,
    )
