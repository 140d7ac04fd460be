import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
django_application = get_wsgi_application()

from django.conf import settings  # noqa: E402  (configured by the line above)

from api.schema import openapi_schema  # noqa: E402
from cbrweb.body_limit import RequestBodyLimit  # noqa: E402
from cbrweb.url_limit import RequestUrlLimit  # noqa: E402

openapi_schema()  # built before this process serves anyone (api/schema.py)
application = RequestUrlLimit(
    RequestBodyLimit(django_application, settings.CBR_MAX_REQUEST_BYTES, settings.CBR_MAX_LARGE_EVENT_BYTES),
    settings.CBR_MAX_URL_BYTES,
)
