"""Files written in one step: a temporary file beside the target, renamed over it, so a reader
(a scheduler, node_exporter, a concurrent run) sees the old content or the new, never half."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str, mode: int = 0o644) -> Path:
    """Replace ``path`` with ``text``; ``mode`` 0644 by default (mkstemp's 0600 would hide the
    file from the other users a scheduler or an exporter runs as)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
