"""The ``network:`` section and ``--network``: scenario, runner, CLI and the report figure."""

import copy
import json

import numpy as np
import pytest

from flowherd.cli import main
from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping
from flowherd.errors import ConfigError
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router

SCENARIO = {
    "seed": 1,
    "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "900GB/s", "leaves": 2, "spines": 1,
               "oversubscription": 4, "link_latency": "1us"},
    "workload": {"jobs": [
        {"name": "a", "tenant": "t", "kind": "training", "model": "llama3-8b", "gpus": 16,
         "parallelism": {"tp": 8, "pp": 1, "dp": 2}, "seq_len": 4096, "micro_batch": 1,
         "global_batch": 32, "iterations": 3, "submit": "0s"},
        {"name": "b", "tenant": "t", "kind": "training", "model": "llama3-8b", "gpus": 16,
         "parallelism": {"tp": 8, "pp": 1, "dp": 2}, "seq_len": 4096, "micro_batch": 1,
         "global_batch": 32, "iterations": 3, "submit": "0s"}]},
    "placement": {"method": "spread"},
    "simulation": {"fidelity": "collective", "horizon": "1h"},
}


def _jcts(run):
    return [j["jct_s"] for j in run.jobs]


def test_a_scenario_without_network_is_ideal_and_ideal_is_unchanged():
    plain = scenario_from_mapping(SCENARIO)
    ideal = scenario_from_mapping({**SCENARIO, "network": {"model": "ideal"}})
    assert plain.network.ideal and ideal.network.ideal
    assert _jcts(run_scenario(plain, solo=False)) == _jcts(run_scenario(ideal, solo=False))


