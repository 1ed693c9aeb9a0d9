"""Local stand-ins for object stores (S3, GCS, Azure emulators), started for one test."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(argv: Sequence[str], port: int, timeout_s: float = 30) -> Iterator[None]:
    """Run ``argv`` (a server listening on 127.0.0.1:``port``) until the block ends; the block
    starts once the port accepts connections. The server's output is discarded."""
    server = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError(f"{argv[0]} exited with {server.returncode} before listening") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield
    finally:
        server.terminate()
        server.wait(timeout=30)
