from django.urls import path

from search import apis

urlpatterns = [
    path("tools/search_memory", apis.SearchMemoryApi.as_view(), name="search_memory"),
    path("tools/memory_search", apis.MemorySearchApi.as_view(), name="memory_search"),
    path("tools/promote_memory", apis.PromoteMemoryApi.as_view(), name="promote_memory"),
]
