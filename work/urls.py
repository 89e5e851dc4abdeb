from django.urls import path

from memory import views  # placeholder until the Work pages land

urlpatterns = [path("", views.home, name="work_list")]
