"""The package's layers and its imports: each layer imports only the layers below it (the contracts in
pyproject.toml, checked by import-linter), and no module imports itself back through others, not even in
a function body or for type checking only."""

from __future__ import annotations

from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600


def test_each_layer_imports_only_the_layers_below_it() -> None:
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph("tiltframe", include_external_packages=False)
    cycles = set()
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.add(" -> ".join((module, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def test_no_module_passes_the_line_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "tiltframe").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"
