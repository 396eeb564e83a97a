# The kubernetes client loads only the modules the process uses (clusters/lazy_kubernetes.py):
# only clusters/ imports kubernetes, so this runs before any of the portal's modules does.
from clusters import lazy_kubernetes

lazy_kubernetes.install()
