"""Issue an API token for one of a user's agents, creating the agent if needed."""

import re

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from lib.errors import InvalidInput
from profiles.models import AGENT_NAME_PATTERN
from profiles.naming import agent_name, clean_display_name
from profiles.services import agent_get_or_create, agent_set_details, agent_slug, token_create


class Command(BaseCommand):
    help = (
        "Create an API token for AGENT acting for USERNAME (the agent is created if needed). "
        "The token is printed once; only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "agent",
            help="The agent's name in paths and tokens (a-z, 0-9, '_' and '-', e.g. "
            "assistant), or a name in any script (e.g. Асистент), from which that one is made.",
        )
        parser.add_argument("--label", default="", help="A note to tell tokens apart.")
        parser.add_argument(
            "--display-name",
            default="",
            help="How pages name the agent, in any script (e.g. 'Claude Desktop').",
        )

    def handle(self, *args: object, **options: str) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user '{options['username']}'. Create one with createsuperuser.")
        name = options["agent"]
        display_name = clean_display_name(options["display_name"])
        if not re.fullmatch(AGENT_NAME_PATTERN, name):
            # Not a name for paths and tokens: what the person calls it, as on the Agents page.
            display_name = display_name or clean_display_name(name)
            name = agent_slug(display_name)
        try:
            agent = agent_get_or_create(user=user, name=name, display_name=display_name)
            if display_name and agent_name(agent) != display_name:
                agent = agent_set_details(agent=agent, display_name=display_name)
        except InvalidInput as error:
            raise CommandError(error.message) from error
        issued = token_create(agent=agent, label=options["label"])
        self.stdout.write(issued.raw)
        self.stderr.write(
            f"Token {issued.token.prefix}… for agent '{agent_name(agent)}' ('{agent.name}' in "
            f"paths and tokens) of {user.username}. It is shown only this once; send it as "
            "'Authorization: Bearer <token>'."
        )
