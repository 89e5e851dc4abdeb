"""Mnemo's version, from one source: `[project] version` in pyproject.toml.

Read from the file beside the code (a checkout, the Docker image: the Dockerfile copies it)
rather than from installed package metadata, because Mnemo runs from its checkout and is
not installed as a package; the metadata is the fallback for an install without the file.
"""

import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@cache
def mnemo_version() -> str:
    try:
        with PYPROJECT.open("rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return metadata.version("mnemo")
    except metadata.PackageNotFoundError:
        return "unknown"
