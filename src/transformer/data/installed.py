"""Data that a PyPI package installs: its folder found without importing it (importlib's finder
locates it; none of its code runs, so a package that needs other apps to import still works),
and its version from the *.dist-info beside it. Builders say in one line what to install when
the package is missing."""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata
from pathlib import Path

from .text import DataError


def find_package(
    module: str,
    package: str,
    install: str,
    holding: str,
    package_dir: str | os.PathLike | None = None,
) -> Path:
    """The folder of `module` (the one holding `holding`), or --package-dir's; a DataError saying
    `install` when it is not there."""
    if package_dir is not None:
        folder = Path(package_dir)
        if not folder.is_dir():
            raise DataError(
                f"--package-dir {package_dir} does not exist: give the folder holding "
                f"{holding}, or leave it out and {install}"
            )
        return folder
    spec = importlib.util.find_spec(module)  # finds, does not execute
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"{package} is not installed: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def package_version(folder: Path, module: str) -> str:
    """The version in the *.dist-info beside the package's folder, or "unknown"."""
    for info in sorted(folder.parent.glob(f"{module}-*.dist-info")):
        version = metadata.PathDistribution(info).version
        if version:
            return version
    return "unknown"
