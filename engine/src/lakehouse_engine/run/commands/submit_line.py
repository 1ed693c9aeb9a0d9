"""``lakehouse submit-line COMMAND ...``: the spark-submit command line that runs ``lakehouse
COMMAND ...`` in a driver spark-submit starts (see :mod:`...submit`), for a cluster's gateway
host, cron, or Airflow's SparkSubmitOperator (its ``application``, ``packages``/``jars``,
``conf`` and ``application_args``)."""

from __future__ import annotations

import shlex

from ..context import CommandContext
from ..options import SubmitLineOptions


def run(ctx: CommandContext, options: SubmitLineOptions) -> int:
    from ...sink.spark import submit_line

    passed = [*(["--target", options.target] if options.target else []),
              *(["--profiles-dir", str(options.profiles_dir)] if options.profiles_dir else [])]
    print(shlex.join(submit_line(ctx.config, [*passed, *options.command])))
    return 0
