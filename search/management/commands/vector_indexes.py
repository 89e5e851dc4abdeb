"""Build and drop the per-owner HNSW indexes now (search/vector_index.py), or list them."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from search import vector_index


class Command(BaseCommand):
    help = (
        "Give each owner with more than MNEMO_SEARCH_OWN_INDEX_ROWS rows of a source's "
        "current embedding model its own HNSW index, and drop the indexes no longer needed "
        "(model changed, owner gone or down to half the threshold, a build that failed). "
        "Beat does the same every ten minutes; run it after a big import. Builds run "
        "CONCURRENTLY: searches and writes go on meanwhile."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--list",
            action="store_true",
            help="Only list the per-owner indexes there are and what a run would change.",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Say what would be built and dropped, and change nothing (as --list).",
        )
        parser.add_argument(
            "--rows",
            type=int,
            default=None,
            help="The threshold for this run, instead of MNEMO_SEARCH_OWN_INDEX_ROWS.",
        )

    def handle(self, *args: object, **options: object) -> None:
        only_look = bool(options["list"] or options["dry_run"])
        limit = options["rows"]
        if limit is not None and limit < 0:  # type: ignore[operator]
            raise CommandError("--rows must be 0 or more.")
        done = vector_index.reconcile(dry_run=only_look, limit=limit)  # type: ignore[arg-type]
        if done.busy:
            raise CommandError(
                "Another process is building or dropping vector indexes right now (the beat "
                "task, or this command); try again when it has finished."
            )
        self._list(done)
        self._changes(done, only_look)

    def _list(self, done: vector_index.Plan) -> None:
        write = self.stdout.write
        kept = {index.name: index for index in done.wanted}
        write(
            f"Per-owner vector indexes: above {done.limit:,} rows of the current model "
            f"(kept down to {vector_index.keep_above(done.limit):,}); "
            f"{len(done.existing)} found."
        )
        for index in done.existing:
            wanted = kept.get(index.name)
            state = "INVALID" if not index.valid else "ok"
            owner = index.owner if index.owner is not None else "?"
            rows = f", {wanted.rows:,} rows now" if wanted is not None else ""
            write(
                f"  {index.name}  {index.table}  owner {owner}{rows}  {index.model or '?'}  "
                f"{index.size / 2**20:,.1f} MB  {state}"
            )
        for reason in done.skipped:
            write(f"  skipped {reason}")

    def _changes(self, done: vector_index.Plan, only_look: bool) -> None:
        write = self.stdout.write
        if not done.create and not done.drop:
            write("Nothing to change.")
            return
        drop_verb, create_verb = ("Dropped", "Built")
        if only_look:
            drop_verb, create_verb = ("Would drop", "Would build")
        for index in done.drop:
            write(f"{drop_verb} {index.name} ({vector_index.describe_drop(index)})")
        for index in done.create:
            if index.name in done.failed:
                write(self.style.ERROR(f"Failed {index.name}: {done.failed[index.name]}"))
                continue
            took = f" in {done.seconds[index.name]:.1f} s" if index.name in done.seconds else ""
            write(
                f"{create_verb} {index.name} on {index.table} for owner {index.owner} "
                f"({index.rows:,} rows of {index.model}){took}"
            )
        if done.failed:
            raise CommandError(f"{len(done.failed)} index build(s) failed; see above.")
