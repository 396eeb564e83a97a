"""Hot API lists read as rows: the same JSON as their serializer, from ``QuerySet.values()``.

A ModelSerializer over a page of 1,000 rows builds a model instance per row and per joined row
(``select_related``), then walks every field of every instance through DRF's attribute lookup:
profiled, that was four fifths of a page's time. ``RowShape`` works out once per serializer
class which column each output field comes from and how its value is written, so a page is one
``values()`` query turned into dicts, with the serializer's own field classes writing the values
that need it (dates, times, decimals). The serializer stays the one definition of the shape: a
field the shape cannot read from a row is refused when the shape is made, not guessed.

Fields it reads from a row:

* model fields (the ModelSerializer's own): their column;
* ``SlugRelatedField`` and ``PrimaryKeyRelatedField``: the related row's column through a join
  (``team__slug``) or the foreign key's (``request_id``);
* nested serializers, list and dict fields over a JSON column: that column;
* ``SerializerMethodField``: the method, given the row as an object with its columns as
  attributes (``cluster_id``, the queryset's annotations), ``pk``, and the joined columns
  under their relation (``team.slug``). A serializer whose methods need more for some rows
  defines ``prepare_rows(objects)``, called once per page before the methods, to read it in
  one query.
"""

import datetime
from collections.abc import Callable
from types import SimpleNamespace

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from rest_framework import ISO_8601, mixins, serializers
from rest_framework.response import Response
from rest_framework.settings import api_settings

# Values a row already holds in their JSON form: written as they are.
AS_IS = (
    serializers.BooleanField,
    serializers.CharField,
    serializers.ChoiceField,
    serializers.IntegerField,
    serializers.JSONField,
)


def _writer(field: serializers.Field) -> Callable | None:
    """How a value of the field is written, or None: as it is. Dates and times in ISO 8601
    (the API's format) skip DRF's per-value settings lookups; the rest is the field's own."""
    if isinstance(field, AS_IS):
        return None
    iso = api_settings.DATETIME_FORMAT == ISO_8601 and not hasattr(field, "format")
    if isinstance(field, serializers.DateTimeField) and iso:
        zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
        if zone is None:
            return field.to_representation

        def write_datetime(value: datetime.datetime) -> str:
            if value.tzinfo is None:
                return field.to_representation(value)
            text = value.astimezone(zone).isoformat()
            return text[:-6] + "Z" if text.endswith("+00:00") else text

        return write_datetime
    if isinstance(field, serializers.DateField) and iso and api_settings.DATE_FORMAT == ISO_8601:
        return datetime.date.isoformat
    return field.to_representation


class RowShape:
    """How one serializer's output is made from a ``values()`` row."""

    def __init__(self, serializer_class: type[serializers.ModelSerializer]) -> None:
        self.serializer_class = serializer_class
        model = serializer_class.Meta.model
        self.model_columns = [field.attname for field in model._meta.concrete_fields]
        # (output key, column, the field that writes its values, or None: a related row's key)
        self.columns: list[tuple[str, str, serializers.Field | None]] = []
        self.method_fields: list[tuple[str, str]] = []
        for name, field in serializer_class().fields.items():
            if isinstance(field, serializers.SerializerMethodField):
                self.method_fields.append((name, field.method_name))
            elif isinstance(field, serializers.SlugRelatedField) and "." not in field.source:
                self.columns.append((name, f"{field.source}__{field.slug_field}", None))
            elif isinstance(field, serializers.PrimaryKeyRelatedField) and "." not in field.source:
                column = model._meta.get_field(field.source).attname
                self.columns.append((name, column, None))
            elif isinstance(field, serializers.RelatedField):
                raise ImproperlyConfigured(f"{serializer_class.__name__}.{name}: not a column")
            elif field.source in self.model_columns:
                # Including nested serializers and list or dict fields over a JSON column: their
                # to_representation reads the decoded value as it reads the model's attribute.
                self.columns.append((name, field.source, field))
            else:
                raise ImproperlyConfigured(f"{serializer_class.__name__}.{name}: not a column")

    def rows(self, queryset: QuerySet) -> QuerySet:
        """The queryset's rows as dicts holding every column the shape reads."""
        related = [column for _, column, _ in self.columns if "__" in column]
        annotations = list(queryset.query.annotations)
        return queryset.values(*self.model_columns, *related, *annotations)

    def represent(self, rows, *, context: dict) -> list[dict]:
        """The serializer's output for each row, in order."""
        methods = []
        if self.method_fields:
            serializer = self.serializer_class(context=context)
            methods = [(name, getattr(serializer, method)) for name, method in self.method_fields]
        # Made per call: a datetime's zone is the request's.
        columns = [
            (name, column, None if field is None else _writer(field))
            for name, column, field in self.columns
        ]
        rows = list(rows)
        objects = []
        if methods and rows:
            relations = _relations(rows[0])
            objects = [RowObject(row, relations) for row in rows]
        if objects and hasattr(serializer, "prepare_rows"):
            serializer.prepare_rows(objects)
        out = []
        for index, row in enumerate(rows):
            item = {}
            for name, column, write in columns:
                value = row[column]
                item[name] = value if write is None or value is None else write(value)
            for name, method in methods:
                item[name] = method(objects[index])
            out.append(item)
        return out


