"""The path converters both edges route with (`<name:…>`, `<checkpoint:…>`, `<key_prefix:…>`), registered by
cbrweb/urls.py before it includes the API's and the console's routes."""

from django.urls import register_converter


class NameConverter:
    regex = r"[A-Za-z0-9_.-]{1,128}"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(NameConverter, "name")


class KeyPrefixConverter(NameConverter):
    """An API key's prefix as `str` takes it, less NUL: PostgreSQL text cannot hold one, so a
    lookup with it was a 500; now no route matches (a 404)."""

    regex = r"[^/\x00]+"


register_converter(KeyPrefixConverter, "key_prefix")


class CheckpointNameConverter(NameConverter):
    """A checkpoint's name: a name, or also with ':' (`groups.consuming.check_checkpoint_name`
    allows it, so a checkpoint named `v2:batch-7` must be addressable)."""

    regex = r"[A-Za-z0-9_.:-]{1,128}"


register_converter(CheckpointNameConverter, "checkpoint")
