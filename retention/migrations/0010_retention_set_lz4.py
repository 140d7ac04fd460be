"""On PostgreSQL, compress stored retention sets with lz4 where the server has it (PostgreSQL 14+
built with lz4): a cycle rewrites every changed set, and pglz's compression was a third of that
write's cost (bench/RESULTS.md). Values already stored keep pglz until they are next written.
Elsewhere (SQLite, a server without lz4) nothing changes."""

from django.db import migrations

_HAS_LZ4 = """
    SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"""


def lz4_where_available(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cur:
        cur.execute(_HAS_LZ4)
        if cur.fetchone() is None:
            return
    schema_editor.execute("ALTER TABLE retention_storedretentionset ALTER COLUMN records SET COMPRESSION lz4")


def back_to_the_default(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE retention_storedretentionset ALTER COLUMN records SET COMPRESSION default")


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0009_retention_set_one_row"),
    ]

    operations = [
        migrations.RunPython(lz4_where_available, back_to_the_default),
    ]
