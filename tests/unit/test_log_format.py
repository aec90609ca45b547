"""`--log-format json|text` on the long-running commands: one parseable object per line in json.

Why: log pipelines parse rather than grep; a line they cannot parse is a line lost. The format is
chosen by the flag (or FEDSPREAD_LOG_FORMAT) before the command configures logging.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from federation import logs
from federation.cli import options


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    yield
    logs.use_format("text")
    logging.getLogger().handlers[:] = []


def test_json_lines_carry_time_level_logger_message_extras_and_the_exception() -> None:
    formatter = logs.JsonFormatter()
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("fedspread.x", logging.WARNING, __file__, 1, "bad %s", ("report",),
                                   exc_info=__import__("sys").exc_info())
    record.cluster = "dc1"
    record.shape = {"cpu"}  # not JSON: written as its str()
    found = json.loads(formatter.format(record))
    assert (found["level"], found["logger"], found["message"], found["cluster"]) == (
        "WARNING", "fedspread.x", "bad report", "dc1")
    assert found["time"].endswith("+00:00") and "ValueError: boom" in found["exception"]
    assert found["shape"] == "{'cpu'}"


def test_the_flag_and_the_environment_choose_the_format() -> None:
    @click.command()
    @options.log_level_option()
    def command(*, log_level: str) -> None:
        logs.configure(log_level)
        formatter = logging.getLogger().handlers[0].formatter
        click.echo(type(formatter).__name__)

    runner = CliRunner()
    assert runner.invoke(command, []).output.strip() == "KeyValueFormatter"
    assert runner.invoke(command, ["--log-format", "json"]).output.strip() == "JsonFormatter"
    assert runner.invoke(command, [], env={"FEDSPREAD_LOG_FORMAT": "json"}).output.strip() == "JsonFormatter"
    refused = runner.invoke(command, ["--log-format", "xml"])
    assert refused.exit_code == 2 and "xml" in refused.output
