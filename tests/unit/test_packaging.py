"""The package metadata a `pip install` reads: no deprecation banner from setuptools."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    # `license = {text = ...}` makes setuptools >= 77 print its license deprecation banner on
    # every build (three times per `pip install -e`); an SPDX string needs setuptools >= 77.
    data = tomllib.loads(PYPROJECT.read_text())
    assert data["project"]["license"] == "Apache-2.0"
    requires = " ".join(data["build-system"]["requires"])
    floor = re.search(r"setuptools>=(\d+)", requires)
    assert floor is not None and int(floor.group(1)) >= 77
