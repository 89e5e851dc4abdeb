"""The turn pages, mounted under /turns/ (config/urls.py)."""

from django.urls import path

from learning import views

app_name = "learning"

urlpatterns = [
    path("", views.turn_list_page, name="turns"),
    path("<int:turn_id>/", views.turn_page, name="turn"),
]
