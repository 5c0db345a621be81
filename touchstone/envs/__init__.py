"""Task environments: third-party packages a task's code and tests need,
installed once per content digest in a build sandbox (network on) and mounted
read-only in every sandbox that runs the task (network off).

    built = build_env(EnvSpec(requirements=["attrs==23.2.0"]))
    with open_sandbox(ws, environment=built.sandbox_environment()) as sb: ...

Format and guarantees: docs/ENVIRONMENTS.md."""

from touchstone.envs.build import BuiltEnv, EnvManifest, build_env, cached
from touchstone.envs.spec import EnvError, EnvSpec, digest, find_named_spec, load_spec_file, resolve

__all__ = [
    "BuiltEnv",
    "EnvError",
    "EnvManifest",
    "EnvSpec",
    "build_env",
    "cached",
    "digest",
    "find_named_spec",
    "load_spec_file",
    "resolve",
]
# A task's environment: touchstone.tasks.environment (task_environment, task_spec); not
# re-exported here, since touchstone.tasks.schema imports this package.
