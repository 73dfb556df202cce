"""The layout's rules from DESIGN.md and the map in docs/layout.md, checked on the import graph:

- the flow: schemas import nothing of ours; ingest only schemas; curation only schemas, its own
  domains, and from ingest the normalisation helpers and the outbound-HTTP retry rules; the
  embedding runtime beside curation, neither importing the other, taking from ingest only the
  outbound-HTTP retry rules; none of them imports the service layer or the web framework;
- inside the service: `core` imports no domain; a domain's routes are mounted only by the app and
  its commands registered only by the root command line (commands may call other commands'
  helpers), so no domain reaches into another's HTTP or CLI layer; nothing imports the app, the
  root command line or the scheduler but the entry points;
- size: no module over 400 lines outside migrations and tests, at most 8 modules at the top of
  `service/`, and every domain package says in its docstring what it owns and what it may use.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("schemas", "ingest", "curation", "embedding", "service")
WEB = {"fastapi", "starlette", "uvicorn"}
FORBIDDEN = {
    "schemas": {"ingest", "curation", "embedding", "service", *WEB},
    "ingest": {"curation", "embedding", "service", *WEB},
    "curation": {"embedding", "service", *WEB},
    "embedding": {"curation", "service", *WEB},
}
CURATION_MAY_USE_FROM_INGEST = {"ingest.normalisation", "ingest.http"}
EMBEDDING_MAY_USE_FROM_INGEST = {"ingest.http"}
SERVICE_DOMAINS = ("sources", "items", "dedup", "evals", "runs", "evidence", "ui")
ENTRY_POINTS = {"service.app", "service.cli", "service.process_cli", "service.scheduler"}
MAX_LINES = 400
MAX_SERVICE_TOP_MODULES = 8


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, by full dotted name (`from a import b` counts `a` and `a.b`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


IMPORTS = {module: _imports(path) for module, path in MODULES.items()}


def _ours(names: set[str]) -> set[str]:
    return {name for name in names if name in MODULES}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_the_flow(package: str) -> None:
    offending = {
        module: sorted(name for name in names if name.split(".")[0] in FORBIDDEN[package])
        for module, names in IMPORTS.items()
        if module.split(".")[0] == package and any(name.split(".")[0] in FORBIDDEN[package] for name in names)
    }
    assert offending == {}


def test_curation_takes_from_ingest_only_normalisation_and_http_retries() -> None:
    offending = {
        module: sorted(name for name in _ours(names) if name.startswith("ingest") and not any(name.startswith(allowed) for allowed in CURATION_MAY_USE_FROM_INGEST))
        for module, names in IMPORTS.items()
        if module.startswith("curation")
    }
    assert {module: names for module, names in offending.items() if names} == {}


def test_the_embedding_runtime_takes_from_ingest_only_http_retries() -> None:
    offending = {
        module: sorted(name for name in _ours(names) if name.startswith("ingest") and not any(name.startswith(allowed) for allowed in EMBEDDING_MAY_USE_FROM_INGEST))
        for module, names in IMPORTS.items()
        if module.startswith("embedding")
    }
    assert {module: names for module, names in offending.items() if names} == {}


def test_service_core_imports_no_domain() -> None:
    domains = tuple(f"service.{domain}" for domain in SERVICE_DOMAINS) + tuple(ENTRY_POINTS)
    offending = {module: sorted(name for name in _ours(names) if name.startswith(domains)) for module, names in IMPORTS.items() if module.startswith("service.core")}
    assert {module: names for module, names in offending.items() if names} == {}


def test_routes_are_mounted_only_by_the_app_and_commands_registered_only_by_the_command_line() -> None:
    def allowed(module: str, name: str) -> bool:
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "routes":
            return module == "service.app"
        if leaf == "cli" and name != "service.cli":
            return module == "service.cli" or module.endswith(".cli")
        return name not in ENTRY_POINTS or module in ENTRY_POINTS

    offending = {module: sorted(name for name in _ours(names) if not allowed(module, name)) for module, names in IMPORTS.items()}
    assert {module: names for module, names in offending.items() if names} == {}


def test_no_module_is_too_long() -> None:
    lengths = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {module: length for module, length in lengths.items() if length > MAX_LINES} == {}


def test_the_service_keeps_its_top_level_small() -> None:
    top = sorted(path.name for path in (ROOT / "service").glob("*.py"))
    assert len(top) <= MAX_SERVICE_TOP_MODULES, top


DOCUMENTED = ["schemas", "ingest", "curation", "embedding", "service"]
DOCUMENTED += sorted(f"curation/{path.name}" for path in (ROOT / "curation").iterdir() if (path / "__init__.py").exists())
DOCUMENTED += [f"service/{name}" for name in ("core", *SERVICE_DOMAINS)]


@pytest.mark.parametrize("package", DOCUMENTED)
def test_each_package_says_what_it_owns_and_may_use(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert "Owns:" in docstring and "May use:" in docstring, f"{package}/__init__.py should say what it owns ('Owns:') and what it may use ('May use:')"
