"""The turn pages (/turns/), mounted at the root (config/urls.py)."""

from django.urls import path

from learning import views

app_name = "learning"

urlpatterns = [
    path("turns/", views.turn_list_page, name="turns"),
    path("turns/<int:turn_id>/", views.turn_page, name="turn"),
]
