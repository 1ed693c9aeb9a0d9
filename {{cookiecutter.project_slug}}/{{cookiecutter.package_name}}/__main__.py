"""``python -m {{ cookiecutter.package_name }} ...``: the ``lakehouse`` command, run in this project."""

import sys

from lakehouse_engine.run.cli import main

if __name__ == "__main__":
    sys.exit(main(package="{{ cookiecutter.package_name }}"))
