"""XlatuneError: the one base of every exception the package defines.

`except XlatuneError` catches whatever pytest-xlatune raises on purpose (a bad cell, a locked
store, a refused launcher command, a failed transport, a regression), and nothing else. Each
family keeps its class in its own room (cell.nodes.CellError, store.StoreError,
launch.base.LauncherError, transport.base.TransportError, launch.preflight.PreflightError, ...);
those that were ValueErrors still are.
"""

from __future__ import annotations


class XlatuneError(Exception):
    """Base of every pytest-xlatune exception."""
