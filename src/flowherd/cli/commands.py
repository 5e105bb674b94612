"""Imports every command module so that each registers itself on `flowherd.cli.app`."""
from flowherd.cli import collective_cmd  # noqa: F401
from flowherd.cli import fabric_cmd  # noqa: F401
