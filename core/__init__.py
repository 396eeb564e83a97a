"""The small kernel every app may import: validators, request parameters, row shaping,
redaction, text checks, form rendering, spreadsheets, the API's parsers, content negotiation and
schema helpers. It imports nothing of the product's apps, and importing it never loads Celery
(``portal`` is the project's wiring: settings, URLs, the Celery app)."""
