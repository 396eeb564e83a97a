import datetime

import factory
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.models import Cluster, GpuCapacity
from tenants.models import Membership, QuotaGrant, QuotaRequest, Team


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ["username"]
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class AdminFactory(UserFactory):
    is_staff = True


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ["name"]

    name = factory.Sequence(lambda n: f"cluster-{n}")
    display_name = factory.LazyAttribute(lambda c: c.name.title())


class GpuCapacityFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuCapacity

    cluster = factory.SubFactory(ClusterFactory)
    resource_name = "nvidia.com/gpu"
    gpu_model = "NVIDIA-A100-SXM4-80GB"
    allocatable = 32


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ["slug"]

    slug = factory.Sequence(lambda n: f"team-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.replace("-", " ").title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.MEMBER


class QuotaRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaRequest

    team = factory.SubFactory(TeamFactory)
    cluster = factory.SubFactory(ClusterFactory)
    gpu_resource = "nvidia.com/gpu"
    gpus = 4
    starts_on = factory.LazyFunction(timezone.localdate)
    ends_on = factory.LazyAttribute(lambda r: r.starts_on + datetime.timedelta(days=30))
    justification = "Fine-tuning the support model."
    requested_by = factory.SubFactory(UserFactory)


class QuotaGrantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QuotaGrant

    request = factory.SubFactory(QuotaRequestFactory, state=QuotaRequest.State.APPROVED)
    team = factory.SelfAttribute("request.team")
    cluster = factory.SelfAttribute("request.cluster")
    gpu_resource = factory.SelfAttribute("request.gpu_resource")
    gpus = factory.SelfAttribute("request.gpus")
    starts_on = factory.SelfAttribute("request.starts_on")
    ends_on = factory.SelfAttribute("request.ends_on")
    granted_by = factory.SubFactory(AdminFactory)
