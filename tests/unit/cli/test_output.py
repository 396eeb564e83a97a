"""Tables and JSON as the client prints them."""

import json

from gpuportal import output
from gpuportal.cli import JOB_COLUMNS, QUOTA_COLUMNS

COLUMNS = output.columns(("id", "id"), ("name", "name"), ("node", "node"))


def test_table_aligns_columns_under_upper_case_headings():
    rows = [{"id": 7, "name": "train", "node": "gpu-node-1"}, {"id": 12, "name": "eval-long"}]

    text = output.table(rows, COLUMNS)

    assert text.splitlines() == [
        "ID  NAME       NODE",
        "7   train      gpu-node-1",
        "12  eval-long  -",
    ]


def test_empty_list_is_the_headings_alone():
    assert output.table([], COLUMNS) == "ID  NAME  NODE\n"


def test_cells_show_nothing_as_a_dash_lists_joined_and_text_on_one_line():
    assert output.cell(None) == "-"
    assert output.cell("") == "-"
    assert output.cell([]) == "-"
    assert output.cell(["a", "b"]) == "a,b"
    assert output.cell(True) == "yes"
    assert output.cell("two\nlines  here") == "two lines here"
    assert output.cell(0) == "0"


def test_nested_keys_are_looked_up_by_dots():
    job = {"queue_status": {"why": "team vision uses 8 of its 8 A100"}}

    assert output.lookup(job, "queue_status.why") == "team vision uses 8 of its 8 A100"
    assert output.lookup({"queue_status": None}, "queue_status.why") is None


def test_one_object_is_a_record_of_aligned_headings():
    text = output.render({"id": 3, "name": "x", "node": None}, fmt="table", cols=COLUMNS)

    assert text.splitlines() == ["id:   3", "name: x", "node: -"]


def test_json_output_is_the_data_as_given():
    rows = [{"id": 1, "name": "ü", "extra": {"a": [1, 2]}}]

    assert json.loads(output.render(rows, fmt="json", cols=COLUMNS)) == rows


def test_job_and_quota_tables_read_the_apis_field_names():
    job = {
        "id": 1,
        "name": "n",
        "team": "vision",
        "cluster": "c",
        "state": "running",
        "gpus": 2,
        "node": "gpu-node-0",
        "created_at": "2026-01-01T00:00:00Z",
    }
    quota = {
        "id": 4,
        "team": "vision",
        "cluster": "c",
        "gpus": 2,
        "gpu_model": "",
        "starts_on": "2026-01-01",
        "ends_on": None,
        "state": "pending",
        "requested_by": "lena",
    }

    job_line = output.table([job], JOB_COLUMNS).splitlines()[1].split()
    quota_line = output.table([quota], QUOTA_COLUMNS).splitlines()[1].split()

    assert job_line == [
        "1",
        "n",
        "vision",
        "c",
        "running",
        "2",
        "gpu-node-0",
        "2026-01-01T00:00:00Z",
    ]
    assert quota_line == ["4", "vision", "c", "2", "-", "2026-01-01", "-", "pending", "lena"]
