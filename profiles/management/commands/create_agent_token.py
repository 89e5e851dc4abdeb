"""Issue an API token for one of a user's agents, creating the agent if needed."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from lib.errors import InvalidInput
from profiles.services import agent_get_or_create, token_create


class Command(BaseCommand):
    help = (
        "Create an API token for AGENT acting for USERNAME (the agent is created if needed). "
        "The token is printed once; only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("agent", help="Agent name: a-z, 0-9, '_' and '-', e.g. assistant.")
        parser.add_argument("--label", default="", help="A note to tell tokens apart.")

    def handle(self, *args: object, **options: str) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user '{options['username']}'. Create one with createsuperuser.")
        try:
            agent = agent_get_or_create(user=user, name=options["agent"])
        except InvalidInput as error:
            raise CommandError(error.message) from error
        issued = token_create(agent=agent, label=options["label"])
        self.stdout.write(issued.raw)
        self.stderr.write(
            f"Token {issued.token.prefix}… for agent '{agent.name}' of {user.username}. "
            "It is shown only this once; send it as 'Authorization: Bearer <token>'."
        )
