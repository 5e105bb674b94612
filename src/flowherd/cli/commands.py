"""Imports every command module so that each registers itself on `flowherd.cli.app`."""
from flowherd.cli import (
    collective_cmd,  # noqa: F401
    fabric_cmd,  # noqa: F401
    plan_cmd,  # noqa: F401
    report_cmd,  # noqa: F401
    simulate_cmd,  # noqa: F401
    sweep_cmd,  # noqa: F401
    train_cmd,  # noqa: F401
)
