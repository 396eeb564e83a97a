module gpuportal.io/devcluster/gateway-api

go 1.26.0

require sigs.k8s.io/gateway-api v1.6.3
