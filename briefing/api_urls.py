from django.urls import path

from briefing.ask_api import AskMemoryApi
from briefing.system_prompt_api import CompleteBootstrapApi, SystemPromptApi

urlpatterns = [
    path("tools/ask_memory", AskMemoryApi.as_view(), name="ask_memory"),
    path("system-prompt", SystemPromptApi.as_view(), name="system_prompt"),
    path("tools/complete_bootstrap", CompleteBootstrapApi.as_view(), name="complete_bootstrap"),
]
