from django.urls import path

from retention.api import views

urlpatterns = [
    path("cycles/", views.CycleListView.as_view(), name="api-cycles"),
    path("cycles/<int:pk>/", views.CycleDetailView.as_view(), name="api-cycle"),
]
