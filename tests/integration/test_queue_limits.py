"""The figures the job side reads to refuse a job that could never run in Kueue mode: a team's
own GPUs per model and the most its queues can admit, from its grants and queue policy."""

import pytest

from reconcile.desired_state import team_queue_limits
from tests import factories

pytestmark = pytest.mark.django_db

A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"


def test_own_gpus_per_model_and_the_ceiling_from_grants_and_policy(team, cluster, admin):
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=A100, allocatable=12)
    factories.GpuModelCapacityFactory(cluster=cluster, gpu_model=H100, allocatable=4)
    factories.QuotaGrantFactory(
        request__team=team, request__cluster=cluster, request__gpus=4, request__gpu_model=A100
    )
    factories.QuotaGrantFactory(request__team=team, request__cluster=cluster, request__gpus=2)
    factories.TeamQueuePolicyFactory(team=team, cluster=cluster, borrowing_limit=1)

    limits = team_queue_limits(team=team, cluster=cluster)

    assert limits.own == {("nvidia.com/gpu", A100): 4, ("nvidia.com/gpu", ""): 2}
    # Own 6, plus 1 on each of 3 GPU flavors (A100, H100, any).
    assert limits.ceiling == {"nvidia.com/gpu": 9}
    assert limits.policy.borrowing_limit == 1


def test_without_a_policy_the_ceiling_is_the_clusters_capacity(team, cluster):
    limits = team_queue_limits(team=team, cluster=cluster)

    assert limits.own == {}
    assert limits.ceiling == {"nvidia.com/gpu": 16}
    assert limits.policy.borrowing_limit is None
