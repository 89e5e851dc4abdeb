from django.urls import path

from memory import apis, settings_api

urlpatterns = [
    path("tools/create_memory", apis.MemoryCreateApi.as_view(), name="create_memory"),
    path("tools/update_memory", apis.MemoryUpdateApi.as_view(), name="update_memory"),
    path("tools/delete_memory", apis.MemoryDeleteApi.as_view(), name="delete_memory"),
    path("tools/get_memory", apis.MemoryGetApi.as_view(), name="get_memory"),
    path("tools/list_memories", apis.MemoryListApi.as_view(), name="list_memories"),
    path("tools/search_memory", apis.SearchMemoryApi.as_view(), name="search_memory"),
    path("tools/promote_memory", apis.PromoteMemoryApi.as_view(), name="promote_memory"),
    # The agent-memory design's name for promote_memory (README.md, "Agent API").
    path("tools/memory_promote", apis.MemoryPromoteApi.as_view(), name="memory_promote"),
    path("tools/list_proposals", apis.ListProposalsApi.as_view(), name="list_proposals"),
    path("tools/memory_store", apis.MemoryStoreApi.as_view(), name="memory_store"),
    path("tools/memory_list_recent", apis.MemoryListRecentApi.as_view(), name="memory_list_recent"),
    path("working-memory", apis.WorkingMemoryApi.as_view(), name="working_memory"),
    path("profile", settings_api.ProfileGetApi.as_view(), name="profile_api"),
]
