"""The ``objcli`` command (and ``python -m objcli``).

Importing the command line takes a moment (Click, NumPy, PyArrow); a Ctrl-C that lands during the
import is the same one line as one that lands during a run, not an import traceback.
"""

import sys


def run() -> None:
    try:
        from .cli import main
    except KeyboardInterrupt:
        from .errors import INTERRUPTED

        sys.stderr.write(f"Error: {INTERRUPTED}\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
