"""``python -m lakehouse_engine ...``: the ``lakehouse`` command."""

import sys

from .run.cli import entry

if __name__ == "__main__":
    sys.exit(entry())
