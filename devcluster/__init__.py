"""A local Kubernetes control plane with simulated GPU nodes, Prometheus and a DCGM
simulator, for the test suite and the demo. See devcluster/README.md."""
