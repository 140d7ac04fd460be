from django.urls import path

from api import retention_views as views

urlpatterns = [
    path("cycles/", views.CycleListView.as_view(), name="api-cycles"),
    path("cycles/<int:pk>/", views.CycleDetailView.as_view(), name="api-cycle"),
]
