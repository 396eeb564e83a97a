"""A batch's jobs are cut into shares for the tasks that create them side by side."""

import pytest

from gpujobs.enqueue import submit_shares


@pytest.mark.parametrize(
    ("count", "at_most", "lengths"),
    [
        (0, 16, []),
        (1, 16, [1]),
        (3, 16, [1, 1, 1]),
        (16, 16, [1] * 16),
        (17, 16, [2] + [1] * 15),
        (500, 16, [32] * 4 + [31] * 12),
        (10, 3, [4, 3, 3]),
    ],
)
def test_shares_keep_every_job_once_in_order_and_nearly_equal(count, at_most, lengths):
    job_ids = list(range(100, 100 + count))

    shares = submit_shares(job_ids, at_most=at_most)

    assert [len(share) for share in shares] == lengths
    assert [job_id for share in shares for job_id in share] == job_ids
