"""What a silver commit records of bronze, and the check that bronze still holds it.

Each silver commit carries a marker (:class:`Commit`): the bronze batch it applied, the run that
made that batch and the generation (full refresh) it belongs to. Before merging on, silver's
marker is placed in bronze's changelog (:class:`Lineage`): a marker naming a batch bronze no
longer holds as silver saw it means bronze lost commits, and merging on would leave silver wrong
for good.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from ..errors import FatalError
from . import bronze


@dataclass(frozen=True)
class Commit:
    """The idempotent transaction and marker a silver commit carries."""

    app_id: str
    batch: int
    table: str
    # Of bronze's commit of ``batch``: the run that made it and the generation it belongs to
    # (``Checkpoint.generation``). A batch number alone can come back: a bronze commit lost from
    # its log (edited by hand, restored from an older copy) is taken by the next run's batch.
    run: str | None = None
    generation: int = 0

    @property
    def marker(self) -> str:
        body: dict[str, Any] = {"bronze_batch": self.batch}
        if self.run is not None:
            body["bronze_run"] = self.run
        if self.generation:
            body["generation"] = self.generation
        return json.dumps(body)


@dataclass(frozen=True)
class Lineage:
    """What bronze says of the batches silver has merged and is about to merge."""

    newest: int  # bronze's newest batch (-1: none)
    run: str | None  # the run of the batch to merge
    generation: int | None  # the generation of the batch to merge (None: bronze has no such batch)
    chunks_read: bool  # whether that batch's checkpoint has every snapshot chunk read
    done_run: str | None  # the run of bronze's batch silver has merged, when bronze still has it

    def check(self, marker: Mapping[str, Any], table: str) -> None:
        """Stop when silver's marker names a bronze batch bronze does not hold as silver saw it:
        silver's state then cannot be placed in bronze's changelog, and merging on would leave
        it wrong for good (the batch number would be taken as merged)."""
        done = int(marker.get("bronze_batch", -1))
        if done < 0 or self.generation is None or int(marker.get("generation", 0)) != self.generation:
            return
        if self.newest < done:
            found = f"bronze's newest batch is {self.newest}"
        elif marker.get("bronze_run") not in (None, self.done_run) and self.done_run is not None:
            found = f"bronze's batch {done} is another run's ({self.done_run}, silver merged {marker['bronze_run']}'s)"
        else:
            return
        raise FatalError(
            f"table {table}: silver has merged bronze batch {done}, but {found}: bronze lost commits (its "
            f"_delta_log was edited or restored from an older copy); make silver anew from bronze with "
            f"`make rebuild TABLE={table}`, then ingest again", table=table)


def lineage(spark: SparkSession, bronze_path: str, upto: int, done: int, newest_version: int | None = None) -> Lineage:
    """Bronze's checkpoints from its newest back to batch ``done``, read once (from
    ``newest_version`` when the caller has bronze's newest version)."""
    newest, at_upto, done_run = -1, None, None
    for checkpoint in bronze.checkpoints_back(spark, bronze_path, newest_version):
        newest = max(newest, checkpoint.batch)
        if checkpoint.batch == upto:
            at_upto = checkpoint
        if checkpoint.batch == done:
            done_run = checkpoint.run_id
        if checkpoint.batch <= done or (done < 0 and checkpoint.batch <= upto):
            break
    if at_upto is None:
        return Lineage(newest, None, None, True, done_run)
    return Lineage(newest, at_upto.run_id, at_upto.generation, at_upto.chunks_read, done_run)
