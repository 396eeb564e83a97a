"""The usage report page shows a page of rows however many teams an admin sees; the totals
count every row."""

import pytest

from tests import factories
from tests.integration.pages.helpers import get_ok

pytestmark = pytest.mark.django_db

USAGE_PAGE_SIZE = 50


def test_usage_page_shows_a_page_of_rows_and_totals_of_all(client_as, admin, cluster):
    for team in factories.TeamFactory.create_batch(USAGE_PAGE_SIZE + 1):
        factories.QuotaGrantFactory(
            request__team=team, request__cluster=cluster, request__gpus=1, granted_by=admin
        )
    client = client_as(admin)

    first = get_ok(client, "/monitoring/usage/")
    second = get_ok(client, "/monitoring/usage/?page=2")

    assert len(first.context["page"].object_list) == USAGE_PAGE_SIZE
    assert len(second.context["page"].object_list) == 1
    assert f"Total of {USAGE_PAGE_SIZE + 1} rows" in first.content.decode()
