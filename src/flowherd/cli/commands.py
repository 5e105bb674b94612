"""Imports every command module so that each registers itself on `flowherd.cli.app`."""
