"""The process tree of a pid, read from /proc, for the tests that watch a sweep's Ray processes."""

import os
from pathlib import Path


def process_tree(root: int) -> set[int]:
    """`root` and every process descended from it now."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                # the field after the command name (which may hold spaces) is the state, then the ppid
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, grew = {root}, True
    while grew:
        new = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= new
        grew = bool(new)
    return tree
