"""What a local "image" (a Python interpreter) runs on, and whether it can run the workload.

Pre-flight of the local backend asks each interpreter the session uses (the new image and,
under --xlatune-gate, the lock's) one question: its Python version, its JAX version (from the
package metadata, without importing JAX), and whether the workload module is importable there.
A new venv without this repository installed fails here in one line, instead of every item
being retried and failing with "exited with code 1 before any completed step". The answer is
what a lock records as `measured_on`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..transport.base import Transport, TransportError

# argv[1]: the workload module. Prints one line: `xlatune-probe <python> <jax or -> <ok|missing>`.
PROBE = """\
import importlib.metadata as md, importlib.util as u, sys
try:
    found = u.find_spec(sys.argv[1]) is not None
except ImportError:
    found = False
try:
    jax = md.version("jax")
except md.PackageNotFoundError:
    jax = "-"
print("xlatune-probe", sys.version.split()[0], jax, "ok" if found else "missing")
"""
MARK = "xlatune-probe"


@dataclass(frozen=True)
class Interpreter:
    """One interpreter as the probe saw it; `problem` is "" when it can run the workload."""

    python: str
    version: str = ""
    jax: str = ""
    problem: str = ""

    @property
    def measured_on(self) -> str:
        """What a lock and the gate report say a measurement ran on."""
        jax = f", JAX {self.jax}" if self.jax else ", no JAX"
        return f"Python {self.version}{jax} ({self.python})"


def parse_probe(python: str, module: str, returncode: int, stdout: str, stderr: str) -> Interpreter:
    """The probe's answer (pure); a failed start or a missing module is a one-line problem."""
    line = next((ln.split() for ln in stdout.splitlines() if ln.startswith(MARK + " ")), None)
    if returncode != 0 or line is None or len(line) != 4:
        tail = (stderr.strip().splitlines() or [f"exit code {returncode}"])[-1]
        if "/" not in python:  # `slow-python`: the shell looked for it in PATH, not here
            tail += f"; a name without a '/' is looked up in PATH: write ./{python} for a file in this directory"
        return Interpreter(python, problem=f"{python} does not start ({tail})")
    _, version, jax, found = line
    jax = "" if jax == "-" else jax
    if found != "ok":
        return Interpreter(
            python, version, jax, f"{python} (Python {version}) cannot import the workload module {module}"
        )
    if not jax and module.split(".")[:2] == ["pytest_xlatune", "workload"]:  # the embedded trainer is JAX
        return Interpreter(
            python, version, jax, f"{python} (Python {version}) has no JAX, which the workload {module} needs"
        )
    return Interpreter(python, version, jax)


def probe(transport: Transport, python: str, module: str) -> Interpreter:
    """Ask one interpreter (IO through the transport)."""
    try:
        result = transport.run([python, "-c", PROBE, module], timeout=120)
    except TransportError as error:
        return Interpreter(python, problem=f"{python} does not start ({error})")
    return parse_probe(python, module, result.returncode, result.stdout, result.stderr)


def check_interpreters(
    transport: Transport,
    pythons: Mapping[str, str],
    module: str,
) -> tuple[dict[str, Interpreter], list[str]]:
    """(image → what its interpreter is, every problem at once): `pythons` maps each image the
    session runs on ("" = the session's own) to its interpreter."""
    by_python: dict[str, Interpreter] = {}
    found: dict[str, Interpreter] = {}
    for image, python in pythons.items():
        if python not in by_python:
            by_python[python] = probe(transport, python, module)
        found[image] = by_python[python]
    problems = list(dict.fromkeys(i.problem for i in found.values() if i.problem))
    return found, problems


def remedy(module: str) -> str:
    """How to give a venv what the workload needs."""
    if module == "pytest_xlatune.workload":
        return (
            "install this repository there (`<python> -m pip install -e '<clone of pytest-xlatune>[demo]'`) "
            "or pass --xlatune-workload"
        )
    return f"make {module} importable there (PYTHONPATH, or install it) or pass --xlatune-workload"
