"""``python -m tiltframe ...`` and ``spark-submit path/to/tiltframe/__main__.py run ...``.

Self-contained on purpose: spark-submit runs this file as a script (no package context), so it only
imports the installed package and calls the CLI.
"""

from __future__ import annotations

import os
import sys

if (
    not __package__
    and sys.path
    and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__))
):
    # Run as a script: the package directory itself is first on sys.path, where its modules (api, errors,
    # demo, ...) could shadow same-named top-level modules.  Import tiltframe from where it is installed.
    sys.path.pop(0)

from tiltframe.cli.commands import main

if __name__ == "__main__":
    main()
