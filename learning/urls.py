"""The turn pages (/turns/) and the heartbeat's actions (/heartbeat/), mounted at the root
(config/urls.py)."""

from django.urls import path

from learning import views

app_name = "learning"

urlpatterns = [
    path("turns/", views.turn_list_page, name="turns"),
    path("turns/<int:turn_id>/", views.turn_page, name="turn"),
    # The heartbeat (learning/heartbeat.py); its settings are on the Settings page.
    path("heartbeat/run/", views.heartbeat_run_now, name="heartbeat_run"),
    path("heartbeat/status/", views.heartbeat_status_panel, name="heartbeat_status"),
    path("heartbeat/findings/", views.heartbeat_findings, name="heartbeat_findings"),
]
