"""What every kind of workload shares (batch jobs in ``gpujobs``, inference services in
``serving``): the container spec and its parsing, placement on the GPU nodes, admission and quota
checks, pod states and reasons, logs and events, the watcher's leader election, page helpers and
form fields. The workload kinds build on it and never import each other."""
