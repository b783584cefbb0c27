"""Every command of the service, as the comments blueprint's CLI group offers them (the
site's ``flask`` and the ``commentsvc`` command): each one's start-up problems, a database
it cannot reach above all, shown as one line naming the fix (startup)."""

from __future__ import annotations

import click

from commentsvc.operations import cli, event_commands, startup


def every_command() -> list[click.Command]:
    """The service's commands, each reporting its start-up problems in one line."""
    return [startup.report_problems(command)
            for command in (*cli.COMMANDS, *event_commands.COMMANDS)]
