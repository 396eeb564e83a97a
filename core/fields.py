"""Serializer fields the API's input serializers share."""

from rest_framework import serializers


class StringField(serializers.CharField):
    """Text given as a JSON string. DRF's ``CharField`` also takes a number and makes it text, so
    ``{"slug": 0}`` would make a team ``0``: a number where text is asked for is a mistake."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
