"""CBR's one settings module. Every value a deployment changes comes from the environment
(docs/configuration.md); the defaults are the embedded ones that `make run` uses on a laptop."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import NotRequired, TypedDict

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from cbrweb.env import env_bool, env_choice, env_int, env_list, env_path, env_str
from cbrweb.url_limit import LONGEST_URL_BYTES, REQUEST_LINE_BYTES
from store.tier.urls import parse_tier_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("CBR_VAR_DIR", BASE_DIR / "var")

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("CBR_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set in production")
    # Embedded default: a key kept under var/, made once, so sessions survive restarts.
    _key_file = VAR_DIR / "secret_key"
    if _key_file.exists():
        SECRET_KEY = _key_file.read_text().strip()
    else:
        SECRET_KEY = get_random_secret_key()
        try:
            VAR_DIR.mkdir(parents=True, exist_ok=True)
            _key_file.write_text(SECRET_KEY)
            _key_file.chmod(0o600)
        except OSError:
            pass
# `make run`'s first admin: its password kept here, readable by its owner only, until it is changed
# (`access.first_admin`)
CBR_ADMIN_PASSWORD_FILE = VAR_DIR / "admin-password"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "streams",
    "groups",
    "retention",
    "compaction",
    "access",
    "api",
    "console",
    "cbrweb",
]

MIDDLEWARE = [
    "api.middleware.ReleaseViewCycles",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # the console's: left out of an API call with its own credentials (cbrweb/console_middleware.py)
    "cbrweb.console_middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "cbrweb.console_middleware.AuthenticationMiddleware",
    "cbrweb.console_middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "cbrweb.console_middleware.HtmxMiddleware",
]

ROOT_URLCONF = "cbrweb.urls"
WSGI_APPLICATION = "cbrweb.wsgi.application"
ASGI_APPLICATION = "cbrweb.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.access",
            ],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'cbr.sqlite3'}")
if not DATABASE_URL.startswith(("sqlite://", "postgres://", "postgresql://")):
    raise ImproperlyConfigured("DATABASE_URL must start with sqlite:/// or postgres://")
# Persistent connections are checked before a request reuses them: one that the database closed
# meanwhile (a restart, a failover, pg_terminate_backend) is replaced instead of failing the
# request (tests/faults/test_database_dropped.py).
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, worker and beat share the file: WAL and immediate transactions avoid "locked" errors.
    # Connections persist (one per thread): opening one per request cost ~10% of a publish.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
# The statements every read and ack runs (streams/db.py, `prepared_cursor`) are prepared on
# PostgreSQL once per connection: planning the group-and-positions join cost more than running
# it. 0 behind a pooler that cannot keep prepared statements (PgBouncer's transaction mode
# before 1.21, or without `max_prepared_statements`).
CBR_DB_PREPARED = env_bool("CBR_DB_PREPARED", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# WhiteNoise serves from the finders in the embedded set-up; the directory only has to exist.
with contextlib.suppress(OSError):
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# --- CBR ------------------------------------------------------------------------------------
CBR_DATA_DIR = env_path("CBR_DATA_DIR", VAR_DIR / "data")
CBR_FSYNC = env_choice("CBR_FSYNC", "batch", ("batch", "always", "never"))
CBR_CHUNK_BYTES = env_int("CBR_CHUNK_BYTES", 16 * 1024 * 1024, minimum=1024)
CBR_CHUNK_SECONDS = env_int("CBR_CHUNK_SECONDS", 3600, minimum=1)
# long-term storage (docs/design/long-term-storage.md): unset, everything stays on CBR_DATA_DIR;
# file:///path or s3://bucket/prefix (credentials from the standard AWS_* variables)
CBR_TIER_URL = env_str("CBR_TIER_URL", "")
parse_tier_url(CBR_TIER_URL)  # a URL of another form stops the process here, naming the setting
CBR_TIER_AFTER_S = env_int("CBR_TIER_AFTER_S", 0, minimum=0)  # a sealed chunk is copied this long after sealing
# a copied chunk's local file is released this long after its verified upload (reads fetch it back)
CBR_TIER_LOCAL_KEEP_S = env_int("CBR_TIER_LOCAL_KEEP_S", 14_400, minimum=0)
# the local cache of chunks read back from the tier, under CBR_DATA_DIR/tier-cache
CBR_TIER_CACHE_BYTES = env_int("CBR_TIER_CACHE_BYTES", 1024 * 1024 * 1024, minimum=0)
CBR_MAX_EVENT_BYTES = env_int("CBR_MAX_EVENT_BYTES", 1024 * 1024, minimum=1)
CBR_MAX_BATCH_EVENTS = env_int("CBR_MAX_BATCH_EVENTS", 10_000, minimum=1)
# One large event's payload (`POST …/events/raw/`, docs/api.md "Large events"), streamed to the
# store, never held whole in memory; at most 192 MiB (a stored record's body is at most 256 MiB).
CBR_MAX_LARGE_EVENT_BYTES = env_int("CBR_MAX_LARGE_EVENT_BYTES", 64 * 1024 * 1024, minimum=1)
if CBR_MAX_LARGE_EVENT_BYTES > 192 * 1024 * 1024:
    raise ImproperlyConfigured("CBR_MAX_LARGE_EVENT_BYTES must be at most 201326592 (192 MiB)")
# The largest request body the web server takes (cbrweb/body_limit.py), as Kafka's
# socket.request.max.bytes (100 MiB): past it, 413 before the body is read.
CBR_MAX_REQUEST_BYTES = env_int("CBR_MAX_REQUEST_BYTES", 100 * 1024 * 1024, minimum=1024)
# The longest URL (path and query string) the web server takes (cbrweb/url_limit.py): past it,
# 414 `url_too_long` naming `url`, whichever server runs the application.
CBR_MAX_URL_BYTES = env_int("CBR_MAX_URL_BYTES", 8000, minimum=256)
if CBR_MAX_URL_BYTES > LONGEST_URL_BYTES:
    raise ImproperlyConfigured(
        f"CBR_MAX_URL_BYTES must be at most {LONGEST_URL_BYTES} (the longest URL a request line of "
        f"{REQUEST_LINE_BYTES} bytes holds: the web server reads no longer one), not {CBR_MAX_URL_BYTES}"
    )
CBR_MAX_SEGMENTS = env_int("CBR_MAX_SEGMENTS", 64, minimum=1)
CBR_RETENTION_INTERVAL = env_int("CBR_RETENTION_INTERVAL", 1800, minimum=1)
CBR_COMPACTION_INTERVAL = env_int("CBR_COMPACTION_INTERVAL", 3600, minimum=1)
# beat compacts this many streams at once, each in its own Spark scheduler pool (FAIR), so small
# streams share the executors instead of waiting in line (one at a time on SQLite)
CBR_COMPACTION_STREAMS_AT_ONCE = env_int("CBR_COMPACTION_STREAMS_AT_ONCE", 4, minimum=1)
# a compaction's lock is a lease its holder renews while it lives: a holder killed on another
# machine frees it after this (one on this machine at once); tests pause a run between writing its
# generation and switching to it (to kill it there)
CBR_COMPACTION_LOCK_S = env_int("CBR_COMPACTION_LOCK_S", 30, minimum=1)
CBR_COMPACTION_PAUSE_BEFORE_SWITCH_S = env_int("CBR_COMPACTION_PAUSE_BEFORE_SWITCH_S", 0, minimum=0)
# a worker consuming the compaction queue starts Spark and runs a tiny compaction when it starts
# (compaction.runs.warm_up), so the first real run does not pay for it
CBR_COMPACTION_WARM_UP = env_bool("CBR_COMPACTION_WARM_UP", True)
CBR_SEAL_INTERVAL = env_int("CBR_SEAL_INTERVAL", 60, minimum=1)
# reader groups: the most events one read hands out (and ids one ack takes), the longest long poll
CBR_MAX_READ_EVENTS = env_int("CBR_MAX_READ_EVENTS", 10_000, minimum=1)
CBR_MAX_WAIT_MS = env_int("CBR_MAX_WAIT_MS", 60_000, minimum=0)
# reads waiting at once in one web process (past it: 503 too_many_waiting_reads, Retry-After)
CBR_MAX_WAITING_READS = env_int("CBR_MAX_WAITING_READS", 20_000, minimum=1)
# reads in one request of many (`POST /api/v1/reads/`)
CBR_MAX_READS_PER_REQUEST = env_int("CBR_MAX_READS_PER_REQUEST", 10_000, minimum=1)
# threads of a web process (the ASGI front runs the application in them; a waiting read holds none)
CBR_WEB_THREADS = env_int("CBR_WEB_THREADS", 8, minimum=1)
# How long a web process trusts an API token's lookup (access/token_cache.py): a revoked token
# or a deactivated user is refused by every process within this many seconds. 0: no cache.
CBR_TOKEN_CACHE_S = env_int("CBR_TOKEN_CACHE_S", 5, minimum=0)
# How long a web process trusts a publish's lookup of its stream (streams/lookups.py): a stream or
# scope saved or deleted, or marked full, is looked up again by every process at once; this bounds
# changes made around the ORM. 0: no cache.
CBR_STREAM_CACHE_S = env_int("CBR_STREAM_CACHE_S", 5, minimum=0)
# The same for what every read and ack looks up first: its reader group and positions
# (groups/consuming/floors.py GROUPS_READ). 0: a lookup on every read and ack.
CBR_GROUP_CACHE_S = env_int("CBR_GROUP_CACHE_S", 5, minimum=0)
# How long a manual truncation waits for a retention cycle that is working on the same stream
# before it answers 409 `retention_in_progress` (retention/cycle.py, stream_lock).
CBR_TRUNCATE_LOCK_WAIT_S = env_int("CBR_TRUNCATE_LOCK_WAIT_S", 5, minimum=0)
CBR_CHECKPOINT_TICK = env_int("CBR_CHECKPOINT_TICK", 5, minimum=1)
# delayed delivery: how often beat looks after the delayed indexes (seal, load, merge, delete,
# recover); a bucket this large is sealed by a Spark job; how far a reader's clock may lag
# the publisher's
CBR_DELAYED_TICK = env_int("CBR_DELAYED_TICK", 2, minimum=1)
CBR_DELAY_CLOCK_SKEW_MS = env_int("CBR_DELAY_CLOCK_SKEW_MS", 2_000, minimum=0)
# a maintenance round that died holding a stream's lock holds it at most this long
CBR_DELAYED_LOCK_S = env_int("CBR_DELAYED_LOCK_S", 600, minimum=1)
# a publish of delayed events that has not finished indexing them after this long died: its
# segments are re-read from where they were (seconds)
CBR_DELAYED_PUBLISH_STALE_S = env_int("CBR_DELAYED_PUBLISH_STALE_S", 30, minimum=1)
# a search's page (a plain read with filters: contains, header, json) examines at most this many events
CBR_SEARCH_SCAN_EVENTS = env_int("CBR_SEARCH_SCAN_EVENTS", 10_000, minimum=1)
# a dead-letter stream made where its scope has no default policy keeps this many seconds
# (`retention.dead_letters`; 0: no policy, kept until deleted)
# /metrics names at most this many consumers of each group (cbr_consumer_*); the rest are summed
# as consumer="_other" (docs/monitoring.md)
CBR_METRICS_CONSUMERS_PER_GROUP = env_int("CBR_METRICS_CONSUMERS_PER_GROUP", 10, minimum=0)
CBR_DLQ_RETENTION_S = env_int("CBR_DLQ_RETENTION_S", 7 * 86_400, minimum=0)
SPARK_MASTER = env_str("SPARK_MASTER", "local[*]")
# `--engine auto` decides on Spark from this many streams up (the local engine is faster below)
CBR_SPARK_MIN_STREAMS = env_int("CBR_SPARK_MIN_STREAMS", 10_000, minimum=1)
# whether Spark's executors see this process's CBR_DATA_DIR (local[*], or a cluster on a shared file
# system); false: they never open it: the driver reads the streams' ends and applies what the
# retention executors plan, and compaction's executors read and write through the tier
# (docs/cluster.md "Without a shared file system")
CBR_SPARK_SHARED_STORE = env_bool("CBR_SPARK_SHARED_STORE", True)

# --- Redis and Celery -----------------------------------------------------------------------
EMBEDDED_REDIS_URL_FILE = VAR_DIR / "redis.url"  # written by `make run` while its embedded Redis runs


def _embedded_redis_url() -> str | None:
    """The embedded Redis a `make run` on this var/ started (`cbrweb.run` writes its URL), so that
    a command run beside it (`manage.py run_retention_cycle`, `compact_stream`) uses the same
    Redis, the same locks and the same queue as its workers."""
    try:
        return EMBEDDED_REDIS_URL_FILE.read_text().strip() or None
    except OSError:
        return None


REDIS_URL = env_str("REDIS_URL", _embedded_redis_url() or "redis://127.0.0.1:6379/0")
# The cache counts failed sign-ins (access.login), shared by every web process.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "cbr:cache",
    }
}
# Failed sign-ins allowed per client address and per username in a window ("10/5m": 10 in five
# minutes); past it, sign-in answers 429 until the window ends, even with the right password.
CBR_LOGIN_FAILURES = env_str("CBR_LOGIN_FAILURES", "10/5m")
if not re.fullmatch(r"[1-9][0-9]*/[1-9]?[0-9]*[smhd]", CBR_LOGIN_FAILURES):
    raise ImproperlyConfigured("CBR_LOGIN_FAILURES must look like 10/5m (count/[n]s|m|h|d)")
RATELIMIT_FAIL_OPEN = True  # a cache that does not answer must not lock everybody out
# Behind a proxy, count by the address it forwards (e.g. HTTP_X_FORWARDED_FOR; docs/security.md)
RATELIMIT_IP_META_KEY = env_str("CBR_CLIENT_IP_HEADER", "REMOTE_ADDR")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "cbrweb.beat:Scheduler"  # django-celery-beat's, recording its ticks (/readyz)
CELERY_TASK_DEFAULT_QUEUE = "celery"
# /readyz and the console's health panel: a worker's or beat's heartbeat older than this is a
# process that is gone (they beat every third of it); below this free space in CBR_DATA_DIR the
# service is not ready (a full disk refuses every publish).
# the console's rates and backlog over time (groups.sampling): a sample every interval, kept
# for the window; above the cap the sampler does nothing (watch a large fleet with /metrics)
CBR_SAMPLE_INTERVAL = env_int("CBR_SAMPLE_INTERVAL", 60, minimum=1)
CBR_SAMPLE_WINDOW_S = env_int("CBR_SAMPLE_WINDOW_S", 86400, minimum=60)
CBR_SAMPLE_MAX_STREAMS = env_int("CBR_SAMPLE_MAX_STREAMS", 2000, minimum=0)
CBR_HEALTH_STALE_S = env_int("CBR_HEALTH_STALE_S", 30, minimum=1)
CBR_MIN_FREE_BYTES = env_int("CBR_MIN_FREE_BYTES", 256 * 1024 * 1024, minimum=0)
# Compactions (Spark jobs of minutes) have a queue and a worker of their own: on the default queue
# they took every worker slot, and retention, checkpoints and delayed maintenance waited behind
# them for minutes (the soak saw it). Everything else stays on the default queue ("celery").
CBR_COMPACTION_QUEUE = "compaction"
CELERY_TASK_ROUTES = {"compaction.tasks.*": {"queue": CBR_COMPACTION_QUEUE}}


class _BeatEntry(TypedDict):
    task: str
    schedule: float  # seconds
    options: NotRequired[dict[str, int]]


# Declared here, kept in django-celery-beat's tables, editable in the console and admin.
CELERY_BEAT_SCHEDULE: dict[str, _BeatEntry] = {
    "seal-due-chunks": {
        "task": "streams.tasks.seal_due_chunks",
        "schedule": float(CBR_SEAL_INTERVAL),
    },
    "retention-cycle": {
        "task": "retention.tasks.run_retention_cycle",
        "schedule": float(CBR_RETENTION_INTERVAL),
    },
    "periodic-checkpoints": {
        "task": "groups.tasks.periodic_checkpoints",
        "schedule": float(CBR_CHECKPOINT_TICK),
    },
    "compaction": {
        "task": "compaction.tasks.compact_due_streams",
        "schedule": float(CBR_COMPACTION_INTERVAL),
    },
    "delayed-maintenance": {
        "task": "streams.tasks.delayed_maintenance",
        "schedule": float(CBR_DELAYED_TICK),
    },
    "sample-rates": {
        "task": "groups.tasks.sample_rates",
        "schedule": float(CBR_SAMPLE_INTERVAL),
    },
    "refresh-segment-stats": {
        "task": "streams.tasks.refresh_segment_stats",
        "schedule": 30.0,
    },
    "autoscale": {  # its rules read rates over whole minutes (docs/design/stream-scaling.md)
        "task": "streams.tasks.autoscale",
        "schedule": 60.0,
    },
    "offload": {  # sealed files to long-term storage (nothing without CBR_TIER_URL)
        "task": "streams.tasks.offload",
        "schedule": 60.0,
    },
    "tier-sweep": {  # objects no row names that nothing needs (it lists the whole tier)
        "task": "streams.tasks.tier_sweep",
        "schedule": 3600.0,
    },
}
# A tick not started by the time of the next one is dropped (the next does its work): a worker
# that was busy catches up with one run of each, not with a backlog of them.
for _entry in CELERY_BEAT_SCHEDULE.values():
    _entry["options"] = {"expire_seconds": max(1, int(_entry["schedule"]))}

# --- REST -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "access.token_cache.CachedTokenAuthentication",
        "access.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["access.permissions.CbrAccess"],
    "DEFAULT_PARSER_CLASSES": ["api.rendering.ORJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["api.rendering.ORJSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CBR API",
    "DESCRIPTION": "Event streams that delete their data at exactly the right time: consumption-based "
    "retention with time and size limits, reader groups that acknowledge at least once, delayed delivery and "
    "compacted streams. Authenticate with `Authorization: Token …` (POST /api/v1/auth/token/) or a scoped "
    "`Authorization: Api-Key …`. Errors are JSON `{code, message, field?}`; `field` names what was wrong. "
    "Health: `/healthz`, `/readyz`; metrics: `/metrics` (docs/api.md, docs/monitoring.md).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # every operation's error answers, in the one error shape (api/schema.py)
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.add_error_responses",
        # every operation's summary, description and tag, and examples of the bodies that matter
        "api.operations.describe_operations",
    ],
    "ENUM_NAME_OVERRIDES": {
        "CleanupPolicyEnum": "streams.models.CleanupPolicy",
        "OnMaxLimitEnum": "streams.models.OnMaxLimit",
        "LimitTypeEnum": "retention.models.LimitType",
    },
}

# --- Production hardening (see docs/deploy.md) ----------------------------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("CBR_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("CBR_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("CBR_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("CBR_LOG_LEVEL", "INFO")},
}
