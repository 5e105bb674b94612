"""A local sweep's Ray instance: every listening socket on loopback, its temporary directory gone after."""

import os
from pathlib import Path

import pytest
import yaml
from proc_tree import process_tree

pytest.importorskip("ray", reason="the sweep extra (ray) is not installed")
pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.experiments.sweep import run_sweep, set_field, sweep_from_mapping

TINY = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())


def listening_sockets(pids: set[int]) -> list[tuple[str, int]]:
    """(local IP, pid) of every TCP socket in LISTEN state held by one of `pids` (/proc/net/tcp{,6}
    inodes matched against each process's open file descriptors)."""
    import ipaddress

    owner = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                owner[link[8:-1]] = pid
    out = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in owner:  # 0A: TCP_LISTEN
                continue
            hexip = f[1].split(":")[0]
            raw = bytes.fromhex(hexip)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            ip = ipaddress.ip_address(raw)
            out.append((str(getattr(ip, "ipv4_mapped", None) or ip), owner[f[9]]))
    return out


def test_listening_sockets_reads_this_process_own_listener():
    import socket

    with socket.socket() as s:  # the helper itself must see a known listener and its address
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert ("127.0.0.1", os.getpid()) in listening_sockets({os.getpid()})
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::", 0))
        s.listen()
        assert ("::", os.getpid()) in listening_sockets({os.getpid()})


@pytest.mark.slow
def test_local_sweep_listens_on_loopback_only_and_removes_its_temp_dir(tmp_path):
    import tempfile

    s = sweep_from_mapping({"name": "sock", "base": set_field(TINY, "simulation.horizon", "2s"),
                            "axes": {"workload.background.load": [0.0, 0.3]}, "seeds": [1]})
    seen: dict[str, object] = {}
    mine = f"flowherd-ray-{os.getpid()}-*"

    def probe(state):
        if state["run_id"] and "sockets" not in seen:  # Ray is up and a worker has run
            tree = process_tree(os.getpid())
            seen["processes"] = len(tree)
            seen["sockets"] = listening_sockets(tree)
            seen["tmp"] = list(Path(tempfile.gettempdir()).glob(mine))

    out = run_sweep(s, tmp_path / "st", num_cpus=2, batch=1, progress=probe)
    assert (out.ok, out.failed) == (2, 0)
    sockets = seen["sockets"]
    # the GCS, the raylet (2), the runtime-env agent, the driver and each worker listen
    assert len(sockets) >= 4 and seen["processes"] >= 5, seen
    off = [(ip, pid) for ip, pid in sockets if not ip.startswith("127.")]
    assert off == [], f"listening off loopback: {off}"
    assert len(seen["tmp"]) == 1  # the instance lived in its own temp dir ...
    assert not seen["tmp"][0].exists()  # ... which is gone after the sweep
    assert list(Path(tempfile.gettempdir()).glob(mine)) == []