def test_the_embedded_default_and_the_benchmark_scenarios_say_roce():
    # issue 13: the model that matches a GPU back-end fabric (lossless RoCE) is the default of the
    # embedded scenario and the benchmarks; since an omitted section stays ideal (the test above:
    # a scenario written before keeps its numbers), each of them names it
    from pathlib import Path

    from flowherd.experiments.scenario import EMBEDDED, read_scenario_mapping

    bench = sorted((Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios").glob("*.yaml"))
    assert len(bench) >= 6
    for name in [*EMBEDDED, *map(str, bench)]:
        net = network_from_mapping(read_scenario_mapping(name).get("network"), field="network")
        assert net.model == "roce" and net == network_from_mapping("roce", field="network"), name


def test_congestion_models_slow_jobs_sharing_an_oversubscribed_uplink():
    ideal = _jcts(run_scenario(scenario_from_mapping(SCENARIO), solo=False))
    for net in ("roce", {"model": "tcp", "switch": "tomahawk2"}):
        slow = _jcts(run_scenario(scenario_from_mapping({**SCENARIO, "network": net}), solo=False))
        assert all(s > i for s, i in zip(slow, ideal, strict=True))


def test_bad_network_section_names_the_field():
    bad = copy.deepcopy(SCENARIO)
    bad["network"] = {"model": "roce", "pfc_xof": "1MB"}
    with pytest.raises(ConfigError, match=r"network.pfc_xof.*did you mean 'pfc_xoff'"):
        scenario_from_mapping(bad)


def test_collective_cli_takes_network(capsys, tmp_path):
    fab = tmp_path / "fab.yaml"
    fab.write_text("kind: leaf-spine\nservers: 4\ngpus_per_server: 1\nleaves: 2\nspines: 1\n"
                   "nic_bandwidth: 100Gbps\noversubscription: 2\n")
    times = {}
    for net in ("ideal", "roce", "tcp"):
        assert main(["collective", "--op", "alltoall", "--size", "64MiB", "--gpus", "4", "--fabric",
                     str(fab), "--network", net, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["network"] == net
        times[net] = d["time_s"]
    assert times["ideal"] < times["roce"] and times["ideal"] < times["tcp"]
    net_file = tmp_path / "net.yaml"
    net_file.write_text("network: {model: tcp, port_buffer: 100KB, ecn_k: 30KB}\n")
    assert main(["collective", "--op", "alltoall", "--size", "64MiB", "--gpus", "4", "--fabric",
                 str(fab), "--network", str(net_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["network"] == "tcp"
    assert main(["collective", "--op", "alltoall", "--size", "1MiB", "--gpus", "4", "--fabric",
                 str(fab), "--network", "rocee"]) == 2
    assert "did you mean 'roce'" in capsys.readouterr().err


def test_simulate_cli_takes_network(capsys, tmp_path):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    out = {}
    for net in ("ideal", "roce"):
        assert main(["simulate", str(path), "--network", net, "--json"]) == 0
        out[net] = json.loads(capsys.readouterr().out)
    assert out["roce"] != out["ideal"]


def test_network_figure_shows_queues_pauses_marks_and_drops(tmp_path):
    from flowherd.report.network_fig import write_network_figure

    fab = leaf_spine(servers=16, gpus_per_server=1, leaves=2, spines=1, nvlink_bandwidth_bytes_per_s=None,
                     nic_bandwidth_bytes_per_s=12.5e9, oversubscription=2)
    eng = Engine(fab, make_router("shortest", fab),
                 network=network_from_mapping({"model": "roce", "pfc_xoff": "50KB", "pfc_xon": "40KB"}))
    for i in range(8):
        eng.add_coflow(8 + i, 0, 2e6, at_s=0.0)
    eng.add_coflow(15, 1, 4e6, at_s=0.0)
    eng.run()
    st = eng.network.stats(eng.now_s)
    assert st.pause_s.sum() > 0 and st.ecn_marked_bytes.sum() > 0 and st.queue_max_bytes.max() > 0
    assert np.all(st.queue_mean_bytes <= st.queue_max_bytes + 1e-9)
    png = write_network_figure(st, fab, tmp_path / "net.png")
    assert png.stat().st_size > 10_000


def test_per_link_outputs_reach_the_store_and_the_report(tmp_path):
    pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")
    from flowherd.experiments.store import ResultStore
    from flowherd.experiments.sweep import run_sweep, sweep_from_mapping
    from flowherd.report.data import load_report_data, network_panels
    from flowherd.report.html import render_html

    base = {**SCENARIO, "simulation": {"fidelity": "collective", "horizon": "30s"}}
    sweep = sweep_from_mapping({"name": "net", "base": base, "seeds": 1,
                                "points": [{"network": "ideal"}, {"network": "roce"}]})
    out = run_sweep(sweep, tmp_path, backend="inline")
    assert (out.ok, out.failed) == (2, 0)
    with ResultStore(tmp_path, read_only=True) as store:
        runs = {r["params"]["network"]: r["run_id"] for r in store.runs()}
        rows = {m: store.network_links(rid) for m, rid in runs.items()}
    assert rows["ideal"] == []  # ideal records nothing
    roce = rows["roce"]
    assert roce and all(r["model"] == "roce" for r in roce)
    cfg = network_from_mapping("roce")
    for r in roce:  # a lossless fabric drops nothing; a queue never passes PFC Xoff
        assert r["drop_bytes"] == 0.0
        assert 0.0 <= r["queue_mean_bytes"] <= r["queue_max_bytes"] <= cfg.pfc_xoff_bytes + 1e-6
        assert len(r["series_t_s"]) == len(r["series_queue_bytes"])
        assert np.all(np.diff(r["series_t_s"]) >= 0)
        assert len(r["pause_t_s"]) == len(r["pause_dur_s"])
        assert sum(r["pause_dur_s"]) == pytest.approx(r["pause_s"], abs=1e-12)
    assert max(r["queue_max_bytes"] for r in roce) > 0 and sum(r["ecn_marked_bytes"] for r in roce) > 0
    data = load_report_data(tmp_path)
    views = {v.network[0]["model"] if v.network else "ideal": v for v in data.detail}
    assert network_panels(views["ideal"]) is None
    p = network_panels(views["roce"])
    assert p is not None and p.queue
    by_name = {r["name"]: r for r in roce}
    for name, t, q in p.queue:  # the figure's series are the stored ones, from 0 at time 0
        assert t[0] == 0.0 and q[0] == 0.0
        assert q[1:].tolist() == by_name[name]["series_queue_bytes"]
    assert p.ecn_marked_bytes == {n: by_name[n]["ecn_marked_bytes"] for n in p.ecn_marked_bytes}
    assert max(p.ecn_marked_bytes.values()) == max(r["ecn_marked_bytes"] for r in roce)
    assert "Network: " in render_html(data)
