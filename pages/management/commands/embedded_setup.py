"""Prepare the embedded default before `make run` starts the servers.

It says that Mnemo is starting; the address and the demo login (the banner) go to
--banner-file, which lib/stack.py prints once the page answers, or here when no file is
given."""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from pages.management.commands.seed_demo import DEMO_PASSWORD, DEMO_USERNAME


class Command(BaseCommand):
    help = "Migrate, collect static files, create the demo account and print how to sign in."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/")
        parser.add_argument("--banner-file", default=None)

    def handle(self, *args: object, url: str, banner_file: str | None, **options: object) -> None:
        if banner_file is not None:
            self.stdout.write(f"Mnemo is starting at {url} …")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("seed_demo")
        lines = [f"Mnemo is ready at {url}"]
        if settings.EMBEDDED:
            lines += [
                f"Demo login: {DEMO_USERNAME} / {DEMO_PASSWORD}",
                f"Data: {settings.DATA_DIR}",
            ]
        lines.append("Press Ctrl-C to stop.")
        width = max(map(len, lines))
        banner = "\n".join(["", "=" * width, *lines, "=" * width, ""])
        if banner_file is None:
            self.stdout.write(banner)
            return
        Path(banner_file).write_text(banner)
        self.stdout.write("Set up; the web server is loading (the address follows).")
