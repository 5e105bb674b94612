"""Exact fast-forward among background flows ("quiet windows") of a cluster run's ``phase``
fidelity under the exact background rule (`flowherd.cluster.simulate`).

The rule. Max-min fair rates decompose over the connected components of the flow-link graph:
the rates of the flows of a component depend only on the flows in it. Take a training job J at
an iteration boundary (none of its flows active) and ``L``, the links of its footprint closed
under "an active flow on a link of ``L`` adds its links to ``L``"; ``B`` the active flows on
``L``. If no other job owns a link of ``L`` (footprints), every flow of ``B`` is background.
Then during J's next iteration the component of J's flows holds only J's flows and ``B`` as
long as no flow arrives on ``L`` (background arrivals are drawn ahead, jobs' footprints are
known) and no flow of ``B`` ends. Rates are a function of the set of active flows, not of their
bytes left, so if one simulated iteration (the template, from ``t0`` to ``t0 + T``) saw exactly
the set ``B`` throughout, the next ones are the same again: each lasts ``T`` and takes the same
bytes ``d_b`` off every flow ``b`` of ``B`` and the same bytes off every link of ``L``, until a
flow arrives on ``L`` or a flow of ``B`` runs out of bytes.

So a job whose template is clean (the same ``L`` and ``B`` at both ends, no arrival on ``L`` and
no job started or ended on it in between) advances ``k`` iterations of ``T`` as one delay, ``k``
as many as remain, end before the next background arrival on ``L``, and leave every flow of
``B`` more than one iteration's bytes; the flows of ``B`` are taken off the network for the
window (`flowherd.engine.hold`: nothing else shares their links) and put back at its end with
``k * d_b`` fewer bytes; the links of ``L`` are credited ``k`` times the template's bytes. What
is exact: every iteration end of J and every background flow's completion, to floating-point
rounding (the repeated iterations are one product ``k * T`` instead of a sum of event times).
What is approximated, as for every fast-forward here: a job that starts on ``L`` during the
window cuts it short at the end of the iteration in progress, and for that part of an iteration
it sees neither J's traffic nor that of ``B``. Windows are for the ideal network and runs
without a controller (a controller may decide differently in every iteration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine.hold import active_on, hold_flows, remaining_bytes, resume_flows
from flowherd.engine.incidence import ranges

if TYPE_CHECKING:
    from flowherd.cluster.state import ClusterState

__all__ = ["MAX_FLOWS", "Snapshot", "Window", "close_window", "component", "open_window", "snapshot"]

#: Largest component (background flows) a window is looked for in; beyond it, none (with more
#: flows one of them ends or a new one arrives within a few iterations anyway).
MAX_FLOWS = 24
_LOOK = 64  # arrivals looked at per slack link


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Snapshot:
    """A job's component at the start of a simulated iteration (the template's start)."""

    t_s: float
    links: np.ndarray  # L, sorted
    coflows: np.ndarray  # coflow ids of B (stable under the engine's renumbering), sorted
    rem_bytes: np.ndarray  # bytes left of B's flows at t_s, in coflow order
    slack: np.ndarray  # S: links of B outside L, sorted
    margin: np.ndarray  # per link of S: its capacity less the most its flows at t_s could load it


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Window:
    """An open quiet window: the held flows and what one iteration takes."""

    handle: int
    links: np.ndarray  # L and S: a job that starts on one of them cuts the window short
    sent_bytes: np.ndarray  # per held flow and iteration, in hold order
    link_idx: np.ndarray
    link_bytes: np.ndarray  # per link of link_idx and iteration
    held_links: np.ndarray  # the held flows' incidences: link, and the most they load it, bytes/s
    held_load: np.ndarray


def _load_max(sim: ClusterState, links: np.ndarray) -> np.ndarray:
    """Per link of ``links``: the most its active flows could put on it, each at the highest
    rate its route allows (its fraction there times its least capacity / fraction), bytes/s."""
    eng = sim.engine
    lk = eng._links
    n = eng._b_len[links]
    out = sim.held_load[links].copy()  # flows another window holds come back
    if not n.any():
        return out
    ent = np.repeat(eng._b_start[links] - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    fl, inc = eng._b_flow[ent], eng._b_inc[ent]
    u, inv = np.unique(fl, return_inverse=True)
    top = _top_rate(eng, u)
    return out + np.bincount(np.repeat(np.arange(links.size), n), weights=lk.frac[inc] * top[inv],
                             minlength=links.size)


def _top_rate(eng, flows: np.ndarray) -> np.ndarray:
    """The highest rate each of ``flows`` could have: the least capacity / fraction along its
    route, bytes/s."""
    f, lk = eng._f, eng._links
    lens = f.hi[flows] - f.lo[flows]
    inc = ranges(f.lo[flows], f.hi[flows])
    return np.minimum.reduceat(eng._ls.cap[lk.link[inc]] / lk.frac[inc], np.cumsum(lens) - lens)


def component(sim: ClusterState, footprint: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                              np.ndarray] | None:
    """``(L, B, S, margin)`` of a job with ``footprint`` (module docstring): ``S`` the slack
    links of ``B`` (no job on them, and ``margin``, their capacity less the most their active
    flows could put on them, >= 0), through which ``L`` does not grow. None when a job other
    than this one owns a link of ``L`` or ``B`` is larger than `MAX_FLOWS`."""
    eng = sim.engine
    f, lk = eng._f, eng._links
    on = sim.quiet_mark
    links = np.asarray(footprint, np.int64)
    on[links] = True
    frontier, flows = links, np.zeros(0, np.int64)
    slack, margin = [], []
    try:
        while frontier.size:
            new = active_on(eng, frontier)
            new = new[~np.isin(new, flows, assume_unique=True)] if flows.size else new
            if not new.size:
                break
            flows = np.union1d(flows, new)
            if flows.size > MAX_FLOWS:
                return None
            nl = np.unique(lk.link[ranges(f.lo[new], f.hi[new])])
            nl = nl[~on[nl]]
            on[nl] = True
            m = eng._ls.cap[nl] - _load_max(sim, nl)
            # strictly below capacity (no flow's bottleneck), or a link of one flow (of B)
            ok = (sim.owners[nl] == 0) & ((m > 1e-9 * eng._ls.cap[nl]) | ((m >= 0) & (eng._b_len[nl] == 1)))
            slack.append(nl[ok])
            margin.append(m[ok])
            frontier = nl[~ok]
            links = np.concatenate([links, frontier])
    finally:
        on[links] = False
        for x in slack:
            on[x] = False
    links = np.sort(links)
    own = sim.owners[links]
    mine = np.isin(links, footprint, assume_unique=True)
    if np.any(own[mine] != 1) or np.any(own[~mine] != 0) or sim.held_count[links].any():
        return None  # another job, or flows another window holds, on L
    s_links = np.concatenate(slack) if slack else np.zeros(0, np.int64)
    s_margin = np.concatenate(margin) if margin else np.zeros(0)
    o = np.argsort(s_links)
    return links, flows, s_links[o], s_margin[o]


def snapshot(sim: ClusterState, footprint: np.ndarray, now: float) -> Snapshot | None:
    """The template's start for a job about to simulate an iteration, or None (no window can
    follow it)."""
    comp = component(sim, footprint)
    if comp is None:
        return None
    links, flows, s_links, s_margin = comp
    eng = sim.engine
    cof = eng._f.coflow[flows]
    order = np.argsort(cof, kind="stable")
    return Snapshot(t_s=now, links=links, coflows=cof[order], rem_bytes=remaining_bytes(eng, flows[order]),
                    slack=s_links, margin=s_margin)


def _quiet_until(sim: ClusterState, tpl: Snapshot) -> float:
    """The first time from the template's start at which a background arrival could change the
    component: an arrival on ``L``, or on a slack link the one that would use up its margin."""
    bg = sim.bg
    ptr, times, load = bg.link_ptr, bg.link_times, bg.link_load_max
    nxt = math.inf
    for lnk in tpl.links.tolist():
        a, b = int(ptr[lnk]), int(ptr[lnk + 1])
        if a < b:
            i = a + int(np.searchsorted(times[a:b], tpl.t_s, side="left"))
            if i < b and times[i] < nxt:
                nxt = float(times[i])
    for lnk, m in zip(tpl.slack.tolist(), tpl.margin.tolist(), strict=True):
        a, b = int(ptr[lnk]), int(ptr[lnk + 1])
        if a < b:
            i = a + int(np.searchsorted(times[a:b], tpl.t_s, side="left"))
            j = min(b, i + _LOOK)
            if i < j and times[i] < nxt:
                over = np.flatnonzero(np.cumsum(load[i:j]) > m)
                if over.size:
                    nxt = min(nxt, float(times[i + over[0]]))
                elif j < b:  # not looked further: as if the next one used it up
                    nxt = min(nxt, float(times[j]))
    return nxt


def open_window(sim: ClusterState, footprint: np.ndarray, tpl: Snapshot, now: float, left: int,
                extra: tuple[np.ndarray, np.ndarray]) -> tuple[int, float, Window] | None:
    """At the end of the template iteration: ``(k, T, window)`` with ``B`` held, or None (the
    template was not clean, or not even one iteration fits). ``extra``: the job's own bytes in
    one iteration, ``(links, bytes)``."""
    comp = component(sim, footprint)
    if comp is None:
        return None
    links, flows, s_links, _ = comp
    if links.size != tpl.links.size or not np.array_equal(links, tpl.links) \
            or s_links.size != tpl.slack.size or not np.array_equal(s_links, tpl.slack):
        return None
    eng = sim.engine
    cof = eng._f.coflow[flows]
    order = np.argsort(cof, kind="stable")
    flows, cof = flows[order], cof[order]
    if cof.size != tpl.coflows.size or not np.array_equal(cof, tpl.coflows):
        return None
    T = now - tpl.t_s
    watch = np.union1d(links, s_links)
    if not T > 0 or float(sim.link_stamp[watch].max()) >= tpl.t_s:
        return None  # a job started or ended on L or S during the template
    nxt = _quiet_until(sim, tpl)
    if nxt <= now:
        return None  # a flow arrived during the template
    k = left
    if math.isfinite(nxt):
        ka = math.floor((nxt - now) / T)
        if now + ka * T >= nxt:
            ka -= 1
        k = min(k, ka)
    rem = remaining_bytes(eng, flows)
    sent = tpl.rem_bytes - rem
    moving = sent > 0
    if moving.any():  # each flow of B keeps more than one iteration's bytes at the end
        k = min(k, int(np.min(np.floor(rem[moving] / sent[moving]))) - 1)
    if k < 1:
        return None
    # an iteration's bytes by link: the job's (the same in every iteration, whatever the rates:
    # every flow sends its size) and those B's flows send
    f, lk = eng._f, eng._links
    inc = ranges(f.lo[flows], f.hi[flows])
    idx, inv = np.unique(np.concatenate([extra[0], lk.link[inc]]), return_inverse=True)
    w = np.concatenate([extra[1], np.repeat(sent, f.hi[flows] - f.lo[flows]) * lk.frac[inc]])
    per = np.bincount(inv, weights=w, minlength=idx.size)
    keep = per > 0
    hl = lk.link[inc]
    top = _top_rate(eng, flows)
    hw = lk.frac[inc] * np.repeat(top, f.hi[flows] - f.lo[flows])
    handle = -1
    if flows.size:
        handle = hold_flows(eng, flows)
        np.add.at(sim.held_load, hl, hw)
        np.add.at(sim.held_count, hl, 1)
    return k, T, Window(handle=handle, links=watch, sent_bytes=sent, link_idx=idx[keep],
                        link_bytes=per[keep], held_links=hl, held_load=hw)


def close_window(sim: ClusterState, window: Window, k: int) -> None:
    """Put the window's held flows back, ``k`` iterations' bytes fewer."""
    if window.handle >= 0:
        resume_flows(sim.engine, window.handle, window.sent_bytes * k)
        np.subtract.at(sim.held_load, window.held_links, window.held_load)
        np.subtract.at(sim.held_count, window.held_links, 1)
