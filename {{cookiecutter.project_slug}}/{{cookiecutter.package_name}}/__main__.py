"""``python -m {{ cookiecutter.package_name }} ...``"""

import sys

from .engine.run.cli import main

if __name__ == "__main__":
    sys.exit(main(package="{{ cookiecutter.package_name }}"))
