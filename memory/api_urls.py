from django.urls import path

from memory import notes_api, read_api, settings_api, working_memory_api, write_api

urlpatterns = [
    path("tools/create_memory", write_api.MemoryCreateApi.as_view(), name="create_memory"),
    path("tools/update_memory", write_api.MemoryUpdateApi.as_view(), name="update_memory"),
    path("tools/delete_memory", write_api.MemoryDeleteApi.as_view(), name="delete_memory"),
    path("tools/get_memory", read_api.MemoryGetApi.as_view(), name="get_memory"),
    path("tools/list_memories", read_api.MemoryListApi.as_view(), name="list_memories"),
    path("tools/search_memory", read_api.SearchMemoryApi.as_view(), name="search_memory"),
    path("tools/promote_memory", write_api.PromoteMemoryApi.as_view(), name="promote_memory"),
    # The agent-memory design's name for promote_memory (docs/api.md).
    path("tools/memory_promote", write_api.MemoryPromoteApi.as_view(), name="memory_promote"),
    path("tools/list_proposals", read_api.ListProposalsApi.as_view(), name="list_proposals"),
    path("tools/memory_store", notes_api.MemoryStoreApi.as_view(), name="memory_store"),
    path(
        "tools/memory_list_recent",
        notes_api.MemoryListRecentApi.as_view(),
        name="memory_list_recent",
    ),
    path("working-memory", working_memory_api.WorkingMemoryApi.as_view(), name="working_memory"),
    path("profile", settings_api.ProfileGetApi.as_view(), name="profile_api"),
]
