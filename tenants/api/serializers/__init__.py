"""Shapes of the API's JSON, one module per resource. Input serializers check types only; the
rules live in services.

Output serializers read only what the view's queryset has already joined (select_related), so
a page of any size costs the same number of queries.
"""
