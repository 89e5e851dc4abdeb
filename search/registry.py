"""The searchable sources: which tables search embeds and ranks.

search/ imports no domain app. An app with searchable rows registers them here from its
AppConfig.ready() (memory: Memory, context: DocumentChunk); embedding (indexing.py), the
commands and the progress bar go through this list and never name a model.

A source's model carries search/fields.EmbeddingFields (embedding, embedding_model,
embedded_hash) and a generated tsvector column `search_vector` over its text; `text_field`
is the column the vector is made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.db import models


@dataclass(frozen=True)
class SearchSource:
    name: str  # "memory", "document"
    model: type[models.Model]
    text_field: str  # the column embedded (and kept as the vector's guard)
    embedder_role: str  # its get_embedder(role) (search/embeddings.py): "memories", "documents"
    plural: str  # what a command's summary calls its rows: "memories", "document chunks"
    progress_label: str = ""  # the progress bar's name for them; plural when empty

    @property
    def label(self) -> str:
        return self.progress_label or self.plural


_SOURCES: dict[str, SearchSource] = {}


def register(source: SearchSource) -> SearchSource:
    """Add a source (again: replace it, so a reloaded app config does no harm)."""
    for other in _SOURCES.values():
        if other.model is source.model and other.name != source.name:
            raise ValueError(f"{source.model.__name__} is already the source {other.name!r}.")
    _SOURCES[source.name] = source
    return source


def unregister(name: str) -> None:
    _SOURCES.pop(name, None)


def sources() -> list[SearchSource]:
    """Every registered source, in the order the apps registered them."""
    return list(_SOURCES.values())


def source_for(model: type[models.Model]) -> SearchSource:
    """The source whose rows are of this model."""
    for source in _SOURCES.values():
        if source.model is model:
            return source
    raise LookupError(f"{model.__name__} is not a registered search source.")
