"""What ``clusters`` tells the apps above it. ``clusters`` imports no app, so an app that must
act on a change made here (the capacity sync) connects a receiver in its ``AppConfig.ready``."""

from django.dispatch import Signal

# The capacity sync changed what a cluster's GPU nodes offer: a GPU kind's or a GPU model's
# figures, or a model that came or went. Sent inside the sync's transaction, with the cluster's
# row locked, as ``capacity_changed.send(sender=Cluster, cluster_id=..., models_changed=...)``
# (``models_changed``: a GPU model appeared or disappeared). Receivers only record and enqueue
# (after commit); they never talk to a cluster.
capacity_changed = Signal()

# An admin changed a cluster's settings in the Django admin. Sent inside the change's
# transaction as ``settings_changed.send(sender=Cluster, cluster=..., before=..., actor=...)``
# (``before``: the row as it was, unsaved). Receivers record it and enqueue what follows
# (after commit): the cluster's admission policies and team namespaces follow its settings.
settings_changed = Signal()
