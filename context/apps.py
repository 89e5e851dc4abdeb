from django.apps import AppConfig


class ContextConfig(AppConfig):
    name = "context"
    verbose_name = "Context"

    def ready(self) -> None:
        from context.models import DocumentChunk
        from context.search import DOCUMENT_ROLE
        from search.registry import SearchSource, register

        # Documents are searched (context/search.py) and embedded (search/indexing.py) by
        # their chunks, which context/services.py keeps in step with each document's body.
        register(
            SearchSource(
                name="document",
                model=DocumentChunk,
                text_field="text",
                embedder_role=DOCUMENT_ROLE,
                plural="document chunks",
                progress_label="chunks",
            )
        )
