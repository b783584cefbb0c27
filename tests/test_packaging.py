"""`pip install .` gives the package with its data files and a `commentsvc` command that
offers what `flask --app app` does."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "commentsvc"
COMMANDS = ("create-token", "erase-user", "export", "import", "init-db", "revoke-token",
            "routes", "run", "seed", "staff")


def run(*command: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True,
                          timeout=300, check=False, **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the sources (the build leaves the checkout alone)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "commentsvc",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", source, "--no-deps",
                "--no-build-isolation", "--no-index", "-q", "-w", out)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("commentsvc-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The wheel installed under a prefix of its own: its bin directory and environment.

    The dependencies come from the test's own environment.
    """
    prefix = tmp_path_factory.mktemp("prefix")
    # --ignore-installed: the environment's own (editable) install stays as it is.
    done = run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
               "--ignore-installed", "--prefix", prefix, wheel)
    assert done.returncode == 0, done.stderr
    (site_packages,) = prefix.glob("lib/python*/site-packages")
    env = {**os.environ, "PYTHONPATH": str(site_packages)}
    return prefix / "bin", env


def test_the_wheel_holds_the_package_its_data_and_the_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*")
               if path.is_file() and "__pycache__" not in path.parts
               and path.suffix != ".pyc"}
    assert sources - names == set()  # modules, schema.sql, seeds, templates, static
    assert {"commentsvc/schema.sql", "commentsvc/seeds/vocabulary.json",
            "commentsvc/web/openapi.py", "commentsvc/standalone/factory.py"} <= names
    dist_info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(wheel).read(dist_info).decode()
    assert "commentsvc = commentsvc.standalone:cli" in entry_points


def test_the_wheel_requires_the_direct_runtime_dependencies(wheel):
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/METADATA"))).decode()
    required = {re.split(r"[<>=!;\s\[]", line.split(": ", 1)[1])[0].lower()
                for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    runtime = (ROOT / "requirements.txt").read_text().split("# Runtime\n", 1)[1]
    runtime = runtime.split("#", 1)[0]
    pinned = {line.split("==")[0].lower() for line in runtime.splitlines() if line}
    assert required == pinned
    assert "Requires-Python: >=3.11" in metadata


def pins(name: str) -> dict[str, str]:
    """A requirements file's own pins (not those of the files it includes): name -> version."""
    lines = (ROOT / name).read_text().splitlines()
    return {canonicalize_name(line.split("==")[0]): line.split("==")[1]
            for line in lines if line and not line.startswith(("#", "-"))}


def test_requirements_dev_adds_to_the_runtime_pins_and_pins_the_test_extra():
    """requirements-dev.txt installs requirements.txt and pins, within pyproject.toml's
    ranges, every package of the test extra; the runtime file pins none of them."""
    lines = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert next(line for line in lines if not line.startswith("#")) == "-r requirements.txt"
    runtime, dev = pins("requirements.txt"), pins("requirements-dev.txt")
    assert runtime.keys() & dev.keys() == set()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())
    test_extra = [Requirement(spec) for spec in extra["project"]["optional-dependencies"]["test"]]
    assert {"pytest", "ruff", "mypy", "coverage", "selenium", "hypothesis", "schemathesis"} <= {
        canonicalize_name(requirement.name) for requirement in test_extra}
    for requirement in test_extra:
        name = canonicalize_name(requirement.name)
        assert name in dev, f"{name} is in the test extra but not pinned in requirements-dev.txt"
        assert requirement.specifier.contains(dev[name]), (name, dev[name])


def test_the_console_script_runs_the_services_commands(installed, tmp_path):
    bin_dir, env = installed
    command = bin_dir / "commentsvc"
    assert command.exists()
    shown = run(command, "--help", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    listed = re.findall(r"^  ([a-z-]+)\s", shown.stdout.split("Commands:", 1)[1], re.M)
    assert set(COMMANDS) <= set(listed)

    database = tmp_path / "cli.sqlite3"
    env = {**env, "DATABASE_URL": f"sqlite:///{database}"}
    created = run(command, "init-db", env=env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Database schema ready."
    with sqlite3.connect(database) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master "
                                                 "WHERE type = 'table'")}
    assert {"commentsvc_comment", "commentsvc_user", "commentsvc_comicpage"} <= tables
    assert all(name.startswith(("commentsvc_", "sqlite_")) for name in tables)

    seeded = run(command, "seed", "--comments", "20", "--targets", "3", env=env, cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    routes = run(command, "routes", env=env, cwd=tmp_path)
    assert "/api/schema/" in routes.stdout and "/api/comments/" in routes.stdout


def test_the_installed_package_is_the_one_imported(installed, tmp_path):
    bin_dir, env = installed
    where = run(sys.executable, "-c", "import commentsvc; print(commentsvc.__file__)",
                env=env, cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent)


def test_installed_without_database_url_it_names_its_sqlite_file(installed, tmp_path):
    """The default database of an installed command is a file in the environment's
    instance folder (Flask's rule for installed packages), and the command says so."""
    bin_dir, env = installed
    env = {k: v for k, v in env.items() if k != "DATABASE_URL"}
    created = run(bin_dir / "commentsvc", "init-db", env=env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    expected = bin_dir.parent / "var" / "commentsvc.standalone-instance" / "commentsvc.sqlite3"
    assert created.stderr == (f"Database: SQLite file {expected} (the default; set "
                              "DATABASE_URL to use another)\n")
    assert expected.is_file()
    named = run(bin_dir / "commentsvc", "init-db", cwd=tmp_path,
                env={**env, "DATABASE_URL": f"sqlite:///{tmp_path / 'chosen.sqlite3'}"})
    assert named.returncode == 0 and named.stderr == ""


def test_installed_version_is_commentsvcs(installed, tmp_path):
    bin_dir, env = installed
    shown = run(bin_dir / "commentsvc", "--version", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert re.fullmatch(r"commentsvc \d+\.\d+\.\d+ \(Flask [\d.]+, Python [\d.]+\)\n",
                        shown.stdout)
