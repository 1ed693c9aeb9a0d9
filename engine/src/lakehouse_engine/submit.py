"""spark-submit's application: ``spark-submit [options] <this file> COMMAND ...`` runs the
``lakehouse`` command in a driver that spark-submit started (a cluster's gateway, Airflow's
SparkSubmitOperator). ``lakehouse submit-line COMMAND ...`` prints the whole line: the Delta jars
as ``--packages``, Delta's session settings and the project's ``spark.conf`` as ``--conf``, and
this file's path. Absolute imports only: spark-submit runs a file, not a module of a package."""

import os
import sys

# Run as a file, its folder is first on the path: the package's own modules (tables, errors...)
# would be importable as top-level ones and shadow others (pandas probes for PyTables' tables).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from lakehouse_engine.run.cli import entry  # noqa: E402 (after the path is mended)

if __name__ == "__main__":
    sys.exit(entry())
