from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        from memory.models import Memory
        from memory.search import MEMORY_ROLE
        from search.registry import SearchSource, register

        # Memories are searched (memory/search.py) and embedded (search/indexing.py) by value.
        register(
            SearchSource(
                name="memory",
                model=Memory,
                text_field="value",
                embedder_role=MEMORY_ROLE,
                plural="memories",
            )
        )
