"""Issue a system token: bound to no user, it works only with the global (company) documents."""

from django.core.management.base import BaseCommand, CommandParser

from profiles.services import system_token_create


class Command(BaseCommand):
    help = (
        "Create a system API token for the global (company) documents. It reads and writes "
        "only those; the token is printed once and only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--label", default="", help="A note to tell tokens apart.")

    def handle(self, *args: object, **options: str) -> None:
        issued = system_token_create(label=options["label"])
        self.stdout.write(issued.raw)
        self.stderr.write(
            f"System token {issued.token.prefix}…; it is shown only this once. It works only "
            "with global documents; users' agents see them when MNEMO_GLOBAL_READABLE is on."
        )
