"""A document's chunk rows (DocumentChunk), what search reads: kept in step with its body by
every change in context/services.py, in the change's own transaction.
"""

from __future__ import annotations

from context.models import Document, DocumentChunk
from search.chunking import split_into_chunks
from search.indexing import request_embedding


def rechunk(document: Document, *, new: bool = False) -> None:
    """Make the document's chunk rows (what search reads) match its body, in the write's
    transaction, so keyword search sees the write when it commits; unchanged chunks keep
    their vectors, and the new or changed ones are embedded after commit. A new document
    (just created in this transaction) has no chunks to compare with."""
    texts = split_into_chunks(document.body)
    existing = {} if new else {chunk.ordinal: chunk for chunk in document.chunks.all()}
    added = []
    for ordinal, text in enumerate(texts):
        chunk = existing.get(ordinal)
        if chunk is None:
            added.append(
                DocumentChunk(
                    document=document,
                    user_id=document.user_id,
                    agent_id=document.agent_id,
                    shared_scope_id=document.shared_scope_id,
                    ordinal=ordinal,
                    text=text,
                )
            )
        elif chunk.text != text:
            chunk.text, chunk.embedding, chunk.embedding_model, chunk.embedded_hash = (
                text,
                None,
                "",
                "",
            )
            chunk.save(update_fields=["text", "embedding", "embedding_model", "embedded_hash"])
    DocumentChunk.objects.bulk_create(added)
    if len(existing) > len(texts):
        document.chunks.filter(ordinal__gte=len(texts)).delete()
    if texts:
        request_embedding()
