from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from access.login import rate_limited_login
from api.errors import unavailable_as_503
from cbrweb import converters  # noqa: F401  (registers <name:…> and <key_prefix:…> before the includes below)
from ops import health_views as health
from ops.metrics import metrics_view

urlpatterns = [
    path("api/v1/", include("api.urls")),
    path("api/v1/retention/", include("api.retention_urls")),
    path("admin/", admin.site.urls),
    path("login/", rate_limited_login(auth_views.LoginView.as_view(template_name="login.html")), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics", unavailable_as_503(metrics_view), name="metrics"),
    # for load balancers and Kubernetes: at the root, and under the API's prefix (docs/api.md)
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/v1/healthz", health.healthz),
    path("api/v1/readyz", health.readyz),
    path("", include("console.urls")),
]

handler404 = "api.errors.api_aware_404"
handler500 = "api.errors.api_aware_500"
