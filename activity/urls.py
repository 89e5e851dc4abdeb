from django.urls import path

from memory import views  # placeholder until the Activity page lands

urlpatterns = [path("", views.home, name="activity")]
