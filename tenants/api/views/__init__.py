"""REST views, one module per resource: find the object among those the user may see, check
types, call a service.

Visibility comes from ``tenants.selectors`` (another team's object is a 404, so the answer never
says it exists); what a user may do is decided by ``tenants.services`` (a 403 with its reason),
with admin-only actions refused up front by ``base.AdminOnlyActions`` so that a non-admin hears
"no" before any complaint about the body. Domain errors become JSON in ``portal.api``, and the
error answers are declared in the schema by ``core.openapi``.
"""
