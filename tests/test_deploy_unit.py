"""deploy/commentsvc.service: a unit systemd accepts, that runs the launcher, takes every
process of the service with it when it stops, and restarts it after a failure; and
deploy/commentsvc-deliver.service, the webhook deliverer beside it."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent.parent / "deploy" / "commentsvc.service"
DELIVER_UNIT = UNIT.with_name("commentsvc-deliver.service")


def service_section(unit: Path = UNIT) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string(unit.read_text(encoding="utf-8"))
    return parser["Service"]


def test_the_unit_stops_every_process_and_restarts_on_failure():
    service = service_section()
    assert service["KillMode"] == "mixed"  # SIGTERM to the launcher, SIGKILL to the rest
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"
    program, *arguments = service["ExecStart"].split()
    assert program.endswith("/python") and arguments[:2] == ["-m", "commentsvc.operations.serving"]
    assert arguments[arguments.index("--runtime-dir") + 1] == (
        "/run/" + service["RuntimeDirectory"])
    # longer than a graceful stop (gunicorn's graceful_timeout, 30 s)
    assert int(service["TimeoutStopSec"]) > 30
    # room for nginx's connections: each client's and the one to gunicorn it may hold
    from commentsvc.operations.front import FrontConfig

    assert int(service["LimitNOFILE"]) >= 2 * FrontConfig.worker_connections + 64


def test_the_deliverer_unit_runs_deliver_beside_the_service_and_always_restarts():
    service, served = service_section(DELIVER_UNIT), service_section()
    program, *arguments = service["ExecStart"].split()
    assert program == served["ExecStart"].split()[0]  # the same virtual environment
    assert arguments == ["-m", "flask", "--app", "app", "deliver"]
    for key in ("User", "WorkingDirectory", "EnvironmentFile"):
        assert service[key] == served[key], key
    assert service["Restart"] == "always" and service["KillSignal"] == "SIGTERM"
    assert service["RestartPreventExitStatus"] == "2"  # bad settings: no restart loop


@pytest.mark.parametrize("unit", [UNIT, DELIVER_UNIT], ids=lambda unit: unit.name)
def test_systemd_accepts_the_unit(tmp_path, unit):
    """systemd-analyze verify, where it is installed, with no warning at all; the program
    is this interpreter, as the deployment's own does not exist here."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (the keys are checked above)")
    program = service_section(unit)["ExecStart"].split()[0]
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text(encoding="utf-8").replace(program, sys.executable),
                    encoding="utf-8")
    verified = subprocess.run(["systemd-analyze", "verify", str(copy)],
                              capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr == ""
