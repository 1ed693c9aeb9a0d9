import subprocess
import sys

import fixture_project
import pytest

from lakehouse_engine.run.locks import TableBusy, table_locks

HOLD = """
import sys, time
from lakehouse_engine.run.locks import TableBusy, table_locks
from pathlib import Path
with table_locks(Path(sys.argv[1]), ["orders"]):
    print("locked", flush=True)
    time.sleep(30)
"""


def test_a_second_run_of_the_same_table_is_refused_while_the_first_holds_it(tmp_path):
    project = fixture_project.PROJECT_ROOT
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=project
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = f"table orders is being ingested by another run \\(pid {holder.pid}, ingest\\)"
        with pytest.raises(TableBusy, match=busy) as refused:
            with table_locks(tmp_path, ["customers", "orders"]):
                pass
        # Nothing is wrong: retriable (ingest skips the table and goes on with the others).
        assert (refused.value.exit_code, refused.value.category) == (1, "busy")
        with table_locks(tmp_path, ["customers"]):
            pass  # other tables stay free
    finally:
        holder.kill()
        holder.wait()
    with table_locks(tmp_path, ["orders"]):
        pass  # a killed holder leaves no stale lock


def test_free_locks_are_taken_and_the_busy_tables_named_so_a_run_goes_on_without_them(tmp_path):
    from lakehouse_engine.run.locks import free_table_locks

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=fixture_project.PROJECT_ROOT)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with free_table_locks(tmp_path, ["orders", "customers"]) as busy:
            assert [b.table for b in busy] == ["orders"]
            with pytest.raises(TableBusy, match="customers"):  # this run holds customers now
                with table_locks(tmp_path, ["customers"]):
                    pass
    finally:
        holder.kill()
        holder.wait()
