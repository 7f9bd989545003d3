"""The REAL host-cmd bridge for tests: upstream's .host-cmd copied into a checkout, its own ctl script.

The copy comes from the unmodified upstream snapshot; `host-cmd-ctl.sh start/stop` runs it as a
user would on the host. This test machine is itself a container (`/.dockerenv`), which the server
refuses to start in ("must run on the host"); here the machine IS the host the jobs run on, so the
server process alone is started with a sitecustomize that hides `/.dockerenv` from it (its code is
untouched; the shim removes itself from PYTHONPATH so the commands it runs never see it).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.integration.upstream import upstream_snapshot
from tests.integration.waits import wait_until

SHIM = """\
import os, sys
if sys.argv and sys.argv[0].endswith("host_cmd_server.py"):
    _here = os.path.dirname(os.path.abspath(__file__))
    _parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _here]
    if _parts:
        os.environ["PYTHONPATH"] = os.pathsep.join(_parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    import pathlib
    _exists = pathlib.Path.exists
    def _hide_dockerenv(self, *args, **kwargs):
        return False if str(self) == "/.dockerenv" else _exists(self, *args, **kwargs)
    pathlib.Path.exists = _hide_dockerenv
"""


@dataclass(frozen=True)
class Bridge:
    """A checkout's `.host-cmd` (copied from upstream) and the ctl script that runs its server."""

    checkout: Path
    shim_dir: Path

    @property
    def dir(self) -> Path:
        return self.checkout / ".host-cmd"

    def ctl(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        base = dict(os.environ if env is None else env)
        path = base.get("PYTHONPATH", "")
        base["PYTHONPATH"] = f"{self.shim_dir}{os.pathsep}{path}" if path else str(self.shim_dir)
        return subprocess.run(
            ["bash", str(self.dir / "host-cmd-ctl.sh"), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=base,
            check=False,
        )

    def start(self, env: dict[str, str] | None = None) -> None:
        """`host-cmd-ctl.sh start`, then wait for the server to run. The script itself looks once,
        one second after starting it, and says "Failed to start" when a loaded machine has not yet
        brought the server's pid file up; the server may come up later: the state decides."""
        proc = self.ctl("start", env=env)
        if proc.returncode == 0 and "Started on" in proc.stdout:
            return
        assert "Failed to start on" in proc.stdout, proc.stdout + proc.stderr
        wait_until(
            f"the host-cmd server to run ({proc.stdout.strip()})",
            lambda: "Server:  RUNNING" in self.ctl("status", env=env).stdout,
            every=0.5,
        )

    def stop(self) -> None:
        self.ctl("stop")

    def results(self) -> list[Path]:
        return sorted((self.dir / "results").rglob("*.json"))

    def commands(self, prefix: str = "") -> list[str]:
        """The commands the server started (its `START [id] cwd=… <cmd>` log lines, `cd … && `
        dropped, cut at 120 characters as the server logs them) that begin with `prefix`."""
        found = []
        root = f"cwd={self.checkout.resolve()}"
        for line in self.log().splitlines():
            _, start, rest = line.partition("START  [")
            if not start:
                continue
            where = rest.split("] ", 1)[1]
            assert where.startswith(root), line  # the server's cwd: the checkout or under it
            cmd = where[len(root) :].split(" ", 1)[1]
            if cmd.startswith("cd ") and " && " in cmd:
                cmd = cmd.split(" && ", 1)[1]
            if cmd.startswith(prefix):
                found.append(cmd)
        return found

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.dir.glob("host_cmd_server.*.log")))


def install_bridge(checkout: Path, shim_dir: Path) -> Bridge:
    """Copy upstream's .host-cmd into `checkout` (writable, as a git clone would be); a copy of
    the whole snapshot (conformance_checkout) has it already."""
    target = checkout / ".host-cmd"
    if not target.is_dir():
        shutil.copytree(upstream_snapshot() / ".host-cmd", target)
    for path in [target, *target.iterdir()]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    shim_dir.mkdir(parents=True, exist_ok=True)
    (shim_dir / "sitecustomize.py").write_text(SHIM)
    return Bridge(checkout, shim_dir)
