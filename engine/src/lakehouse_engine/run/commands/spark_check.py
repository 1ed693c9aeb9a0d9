"""``lakehouse spark-check``: Spark started with Delta once, which resolves and caches the jars."""

from __future__ import annotations

from ..context import CommandContext


def run(ctx: CommandContext) -> int:
    from ...sink.spark import delta_artifact, get_spark

    spark = get_spark(ctx.config)
    spark.range(1).count()
    print(f"Spark {spark.version} with Delta ({delta_artifact()}) is ready")
    return 0
