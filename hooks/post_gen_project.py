"""Finish the generated repository: one ingestion module per table, the engine (pinned or
vendored), the saved answers, and the next steps printed for whoever ran cookiecutter.

The table modules are written by the engine's own scaffolding code (the same code behind its
``add-table`` command), so a module made today and one made later look alike. The engine is this
template's ``engine/`` distribution: ``engine=package`` pins it in ``requirements.txt`` at the
template's commit, from where the template came (its git URL, or its local folder);
``engine=vendored`` copies its source into the repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# The answers (JSON in a raw string: no answer can break this file), saved so the project can be
# regenerated or updated from the template later.
ANSWERS: dict[str, str] = json.loads(r"""{{ cookiecutter | jsonify }}""")
# Where this run happened to read and write: not answers, and different on every render.
MACHINE_PATHS = {"_output_dir", "_repo_dir"}
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
# Tables of the embedded demo source (demo/schema.sql).
DEMO_TABLES = {"customers", "products", "orders", "order_items"}
# cookiecutter's abbreviations of git hosts (gh:org/repo).
HOSTS = {"gh": "https://github.com/{}.git", "gl": "https://gitlab.com/{}.git", "bb": "https://bitbucket.org/{}"}


def main() -> int:
    project = Path.cwd()
    engine = template_dir() / "engine"
    if not (engine / "src" / "lakehouse_engine").is_dir():
        print(f"ERROR: the template's engine is not at {engine}: run cookiecutter on a full clone of the template",
              file=sys.stderr)
        return 1
    # This template's engine, not whichever the Python running cookiecutter may have installed.
    sys.path.insert(0, str(engine / "src"))
    from importlib import import_module

    package = ANSWERS["package_name"]
    scaffold = import_module("lakehouse_engine.run.scaffold")
    version = import_module("lakehouse_engine").__version__
    tables_dir = project / package / "tables"
    tables = [t.strip() for t in re.split(r"[,\s]+", ANSWERS["tables"]) if t.strip()]
    for table in tables:
        scaffold.write_table_module(tables_dir, scaffold.TableModuleSpec(source_table=table))
    if not is_demo(ANSWERS, tables):  # its smoke test runs the demo source's own tables
        (project / "tests" / "test_demo_ingest.py").unlink()
    commit = template_commit(engine.parent)
    if ANSWERS["engine"] == "vendored":
        vendor(engine, project, version, commit)
    else:
        (project / "requirements.txt").write_text(
            "# The ingestion engine, pinned: upgrading is changing this line (README: The engine).\n"
            f"# lakehouse-engine {version}, template commit {commit or 'uncommitted'}\n"
            f"lakehouse-engine @ {engine_source(ANSWERS['_template'], engine, commit)}\n")
    saved = {k: v for k, v in ANSWERS.items() if not k.startswith("__") and k not in MACHINE_PATHS}
    if commit:
        saved["_template_commit"] = commit
    (project / ".cookiecutter.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    say(next_steps(folder_to_cd(project), ANSWERS, tables))
    return 0


def template_dir() -> Path:
    """The template's folder. cookiecutter gives it as it was given (``cookiecutter .``), and a
    hook runs in the new project: a relative one is taken from cookiecutter's own folder."""
    repo = Path(ANSWERS["_repo_dir"]).expanduser()
    if not repo.is_absolute():
        try:
            base = Path(os.readlink(f"/proc/{os.getppid()}/cwd"))  # Linux: the process that runs this hook
        except OSError:
            base = Path(os.environ.get("PWD") or ".")
        repo = base / repo
    return repo.resolve()


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def template_commit(repo: Path) -> str | None:
    """The template's commit, when its engine has no uncommitted change (else None)."""
    if _git(repo, "status", "--porcelain", "--", "engine") != "":
        return None
    return _git(repo, "rev-parse", "HEAD")


def engine_source(template: str, engine: Path, commit: str | None) -> str:
    """Where pip installs the engine from: the template's git URL at ``commit`` when it was given
    as one, else its local clone at ``commit``, else (uncommitted changes) the engine folder."""
    host, _, path = template.partition(":")
    if host in HOSTS and path and not template.startswith(("http", "git@", "ssh:", "file:")):
        template = HOSTS[host].format(path.removesuffix(".git"))
    if commit is None:
        return engine.as_uri()
    if re.match(r"^(https?|ssh|git)://", template):
        return f"git+{template}@{commit}#subdirectory=engine"
    if template.startswith("git@"):  # scp-like: git@github.com:org/repo.git
        return f"git+ssh://{template.replace(':', '/', 1)}@{commit}#subdirectory=engine"
    # pip accepts a direct git+file URL only with a host part: file://localhost/path.
    return f"git+file://localhost{engine.parent.as_uri().removeprefix('file://')}@{commit}#subdirectory=engine"


def vendor(engine: Path, project: Path, version: str, commit: str | None) -> None:
    """Copy the engine's source into the repository; its dependencies become the project's."""
    target = project / "lakehouse_engine"
    shutil.copytree(engine / "src" / "lakehouse_engine", target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (target / "VENDORED").write_text(f"lakehouse-engine {version}\ntemplate commit {commit or 'uncommitted'}\n")
    pins = (engine / "requirements.txt").read_text()
    (project / "requirements.txt").write_text(
        f"# The engine's dependencies: its source is in lakehouse_engine/ (vendored, lakehouse-engine {version}).\n"
        + pins)


def is_demo(answers: dict[str, str], tables: list[str]) -> bool:
    """Whether the project reads (some of) the embedded demo source's tables."""
    return answers["source_host"] in LOCAL_HOSTS and {t.lower() for t in tables} <= DEMO_TABLES


def folder_to_cd(project: Path) -> str:
    """The project folder as seen from where cookiecutter was run (the shell's PWD: a hook runs
    inside the new folder), or its full path when it is not below there."""
    here = os.environ.get("PWD")
    relative = os.path.relpath(project, here) if here else ".."
    return str(project) if relative.startswith("..") else relative


def say(text: str) -> None:
    """Print, best effort: a closed stdout (``cruft diff | head``) must not fail the generation."""
    try:
        print(text, flush=True)
    except OSError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure at exit


def next_steps(folder: str, answers: dict[str, str], tables: list[str]) -> str:
    """What to type next; every ``make`` target named here exists in the generated Makefile."""
    lines = [f"\nCreated {folder}. Next steps:", f"  cd {shlex.quote(folder)}"]
    if is_demo(answers, tables):
        lines += [
            f"  make demo           # embedded MariaDB (127.0.0.1:{answers['source_port']}) with sample rows: ingest,",
            "                      # change rows, ingest again, check quality, show status",
            "  make source-down    # stop the demo MariaDB",
        ]
    lines += [
        "  make test           # the project's tests (they start their own MariaDB and Spark)",
        "",
        "Your own source: its host, port, user and database are in profiles.yml (MYSQL_HOST, MYSQL_PORT,",
        "MYSQL_USER, MYSQL_DATABASE override them). export MYSQL_PASSWORD=..., check the source and its",
        "binlog settings with make debug, then make ingest-all.",
        "`make` lists every target; README.md has the rest.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
