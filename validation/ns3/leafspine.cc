// Packet-level reference for flowherd's congestion model (validation/README.md).
//
// A leaf-spine fabric with one spine (so no ECMP: the path of every flow is unique, as in the
// flowherd fabric built from the same case), TCP (DCTCP or NewReno) with ECN marking at every
// egress port (one threshold K, the DCTCP configuration of Alizadeh et al., SIGCOMM 2010,
// Sec. 3.1) and a per-port buffer. Flows are read from a case file and start at
// their time or when every flow they depend on has been received in full (a ring AllReduce
// step waits for the previous step's chunk, as in NCCL).
//
// Input (argv[1]), whitespace separated:
//   hosts H  leaves L  host_gbps G  uplink_gbps U  delay_us D  buffer_bytes B  ecn_k_bytes K
//   tcp dctcp|newreno  min_rto_us R  rwnd_bytes W  flows N
//   then N lines: id src dst size_bytes start_s ndeps dep...
// Host NICs queue without limit (and mark at K); switch ports have the configured buffer.
// Output (stdout): one line per flow "fct id start_s first_byte_s end_s", per flow that took a
// retransmission timeout "rto id timeouts min_cwnd_bytes" (the sender's TCP entering CA_LOSS;
// min_cwnd_bytes: the smallest congestion window it had), then per port
// "port name drops_pkts marks_pkts", then "events N".
// Build: g++ -O2 -std=c++17 leafspine.cc $(pkg-config --cflags --libs ns3-core ns3-network
//   ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control)

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace ns3;

struct FlowSpec
{
    int id, src, dst;
    uint64_t size;
    double start;
    std::vector<int> deps;
    int waiting = 0;
    double t_start = -1, t_first = -1, t_end = -1;
    uint64_t got = 0;
    int rtos = 0;
    uint32_t min_cwnd = 0xffffffffu;
    std::vector<int> dependents;
};

static std::vector<FlowSpec> g_flows;
static std::vector<Ptr<Node>> g_hosts;
static std::vector<Ipv4Address> g_addr;
static const uint16_t kBasePort = 10000;

static void StartFlow(int i);

// passive traces of the sender's TCP: timeouts (CA_LOSS entries) and the smallest window
static void
OnCongState(int i, TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t now)
{
    if (now == TcpSocketState::CA_LOSS)
        g_flows[i].rtos++;
}

static void
OnCwnd(int i, uint32_t, uint32_t now)
{
    g_flows[i].min_cwnd = std::min(g_flows[i].min_cwnd, now);
}

static void
HookSocket(int i, Ptr<Application> app)
{
    Ptr<Socket> s = DynamicCast<BulkSendApplication>(app)->GetSocket();
    if (!s)  // the application makes its socket when it starts
    {
        Simulator::Schedule(NanoSeconds(1), &HookSocket, i, app);
        return;
    }
    s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&OnCongState, i));
    s->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&OnCwnd, i));
}

static void
TryRelease(int i)
{
    FlowSpec& f = g_flows[i];
    if (f.waiting > 0)
        return;
    double now = Simulator::Now().GetSeconds();
    double at = std::max(now, f.start);
    Simulator::Schedule(Seconds(at - now), &StartFlow, i);
}

static void
StartFlow(int i)
{
    FlowSpec& f = g_flows[i];
    f.t_start = Simulator::Now().GetSeconds();
    if (f.size == 0 || f.src == f.dst)
    {
        f.t_first = f.t_end = f.t_start;
        for (int d : f.dependents)
        {
            g_flows[d].waiting--;
            TryRelease(d);
        }
        return;
    }
    BulkSendHelper bulk("ns3::TcpSocketFactory",
                        InetSocketAddress(g_addr[f.dst], kBasePort + f.id));
    bulk.SetAttribute("MaxBytes", UintegerValue(f.size));
    bulk.SetAttribute("SendSize", UintegerValue(1448 * 8));
    ApplicationContainer app = bulk.Install(g_hosts[f.src]);
    app.Start(Seconds(0));
    Simulator::Schedule(NanoSeconds(1), &HookSocket, i, app.Get(0));
}

