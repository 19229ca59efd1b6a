"""Rooms by job (docs/development.md, "Where things go"): the server's root
holds only the app and its wiring, every chat platform is a package of the
same shape, and every test directory mirrors a package or module of
hermes_trio (or is one of the named helper directories)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hermes_trio"
TESTS = ROOT / "tests"

SERVER_ROOT = {"__init__.py", "app.py", "run.py", "state.py"}
# Shared by several platforms; each platform itself is a package.
PLATFORM_HELPERS = {
    "__init__.py",
    "base.py",
    "http.py",
    "markdown_inline.py",
    "registry.py",
    "send_only.py",
    "webhook.py",
    "websocket.py",
}
# Test directories that test no one package: the package as a whole
# (project), the manual's examples (docs), OpenAI's published schemas
# (spec) and the hooks every child process of a test loads (child_hooks).
HELPER_DIRS = {"child_hooks", "docs", "project", "spec"}


def test_the_server_root_holds_the_app_and_its_wiring_only() -> None:
    modules = {path.name for path in (PACKAGE / "server").glob("*.py")}
    assert modules == SERVER_ROOT, (
        f"server/ root holds {sorted(modules - SERVER_ROOT)}: give each a room "
        "(edge/, admission/, parsing/, a route's package) and its place in "
        "pyproject.toml's server layers"
    )


def test_every_platform_is_a_package_exporting_its_adapter() -> None:
    platforms = PACKAGE / "platforms"
    flat = {path.name for path in platforms.glob("*.py")} - PLATFORM_HELPERS
    assert not flat, f"platform modules outside a package: {sorted(flat)}"
    packages = [path for path in platforms.iterdir() if (path / "__init__.py").is_file()]
    assert {path.name for path in packages} >= {"telegram", "whatsapp", "homeassistant"}
    for package in packages:
        assert (package / "adapter.py").is_file(), f"{package.name}/ has no adapter.py"
        assert "Adapter" in (package / "__init__.py").read_text(), (
            f"{package.name}/__init__.py does not export its adapter"
        )


def _test_directories() -> list[Path]:
    return [
        path.relative_to(TESTS)
        for path in sorted(TESTS.rglob("*"))
        if path.is_dir()
        and not any(part.startswith((".", "__")) for part in path.relative_to(TESTS).parts)
        # A directory left with only bytecode caches (a checkout from before
        # a move) holds no test.
        and any(path.glob("*.py"))
    ]


def test_every_test_directory_mirrors_the_package() -> None:
    strays = []
    for relative in _test_directories():
        if relative.parts[0] in HELPER_DIRS:
            continue
        mirrored = PACKAGE.joinpath(*relative.parts)
        if not (mirrored.is_dir() or mirrored.with_suffix(".py").is_file()):
            strays.append(relative.as_posix())
    assert not strays, (
        f"test directories with no hermes_trio package or module of that path: {strays}; "
        "a test lives beside what it tests (docs/development.md)"
    )


def test_the_helper_directories_exist() -> None:
    # A helper directory renamed away would leave this allow-list stale.
    assert {path.name for path in TESTS.iterdir() if path.is_dir()} >= HELPER_DIRS
