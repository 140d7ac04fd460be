"""What the driver sends its executors to set Django up (`spark_tasks.executors.driver_context`)."""

import dj_database_url

from spark_tasks.executors import database_url, driver_context


def test_the_database_travels_as_a_url_that_parses_back_to_the_drivers_settings():
    db = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "test_cbr",
        "USER": "cbr@ops",
        "PASSWORD": "p:w/d@#?",
        "HOST": "db.internal",
        "PORT": 6432,
        "OPTIONS": {"sslmode": "require"},
    }
    parsed = dj_database_url.parse(database_url(db))
    assert [parsed[k] for k in ("NAME", "USER", "PASSWORD", "HOST", "PORT")] == [
        "test_cbr",
        "cbr@ops",
        "p:w/d@#?",
        "db.internal",
        6432,
    ]
    assert parsed["OPTIONS"] == {"sslmode": "require"}


def test_the_drivers_current_cbr_settings_and_redis_travel_with_each_job(settings, tmp_path):
    settings.CBR_DATA_DIR = tmp_path / "data"
    settings.CBR_RETENTION_INTERVAL = 7
    context = driver_context()
    assert dj_database_url.parse(context["env"]["DATABASE_URL"])["NAME"] == settings.DATABASES["default"]["NAME"]
    assert context["settings"]["CBR_DATA_DIR"] == tmp_path / "data"
    assert context["settings"]["CBR_RETENTION_INTERVAL"] == 7
    assert context["settings"]["REDIS_URL"] == settings.REDIS_URL
    assert context["env"]["DJANGO_SECRET_KEY"] == settings.SECRET_KEY
