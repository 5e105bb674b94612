"""A lone flow in ns-3 against the `tcp` model at both slow-start growths (validation/README.md).

    python validation/lone_flow_check.py        # needs ns-3 (run.py's build); about 20 s

One 2 MB flow across the leaves and one inside a leaf of `run.py`'s ring fabric (16 hosts, two
leaves, 100 Gb/s, 400 Gb/s uplinks), alone: what is left of its time beyond the line rate is
the handshake and slow start, so the FCT says which growth per RTT ns-3's DCTCP has. ns-3.37's
``TcpDctcp`` derives from ``TcpLinuxReno``, whose ``SlowStart`` adds ``segmentsAcked * MSS`` per
ACK (byte counting: 2x per RTT with delayed ACKs), not ``TcpNewReno``'s one MSS per ACK (1.5x).
"""

from __future__ import annotations

import run as V  # validation/run.py, beside this file

from flowherd.units import KB, MB


def main() -> None:
    binary = V.build_ns3()
    for name, src, dst in (("lone-cross-leaf", 3, 8), ("lone-intra-leaf", 0, 1)):
        c = V.Case(name, 16, 2, 100, 400, 300 * KB)
        c.flow(src, dst, 2 * MB)
        s3, e3, _ = V.run_ns3(c, binary)
        out = [f"ns-3 {(e3 - s3)[0] * 1e6:.1f} us"]
        for growth in ("1.5", "2"):
            V.OVERRIDES = {"slow_start_growth": growth}
            s, e, _ = V.run_flowherd(c, "tcp")
            err = abs((e - s)[0] - (e3 - s3)[0]) / (e3 - s3)[0]
            out.append(f"tcp growth {growth}: {(e - s)[0] * 1e6:.1f} us ({err:.1%})")
        print(f"{name:16s} " + " | ".join(out))


if __name__ == "__main__":
    main()
