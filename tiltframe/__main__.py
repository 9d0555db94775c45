"""``python -m tiltframe ...`` and ``spark-submit path/to/tiltframe/__main__.py run ...``.

Self-contained on purpose: spark-submit runs this file as a script (no package context), so it only
imports the installed package and calls the CLI.
"""

from __future__ import annotations

from tiltframe.cli.app import main

if __name__ == "__main__":
    main()
