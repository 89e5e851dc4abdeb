"""Prepare the embedded default before `make run` starts the servers."""

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from pages.management.commands.seed_demo import DEMO_PASSWORD, DEMO_USERNAME


class Command(BaseCommand):
    help = "Migrate, collect static files, create the demo account and print how to sign in."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, *args: object, url: str, **options: object) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("seed_demo")
        lines = [f"Mnemo is starting at {url}"]
        if settings.EMBEDDED:
            lines += [
                f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD}",
                f"Data: {settings.DATA_DIR}",
            ]
        lines.append("Press Ctrl-C to stop.")
        width = max(map(len, lines))
        self.stdout.write("\n".join(["", "=" * width, *lines, "=" * width, ""]))
