from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from access.login import rate_limited_login
from streams.api.errors import unavailable_as_503
from streams.metrics import metrics_view

urlpatterns = [
    path("api/v1/", include("streams.api.urls")),
    path("api/v1/retention/", include("retention.api.urls")),
    path("admin/", admin.site.urls),
    path("login/", rate_limited_login(auth_views.LoginView.as_view(template_name="login.html")), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("metrics", unavailable_as_503(metrics_view), name="metrics"),
    path("", include("streams.urls")),
]

handler404 = "streams.api.errors.api_aware_404"
handler500 = "streams.api.errors.api_aware_500"
