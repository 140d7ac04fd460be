"""The web process's application (`gunicorn cbrweb.asgi:application -k uvicorn_worker.UvicornWorker`,
as `cbrweb.web.command` starts it): the Django application of `cbrweb.wsgi` behind the front that
parks waiting reads (`cbrweb.front`)."""

import gc
import importlib
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")

from django.conf import settings  # noqa: E402  (configured by cbrweb.wsgi's import below)

from cbrweb.front import Front, Lane  # noqa: E402
from cbrweb.gunicorn_conf import KEEPALIVE_REQUESTS  # noqa: E402
from cbrweb.wsgi import application as wsgi_application  # noqa: E402

lane = importlib.import_module("api.lane")  # the API's, once cbrweb.wsgi has set Django up

application = Front(
    wsgi_application,
    settings.CBR_WEB_THREADS,
    KEEPALIVE_REQUESTS,
    Lane(lane.answer, settings.CBR_MAX_REQUEST_BYTES, settings.CBR_MAX_URL_BYTES),
)

# Everything loaded so far lives as long as the process: the collector need not walk it again at
# each full collection. A pass over thousands of woken reads allocates a great deal, and the
# collections it set off spent a fifth of its time walking Django's own objects.
gc.freeze()
