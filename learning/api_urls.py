from django.urls import path

from learning import apis
from learning.ask_api import AskMemoryApi
from learning.profile_api import ProfileMemoryApi
from learning.system_prompt_api import CompleteBootstrapApi, SystemPromptApi

urlpatterns = [
    path("turns", apis.TurnReportApi.as_view(), name="report_turn"),
    path("turns/<int:turn_id>", apis.TurnGetApi.as_view(), name="get_turn"),
    path("profile-memory", ProfileMemoryApi.as_view(), name="profile_memory"),
    path("tools/ask_memory", AskMemoryApi.as_view(), name="ask_memory"),
    path("system-prompt", SystemPromptApi.as_view(), name="system_prompt"),
    path("tools/complete_bootstrap", CompleteBootstrapApi.as_view(), name="complete_bootstrap"),
]
