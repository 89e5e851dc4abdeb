"""search/'s periodic tasks for Celery beat, as plain data (no Django: lib/beat.py collects
them through lib/beat_schedule.py without loading Django)."""

# Reconciliation: every minute, embed whatever still lacks a vector for the current model;
# every ten minutes, build the HNSW index of an owner who has grown past
# MNEMO_SEARCH_OWN_INDEX_ROWS and drop those no longer needed (search/tasks.py). A build
# runs past the next tick (~30 s for 100,000 rows); an advisory lock keeps runs apart.
BEAT_ENTRIES = {
    "embed-pending": {"task": "search.tasks.embed_pending", "schedule": 60.0},
    "vector-indexes": {
        "task": "search.tasks.maintain_vector_indexes",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
}