class RowObject:
    """A row as a method field reads it: columns as attributes (``cluster_id``), ``pk``, and a
    related row's columns under its name (``team__slug`` as ``team.slug``), looked up when
    read rather than copied. ``relations``: each relation's (row key, column) pairs.

    The columns are the object's own attributes (read at C speed: a method field reads several
    a row); ``pk`` and the relations, read rarely, are looked up when missed."""

    def __init__(self, row: dict, relations: dict[str, list[tuple[str, str]]]) -> None:
        self.__dict__.update(row)
        self.__dict__["_row"], self.__dict__["_relations"] = row, relations

    def __getattr__(self, name: str):
        # Only called for what is not a column.
        row = self.__dict__["_row"]
        if name == "pk":
            return row["id"]
        relations = self.__dict__["_relations"]
        if name in relations:
            return SimpleNamespace(**{column: row[key] for key, column in relations[name]})
        raise AttributeError(name)


def _relations(keys) -> dict[str, list[tuple[str, str]]]:
    relations: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        if "__" in key:
            relation, column = key.split("__", 1)
            relations.setdefault(relation, []).append((key, column))
    return relations


_shapes: dict[type, RowShape] = {}


def row_shape(serializer_class: type[serializers.ModelSerializer]) -> RowShape:
    shape = _shapes.get(serializer_class)
    if shape is None:
        shape = _shapes[serializer_class] = RowShape(serializer_class)
    return shape


class CountedRows:
    """A ``values()`` queryset for a paginator, counted by the queryset it was read from: the
    joins that bring related columns (``team__slug``) do not change the count (they follow
    foreign keys), but in PostgreSQL they made the page's COUNT cost more than the page."""

    def __init__(self, rows: QuerySet, counted: QuerySet) -> None:
        self.rows, self.counted = rows, counted
        self.ordered = rows.ordered

    def count(self) -> int:
        return self.counted.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, key):
        return self.rows[key]


class RowListMixin(mixins.ListModelMixin):
    """``list`` for a ``GenericViewSet`` whose serializer ``RowShape`` can read from rows: the
    same filters, ordering, pagination and JSON as ``ListModelMixin``, without model
    instances. The queryset's ``select_related`` is not needed (the shape joins what it reads)."""

    def list(self, request, *args, **kwargs):
        shape = row_shape(self.get_serializer_class())
        queryset = self.filter_queryset(self.get_queryset())
        rows = shape.rows(queryset)
        page = self.paginate_queryset(CountedRows(rows, queryset.select_related(None)))
        data = shape.represent(
            rows if page is None else page, context=self.get_serializer_context()
        )
        return Response(data) if page is None else self.get_paginated_response(data)
