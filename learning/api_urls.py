from django.urls import path

from learning import apis
from learning.user_memory_api import ProfileMemoryApi

urlpatterns = [
    path("turns", apis.TurnReportApi.as_view(), name="report_turn"),
    path("turns/<int:turn_id>", apis.TurnGetApi.as_view(), name="get_turn"),
    path("profile-memory", ProfileMemoryApi.as_view(), name="profile_memory"),
]
