"""``lakehouse source up|down|status|changes``: the embedded MariaDB of the demo and the tests,
in the project's ``.source`` folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...config.project import SourceProfile
from ...errors import ConfigError
from ..context import CommandContext
from ..options import SourceOptions

if TYPE_CHECKING:
    from ...source.embedded import EmbeddedServer


def run(ctx: CommandContext, options: SourceOptions) -> int:
    from ...source import embedded

    source = ctx.config.source
    if source.host not in {"127.0.0.1", "localhost"}:
        raise ConfigError(f"the profile points at {source.host}, not the embedded source on 127.0.0.1")
    server = embedded.EmbeddedServer(ctx.config.root / ".source", source.port)
    demo = ctx.config.root / "demo"
    if options.action == "down":
        embedded.stop(server)
        print("embedded MariaDB stopped")
    elif options.action == "status":
        print(f"embedded MariaDB {'running' if embedded.is_running(server) else 'stopped'} "
              f"on 127.0.0.1:{server.port} (data: {server.datadir})")
    elif options.action == "changes":
        embedded.run_sql(server, embedded.split_sql((demo / "changes.sql").read_text()), source.database)
        print("applied demo/changes.sql (inserts, updates, deletes)")
    else:
        _up(server, source, demo)
    return 0


def _up(server: EmbeddedServer, source: SourceProfile, demo: Path) -> None:
    """Start the server with the profile's user, and load the demo data into an empty database."""
    from ...source import embedded

    embedded.start(server)
    embedded.create_ingest_user(server, source.user, source.password, source.database)
    with embedded.root_connection(server, source.database) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s",
                    (source.database,))
        row = cur.fetchone()
        empty = row is None or row[0] == 0
    if empty:
        embedded.run_sql(server, embedded.split_sql((demo / "schema.sql").read_text()), source.database)
        print(f"loaded demo data into {source.database}")
    print(f"embedded MariaDB running on 127.0.0.1:{server.port} (data: {server.datadir})")
