"""PromQL label matcher lists, as a cluster's DCGM exporter pin is written: what is accepted,
and the clear error for everything else. No database."""

import pytest
from django.core.exceptions import ValidationError

from clusters.models import Cluster
from core.validators import LabelMatcher, parse_label_matchers


@pytest.mark.parametrize(
    ("text", "matchers"),
    [
        ("", ()),
        ("{}", ()),
        ('job="dcgm-exporter"', (LabelMatcher("job", "=", "dcgm-exporter"),)),
        ("{job='dcgm-exporter'}", (LabelMatcher("job", "=", "dcgm-exporter"),)),
        (
            ' job = "dcgm-exporter" , namespace=~"gpu-operator|nvidia", ',
            (
                LabelMatcher("job", "=", "dcgm-exporter"),
                LabelMatcher("namespace", "=~", "gpu-operator|nvidia"),
            ),
        ),
        (
            'job="a,b", container!="tenant"',
            (LabelMatcher("job", "=", "a,b"), LabelMatcher("container", "!=", "tenant")),
        ),
        ('job="say \\"hi\\" \\\\ bye"', (LabelMatcher("job", "=", 'say "hi" \\ bye'),)),
    ],
)
def test_label_matcher_lists_are_parsed(text, matchers):
    assert parse_label_matchers(text) == matchers


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("job=dcgm-exporter", "Not a PromQL label matcher near 'job=dcgm-exporter'"),
        ('job="a" instance="b"', "Expected a comma before 'instance=\"b\"'"),
        ('job="a",,instance="b"', "Not a PromQL label matcher near ',instance"),
        ('1job="a"', "Not a PromQL label matcher"),
        ('job=="a"', "Not a PromQL label matcher"),
        ('job="a', "Not a PromQL label matcher"),
        ('__name__="DCGM_FI_DEV_GPU_UTIL"', "__name__ is one of Prometheus' own labels"),
        ('job=~"dcgm-(exporter"', "The regular expression of job does not compile"),
        ('job="a\\.b"', "Unsupported escape \\. in"),
        ('job!="tenant-pods"', "Name a value the exporter's series carry"),
        ('job=~".*"', "Name a value the exporter's series carry"),
        ('job=""', "Name a value the exporter's series carry"),
    ],
)
def test_anything_else_is_refused_saying_why(text, says):
    with pytest.raises(ValidationError) as refused:
        parse_label_matchers(text)
    assert says in refused.value.messages[0]


def test_the_cluster_field_refuses_a_bad_pin():
    field = Cluster._meta.get_field("dcgm_exporter_selector")
    with pytest.raises(ValidationError):
        field.clean("job=dcgm-exporter", None)
    assert field.clean('job="nvidia-dcgm-exporter"', None) == 'job="nvidia-dcgm-exporter"'
    assert field.clean("", None) == ""


def test_a_new_cluster_pins_the_dcgm_exporters_scrape_job():
    assert Cluster().dcgm_exporter_selector == 'job="dcgm-exporter"'
