from django.urls import path

from memory import views

urlpatterns = [
    path("", views.home, name="context"),
]
