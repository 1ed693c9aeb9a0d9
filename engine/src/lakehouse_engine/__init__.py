"""lakehouse-engine: MySQL/MariaDB to Delta Lake ingestion, used by thin project repositories.

The stable surface for a project is ``lakehouse_engine.tables`` (``TableSpec`` and its modes,
which table modules import), the ``lakehouse`` command (``python -m lakehouse_engine``) and the
files it reads (``lakehouse_project.yml``, ``profiles.yml``); everything else is internal and may
change in any release (see CHANGELOG.md).

Kept import-light on purpose: importing the package must not start Spark or load Great
Expectations, so the CLI answers ``--help`` and the template hooks run in a blink.
"""

__version__ = "0.11.0"
