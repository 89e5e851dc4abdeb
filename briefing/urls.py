"""The heartbeat's actions (/heartbeat/), mounted at the root (config/urls.py). Its settings
are on the Settings page."""

from django.urls import path

from briefing import views

app_name = "briefing"

urlpatterns = [
    path("heartbeat/run/", views.heartbeat_run_now, name="heartbeat_run"),
    path("heartbeat/status/", views.heartbeat_status_panel, name="heartbeat_status"),
    path("heartbeat/findings/", views.heartbeat_findings, name="heartbeat_findings"),
]
