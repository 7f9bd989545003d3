"""The pytest_xlatune_* hooks other plugins and conftest.py files implement (registered by plugin.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .launch.registry import Backend, LaunchContext


@pytest.hookspec(firstresult=True)
def pytest_xlatune_make_launcher(context: LaunchContext) -> Backend | None:
    """Start the backend of a cell (pre-flight included): a launcher and the frozen nodelist.

    The first non-None result wins; the built-in registry (`backend.kind` → factory) runs last.
    Raise `launch.preflight.PreflightError` to fail every item of the cell with its message.
    """
