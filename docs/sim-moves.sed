# Module paths before and after the simulator was split into flowherd.engine (with
# flowherd.engine.network) and flowherd.cluster. Apply to a file that still names the old paths:
#     sed -E -i -f docs/sim-moves.sed FILE...
# Longer names first (cluster_runs before cluster), dotted module paths, then file paths.
s/flowherd\.sim\.network\b/flowherd.engine.network/g
s/flowherd\.sim\.cluster_runs\b/flowherd.cluster.job_run/g
s/flowherd\.sim\.cluster_quiet\b/flowherd.cluster.quiet/g
s/flowherd\.sim\.cluster_records\b/flowherd.cluster.records/g
s/flowherd\.sim\.cluster_background\b/flowherd.cluster.background/g
s/flowherd\.sim\.cluster\b/flowherd.cluster.simulate/g
s/flowherd\.sim\.(placement|pacing|control_api|control_types|collective|executor)\b/flowherd.cluster.\1/g
s/flowherd\.sim\.engine\b/flowherd.engine.core/g
s/flowherd\.sim\.(aot_build|aot|pages|results|input_memo|hold|coflow_input|step_kernels|flow_heap|incidence|coflow_batch|bottleneck|allocation|fairshare|event_loop|_kernels_aot)\b/flowherd.engine.\1/g
s/from flowherd\.sim import cluster\b/from flowherd.cluster import simulate as cluster/g
s/from flowherd\.sim import (Engine|SimResult|max_min_rates|event_loop|aot)\b/from flowherd.engine import \1/g
s/flowherd\.sim\b/flowherd.engine/g
s#(flowherd/)?sim/network/#\1engine/network/#g
s#(flowherd/)?sim/cluster_runs\.py#\1cluster/job_run.py#g
s#(flowherd/)?sim/cluster_quiet\.py#\1cluster/quiet.py#g
s#(flowherd/)?sim/cluster_records\.py#\1cluster/records.py#g
s#(flowherd/)?sim/cluster_background\.py#\1cluster/background.py#g
s#(flowherd/)?sim/cluster\.py#\1cluster/simulate.py#g
s#(flowherd/)?sim/(placement|pacing|control_api|control_types|collective|executor)\.py#\1cluster/\2.py#g
s#(flowherd/)?sim/engine\.py#\1engine/core.py#g
s#(flowherd/)?sim/(aot_build|aot|pages|results|input_memo|hold|coflow_input|step_kernels|flow_heap|incidence|coflow_batch|bottleneck|allocation|fairshare|event_loop)\.py#\1engine/\2.py#g
s#src/flowherd/sim/#src/flowherd/engine/#g
s#tests/sim/(network_reference|test_ack_path|test_network[a-z_]*|test_rates_core)\.py#tests/engine/network/\1.py#g
s#tests/sim/(exact_cases|test_allocation|test_engine|test_engine_exact|test_fairshare|test_flow_heap|test_local_core|test_min_duration|test_pages)\.py#tests/engine/\1.py#g
s#tests/sim/(test_cluster|test_collective_batch|test_collective_fidelity|test_collective_take|test_control_api|test_executor_launch|test_pacers|test_phase_fidelity|test_placement|test_quiet_windows)\.py#tests/cluster/\1.py#g
s#tests/sim/test_astra_resnet\.py#tests/benchmarks/test_astra_resnet.py#g
