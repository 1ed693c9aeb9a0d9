"""spark-submit's application: ``spark-submit [options] <this file> COMMAND ...`` runs the
``lakehouse`` command in a driver that spark-submit started (a cluster's gateway, Airflow's
SparkSubmitOperator). ``lakehouse submit-line COMMAND ...`` prints the whole line: the Delta jars
as ``--packages``, Delta's session settings and the project's ``spark.conf`` as ``--conf``, and
this file's path. Absolute imports only: spark-submit runs a file, not a module of a package."""

import sys

from lakehouse_engine.run.cli import entry

if __name__ == "__main__":
    sys.exit(entry())
