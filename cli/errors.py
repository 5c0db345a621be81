"""How the command line ends on an error: one line naming the problem and the fix,
exit status 1 (2 for a usage error, as click does), and no traceback unless
`touchstone --debug ...` (or TOUCHSTONE_DEBUG=1) asks for it."""

from __future__ import annotations

import os

import click

DEBUG_ENV = "TOUCHSTONE_DEBUG"


def debugging(ctx: click.Context | None = None) -> bool:
    """Whether the user asked for tracebacks and Dagster's full log."""
    ctx = ctx or click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return bool(root and root.params.get("debug")) or os.environ.get(DEBUG_ENV) == "1"


def one_line(exc: BaseException) -> str:
    """The first line of an unexpected error, with its kind."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def storage_errors() -> tuple[type[BaseException], ...]:
    """What reaching a data root can raise: file system errors, and the S3 client's own."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (OSError, BotoCoreError, ClientError)


def storage_problem(root: str, exc: BaseException) -> str:
    """One line for a data root that cannot be reached, with what to do."""
    from touchstone import paths

    fix = "check the path and its permissions"
    if paths.is_url(root):
        fix = (
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for an S3-compatible server) "
            "or the storage resource's config, and check that the bucket exists"
        )
    return f"data root {root} cannot be read or written ({one_line(exc)}); {fix}"


def database_problem(exc: BaseException) -> str | None:
    """One line for the Dagster instance's database going away (a PostgreSQL restart
    longer than Dagster's retries), or None for any other error."""
    from dagster_postgres.utils import DagsterPostgresException
    from sqlalchemy.exc import DBAPIError

    if not isinstance(exc, DagsterPostgresException | DBAPIError):
        return None
    return (
        f"the Dagster instance's database cannot be reached ({one_line(exc)}); once it runs again "
        "(DAGSTER_HOME's dagster.yaml names it), rerun: a round resumes where it stopped"
    )


def unexpected(exc: Exception) -> None:
    """End on an error no command turned into its own message."""
    problem = database_problem(exc)
    if problem:
        click.echo(f"error: {problem}", err=True)
        raise SystemExit(1)
    click.echo(f"error: {one_line(exc)} (unexpected: `touchstone --debug ...` shows where it happened)", err=True)
    raise SystemExit(1)
