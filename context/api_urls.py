from django.urls import path

from context import apis, notes_api, search_api

urlpatterns = [
    path("tools/memory_read", apis.DocumentReadApi.as_view(), name="memory_read"),
    path("tools/memory_write", apis.DocumentWriteApi.as_view(), name="memory_write"),
    path("tools/memory_append", apis.DocumentAppendApi.as_view(), name="memory_append"),
    path("tools/memory_tree", apis.DocumentTreeApi.as_view(), name="memory_tree"),
    path("tools/memory_delete", apis.DocumentDeleteApi.as_view(), name="memory_delete"),
    path(
        "tools/append_daily_memory",
        notes_api.DailyAppendApi.as_view(),
        name="append_daily_memory",
    ),
    path(
        "tools/append_agent_memory",
        notes_api.AgentMemoryAppendApi.as_view(),
        name="append_agent_memory",
    ),
    path("tools/memory_search", search_api.MemorySearchApi.as_view(), name="memory_search"),
    path("tools/agent_memory_get", notes_api.AgentMemoryGetApi.as_view(), name="agent_memory_get"),
]
