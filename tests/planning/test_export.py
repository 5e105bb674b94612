"""Plans a cluster can apply: each export parsed by the format's own tool or schema."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from flowherd.cli import main
from flowherd.errors import ConfigError
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.export import compress_hostlist, export_plan, host_names
from flowherd.planning.plan import JobPlan, Plan

hostlist = pytest.importorskip("hostlist")  # python-hostlist: Slurm's hostlist syntax


@pytest.fixture(scope="module")
def fabric():
    return leaf_spine(servers=6, gpus_per_server=8, leaves=3, spines=2)


@pytest.fixture(scope="module")
def plan(fabric):
    # job a: 12 ranks over servers 1 and 2, rank order not the GPU order (ranks 0-3 on server 2)
    a = tuple(range(16, 20)) + tuple(range(8, 16))
    b = tuple(range(40, 48)) + tuple(range(24, 32))  # servers 5 then 3
    return Plan(method="test", objective=1.0, lower_bound=1.0, gap=0.0, solve_s=0.0, jobs=(
        JobPlan(name="a", gpus=tuple(sorted(a)), rank_to_gpu=a, start_s=0.0, predicted_iteration_s=1.0,
                predicted_jct_s=1.0),
        JobPlan(name="b/x", gpus=tuple(sorted(b)), rank_to_gpu=b, start_s=0.0, predicted_iteration_s=1.0,
                predicted_jct_s=1.0)))


@pytest.mark.parametrize("hosts", [["n01", "n02", "n03", "n07", "n10"], ["gpu-0009", "gpu-0010", "rack"],
                                   ["a1", "a01", "a2", "b5"]])
def test_the_hostlist_expression_expands_to_the_hosts(hosts):
    assert sorted(hostlist.expand_hostlist(compress_hostlist(hosts))) == sorted(hosts)


def test_slurm_nodelist_and_hostfile_give_the_plans_hosts_and_rank_order(tmp_path, fabric, plan):
    export_plan(plan, fabric, "slurm", tmp_path)
    hosts = host_names(fabric)
    for jp, stem in zip(plan.jobs, ("a", "b_x"), strict=True):
        script = (tmp_path / f"{stem}.sbatch").read_text().splitlines()
        opts = dict(line[len("#SBATCH --"):].split("=", 1) for line in script
                    if line.startswith("#SBATCH --"))
        servers = sorted({int(fabric.gpu_server[g]) for g in jp.rank_to_gpu})
        assert sorted(hostlist.expand_hostlist(opts["nodelist"])) == [hosts[s] for s in servers]
        assert int(opts["nodes"]) == len(servers) and int(opts["ntasks"]) == len(jp.rank_to_gpu)
        assert opts["distribution"] == "arbitrary"
        lines = (tmp_path / f"{stem}.hostfile").read_text().splitlines()
        assert lines == [hosts[int(fabric.gpu_server[g])] for g in jp.rank_to_gpu]
    # job a's ranks 0-3 are GPUs 0-3 of node002; ranks 4-11 GPUs 0-7 of node001
    assert (tmp_path / "a.hostfile").read_text().splitlines()[:5] == ["node002"] * 4 + ["node001"]
    assert "  node002) export CUDA_VISIBLE_DEVICES=0,1,2,3 ;;" in (tmp_path / "a.sbatch").read_text()


def test_k8s_pod_specs_are_read_by_the_kubernetes_api_models(tmp_path, fabric, plan):
    k8s = pytest.importorskip("kubernetes")
    export_plan(plan, fabric, "k8s", tmp_path)
    api = k8s.client.ApiClient()
    pods = yaml.safe_load((tmp_path / "a.k8s.yaml").read_text())
    assert len(pods) == 2
    got = {}
    for pod in pods:
        spec = api._ApiClient__deserialize(pod["spec"], "V1PodSpec")
        meta = api._ApiClient__deserialize(pod["metadata"], "V1ObjectMeta")
        assert isinstance(spec, k8s.client.V1PodSpec) and meta.name.startswith("a-")
        term = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
            .node_selector_terms[0].match_expressions[0]
        assert (term.key, term.operator) == ("kubernetes.io/hostname", "In")
        env = {e.name: e.value for e in spec.containers[0].env}
        ranks = [int(r) for r in env["FLOWHERD_RANKS"].split(",")]
        assert spec.containers[0].resources.limits["nvidia.com/gpu"] == str(len(ranks))  # a Quantity
        assert env["WORLD_SIZE"] == "12" and env["NCCL_TOPO_FILE"].endswith(".xml")
        got[term.values[0]] = ranks
    assert got == {"node002": [0, 1, 2, 3], "node001": list(range(4, 12))}


# what NCCL's XML loaders accept (NVIDIA/nccl src/graph/xml.cc: ncclTopoXmlLoad*; topo.cc reads)
_CHILDREN = {"system": {"cpu"}, "cpu": {"pci", "nic"}, "pci": {"pci", "gpu", "nic", "pcilink"},
             "gpu": {"nvlink", "c2c"}, "nic": {"net"}, "net": set(), "nvlink": set(), "pcilink": set()}
_REQUIRED = {"cpu": {"numaid", "arch", "vendor", "familyid", "modelid"},
             "pci": {"busid", "class", "link_speed", "link_width"}, "gpu": {"dev", "sm", "rank", "gdr"},
             "nvlink": {"target", "count", "tclass"}, "net": {"name", "dev", "speed"}}
_INTS = {"gpu": ("dev", "sm", "rank", "gdr"), "nvlink": ("count",), "net": ("dev", "speed", "port", "gdr"),
         "cpu": ("numaid", "familyid", "modelid"), "pci": ("link_width",)}


def _check_nccl_xml(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == "system" and root.get("version") == "1"  # NCCL_TOPO_XML_VERSION
    for el in root.iter():
        for child in el:
            assert child.tag in _CHILDREN[el.tag], (el.tag, child.tag)  # others are ignored by NCCL
        assert len(el.attrib) <= 16 and all(len(v) < 255 for v in el.attrib.values())  # MAX_ATTR_COUNT
        assert _REQUIRED.get(el.tag, set()) <= set(el.attrib), (el.tag, el.attrib)
        for k in _INTS.get(el.tag, ()):
            if k in el.attrib:
                int(el.get(k))
    # a net sits in a nic, a nic in a pci (ncclTopoAddNic wants the parent's busid)
    for pci in root.iter("pci"):
        for nic in pci.findall("nic"):
            assert nic.findall("net")
    return root


def test_nccl_topology_xml_is_what_ncclsloaders_accept_with_the_fabrics_numbers(tmp_path, fabric, plan):
    export_plan(plan, fabric, "nccl", tmp_path)
    env = dict(line.split("=", 1) for line in (tmp_path / "a.nccl.env").read_text().splitlines()
               if not line.startswith("#"))
    assert set(env) == {"NCCL_TOPO_FILE"}  # the plan fixed no algorithm or protocol
    root = _check_nccl_xml((tmp_path / env["NCCL_TOPO_FILE"].rsplit("/", 1)[1]).read_text())
    gpus, nets = root.findall(".//gpu"), root.findall(".//net")
    assert [int(g.get("dev")) for g in gpus] == list(range(8)) and {g.get("sm") for g in gpus} == {"90"}
    assert len(nets) == 8 and {n.get("speed") for n in nets} == {"400000"}  # 400 Gbit/s NICs, in Mbit/s
    nvl = gpus[0].find("nvlink")
    assert nvl.get("tclass") == "0x068000"  # an NVSwitch (ncclTopoAddNvLinks)
    # NCCL's bandwidth for the links, count x SM90_NVLINK_BW (20.6 GB/s), is the fabric's NVLink rate
    nvlink_gbps = fabric.link_capacity_bytes_per_s[fabric.link_kind == 0].max() / 1e9
    assert int(nvl.get("count")) * 20.6 == pytest.approx(nvlink_gbps, rel=0.05)


def test_a_plan_that_fixes_algorithm_and_protocol_exports_them(tmp_path, fabric, plan):
    from dataclasses import replace

    fixed = replace(plan, info={"nccl": {"a": {"algo": "Ring", "proto": "Simple"}}})
    export_plan(fixed, fabric, "nccl", tmp_path)
    env = (tmp_path / "a.nccl.env").read_text()
    assert "NCCL_ALGO=Ring\n" in env and "NCCL_PROTO=Simple\n" in env
    assert "NCCL_ALGO=" not in (tmp_path / "b_x.nccl.env").read_text()


def test_bad_host_format_and_unknown_export_are_one_line(tmp_path, fabric, plan, capsys):
    with pytest.raises(ConfigError, match=r"\(--hosts\)"):
        export_plan(plan, fabric, "slurm", tmp_path, hosts_format="node")
    assert main(["plan", "default", "--export", "lsf", "--export-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown export 'lsf' (--export)" in err


def test_flowherd_plan_export_writes_a_hostfile_per_job(tmp_path, capsys):
    assert main(["plan", "default", "--method", "packed", "--export", "slurm", "--export-dir",
                 str(tmp_path)]) == 0
    assert "slurm: " in capsys.readouterr().out
    assert (tmp_path / "llama8b-a.hostfile").read_text().count("\n") == 24
