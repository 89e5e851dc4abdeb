from django.urls import path

from memory import views  # placeholder until the Agents page lands

urlpatterns = [path("agents/", views.home, name="agents")]