static void
OnRx(int i, Ptr<const Packet> p, const Address&)
{
    FlowSpec& f = g_flows[i];
    if (f.t_first < 0)
        f.t_first = Simulator::Now().GetSeconds();
    f.got += p->GetSize();
    if (f.got >= f.size && f.t_end < 0)
    {
        f.t_end = Simulator::Now().GetSeconds();
        for (int d : f.dependents)
        {
            g_flows[d].waiting--;
            TryRelease(d);
        }
    }
}

int
main(int argc, char* argv[])
{
    if (argc < 2)
    {
        std::cerr << "usage: leafspine CASEFILE\n";
        return 2;
    }
    std::ifstream in(argv[1]);
    std::map<std::string, std::string> kv;
    std::string key, val;
    for (int k = 0; k < 11; ++k)
    {
        in >> key >> val;
        kv[key] = val;
    }
    int H = std::stoi(kv["hosts"]);
    int L = std::stoi(kv["leaves"]);
    double G = std::stod(kv["host_gbps"]);
    double U = std::stod(kv["uplink_gbps"]);
    double D = std::stod(kv["delay_us"]);
    uint64_t B = std::stoull(kv["buffer_bytes"]);
    uint64_t K = std::stoull(kv["ecn_k_bytes"]);
    std::string tcp = kv["tcp"];
    double R = std::stod(kv["min_rto_us"]);
    int N = std::stoi(kv["flows"]);
    uint64_t rwnd = std::stoull(kv["rwnd_bytes"]);
    g_flows.resize(N);
    for (int n = 0; n < N; ++n)
    {
        FlowSpec& f = g_flows[n];
        int nd;
        in >> f.id >> f.src >> f.dst >> f.size >> f.start >> nd;
        f.deps.resize(nd);
        for (int j = 0; j < nd; ++j)
            in >> f.deps[j];
    }
    for (int n = 0; n < N; ++n)
    {
        g_flows[n].waiting = (int)g_flows[n].deps.size();
        for (int d : g_flows[n].deps)
            g_flows[d].dependents.push_back(n);
    }

    const uint32_t pkt = 1500;
    Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                       StringValue(tcp == "dctcp" ? "ns3::TcpDctcp" : "ns3::TcpNewReno"));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(8 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(rwnd));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MicroSeconds(R)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(10)));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(MilliSeconds(10)));
    // a zero window probes after one RTO, as Linux does (ns-3 waits 6 s by default)
    Config::SetDefault("ns3::TcpSocket::PersistTimeout", TimeValue(MicroSeconds(R)));
    if (tcp == "dctcp")
        Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));
    // switch ports mark ECT packets whose sojourn exceeds K / capacity (the DCTCP threshold K,
    // as time) and drop only when the buffer is full: CoDel with its own drop law switched off
    // (target and interval far beyond any run). RED would drop every non-ECT packet (SYNs,
    // retransmissions, RFC 3168 Sec. 6.1.5) above K, which switches configured for DCTCP avoid.
    Config::SetDefault("ns3::CoDelQueueDisc::UseEcn", BooleanValue(tcp == "dctcp"));
    Config::SetDefault("ns3::CoDelQueueDisc::Target", TimeValue(Seconds(100)));
    Config::SetDefault("ns3::CoDelQueueDisc::Interval", TimeValue(Seconds(1000)));
    Config::SetDefault("ns3::PointToPointNetDevice::TxQueue", StringValue("ns3::DropTailQueue<Packet>"));
    Config::SetDefault("ns3::DropTailQueue<Packet>::MaxSize", QueueSizeValue(QueueSize("2p")));

    NodeContainer hosts, leaves, spine;
    hosts.Create(H);
    leaves.Create(L);
    spine.Create(1);
    InternetStackHelper stack;
    stack.InstallAll();
    auto port_qdisc = [&](double gbps) {
        TrafficControlHelper t;
        double ce_s = tcp == "dctcp" ? (double)K * 8.0 / (gbps * 1e9) : 1000.0;
        t.SetRootQueueDisc("ns3::CoDelQueueDisc", "MaxSize",
                           QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, std::max<uint64_t>(2 * pkt, B))),
                           "CeThreshold", TimeValue(Seconds(ce_s)));
        return t;
    };
    TrafficControlHelper tchHostPort = port_qdisc(G);
    TrafficControlHelper tchUp = port_qdisc(U);
    // host NICs: a host does not drop or mark its own packets; the receive window (rwnd_bytes,
    // about 1.5 bandwidth-delay products) keeps what a flow queues there small, as Linux's TCP
    // small queues do
    TrafficControlHelper tchHost;
    tchHost.SetRootQueueDisc("ns3::CoDelQueueDisc", "MaxSize",
                             QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, 1u << 30)));
    PointToPointHelper hostLink, upLink;
    std::ostringstream gr, ur, dl;
    gr << G << "Gbps";
    ur << U << "Gbps";
    dl << D << "us";
    hostLink.SetDeviceAttribute("DataRate", StringValue(gr.str()));
    hostLink.SetChannelAttribute("Delay", StringValue(dl.str()));
    upLink.SetDeviceAttribute("DataRate", StringValue(ur.str()));
    upLink.SetChannelAttribute("Delay", StringValue(dl.str()));
    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.252");
    std::vector<std::pair<std::string, Ptr<QueueDisc>>> ports;
    int per_leaf = H / L;
    g_addr.resize(H);
    for (int h = 0; h < H; ++h)
    {
        g_hosts.push_back(hosts.Get(h));
        int l = h / per_leaf;
        NetDeviceContainer dev = hostLink.Install(hosts.Get(h), leaves.Get(l));
        QueueDiscContainer qh = tchHost.Install(dev.Get(0));
        QueueDiscContainer q = tchHostPort.Install(dev.Get(1));
        ports.push_back({"host" + std::to_string(h) + "->leaf" + std::to_string(l), qh.Get(0)});
        ports.push_back({"leaf" + std::to_string(l) + "->host" + std::to_string(h), q.Get(0)});
        Ipv4InterfaceContainer ifc = addr.Assign(dev);
        g_addr[h] = ifc.GetAddress(0);
        addr.NewNetwork();
    }
    for (int l = 0; l < L; ++l)
    {
        NetDeviceContainer dev = upLink.Install(leaves.Get(l), spine.Get(0));
        QueueDiscContainer q = tchUp.Install(dev);
        ports.push_back({"leaf" + std::to_string(l) + "->spine", q.Get(0)});
        ports.push_back({"spine->leaf" + std::to_string(l), q.Get(1)});
        addr.Assign(dev);
        addr.NewNetwork();
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    for (int n = 0; n < N; ++n)
    {
        FlowSpec& f = g_flows[n];
        PacketSinkHelper sink("ns3::TcpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), kBasePort + f.id));
        ApplicationContainer app = sink.Install(hosts.Get(f.dst));
        app.Start(Seconds(0));
        app.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, n));
    }
    for (int n = 0; n < N; ++n)
        TryRelease(n);
    Simulator::Stop(Seconds(20));
    Simulator::Run();
    for (const FlowSpec& f : g_flows)
        printf("fct %d %.9f %.9f %.9f\n", f.id, f.t_start, f.t_first, f.t_end);
    for (const FlowSpec& f : g_flows)
        if (f.rtos)
            printf("rto %d %d %u\n", f.id, f.rtos, f.min_cwnd);
    for (auto& [name, q] : ports)
    {
        const QueueDisc::Stats& s = q->GetStats();
        printf("port %s %u %u\n", name.c_str(), s.nTotalDroppedPackets, s.nTotalMarkedPackets);
    }
    Simulator::Destroy();
    return 0;
}
