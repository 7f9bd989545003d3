"""The pytest_xlatune_* hooks other plugins and conftest.py files implement (registered by plugin.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .launch.registry import Backend, BackendPlugin, LaunchContext


@pytest.hookspec(firstresult=True)
def pytest_xlatune_make_launcher(context: LaunchContext) -> Backend | None:
    """Start the backend of a cell (pre-flight included): a launcher and the frozen nodelist.

    The first non-None result wins; the built-in registry (`backend.kind` → factory) runs last.
    Raise `launch.preflight.PreflightError` to fail every item of the cell with its message.
    """


@pytest.hookspec
def pytest_xlatune_backend_kinds() -> list[BackendPlugin]:  # type: ignore[empty-body]  # a spec: never called
    """Backend kinds a plugin adds (`launch.registry.BackendPlugin`: name, key check, factory).

    Called once at configure time (plugins and the rootdir's conftest.py); the cell schema then
    accepts each name as `backend.kind`, hands that section's other keys to its check, and
    make_backend starts its cells with its factory. A built-in kind cannot be added again.
    """
