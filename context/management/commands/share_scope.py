"""Create shared scopes and grant users read or read-write access to them (as the admin does).

manage.py share_scope team --create --description "The platform team"
manage.py share_scope team --grant alice --grant bob --write
manage.py share_scope team --grant charlie          # read-only
manage.py share_scope team --revoke bob
manage.py share_scope team --list                   # who has which access
manage.py share_scope --list                        # every scope
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Count

from context import shared_scopes
from context.models import GrantAccess, ScopeGrant, SharedScope
from lib.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Manage a shared scope: --create it, --grant users read access (read-write with "
        "--write), --revoke them, or --list. Users' agents read a granted scope beside the "
        "user's own documents (memory_read, memory_tree, memory_search) and write in it when "
        "they name it and the grant is read-write. A revoke applies from the next request."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scope", nargs="?", help="The scope's slug, e.g. team.")
        parser.add_argument("--create", action="store_true", help="Create the scope first.")
        parser.add_argument("--description", default="", help="With --create: what it is for.")
        parser.add_argument(
            "--grant", action="append", default=[], metavar="USERNAME", help="Give access."
        )
        parser.add_argument(
            "--write", action="store_true", help="With --grant: read-write (default: read)."
        )
        parser.add_argument(
            "--revoke", action="append", default=[], metavar="USERNAME", help="Take access away."
        )
        parser.add_argument("--list", action="store_true", help="Show the scopes or the grants.")

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["scope"]
        changes = options["create"] or options["grant"] or options["revoke"]
        if not slug:
            if changes:
                raise CommandError("Name the scope to change, e.g. `share_scope team --create`.")
            if not options["list"]:
                raise CommandError("Name a scope, or pass --list to see them all.")
            self._list_scopes()
            return
        if options["write"] and not options["grant"]:
            raise CommandError("--write goes with --grant USERNAME.")
        if not changes and not options["list"]:
            raise CommandError("Nothing to do: pass --create, --grant, --revoke or --list.")
        try:
            with transaction.atomic():
                scope = self._scope(slug, create=options["create"], about=options["description"])
                access = GrantAccess.READ_WRITE if options["write"] else GrantAccess.READ
                for username in options["grant"]:
                    shared_scopes.scope_grant_set(
                        scope=scope, user=self._user(username), access=access
                    )
                    self.stdout.write(f"Granted {username} {access} on {scope.name}.")
                for username in options["revoke"]:
                    if shared_scopes.scope_grant_revoke(scope=scope, user=self._user(username)):
                        self.stdout.write(f"Revoked {username} on {scope.name}.")
                    else:
                        self.stdout.write(f"{username} had no grant on {scope.name}.")
        except ServiceError as error:
            raise CommandError(error.message) from error
        if options["list"]:
            self._list_grants(scope)

    def _scope(self, slug: str, *, create: bool, about: str) -> SharedScope:
        if create:
            scope = shared_scopes.shared_scope_create(slug=slug, description=about)
            self.stdout.write(f"Created {scope.name}.")
            return scope
        scope = SharedScope.objects.filter(slug=slug).first()
        if scope is None:
            raise CommandError(f"No shared scope '{slug}'; create it with --create.")
        return scope

    def _user(self, username: str) -> Any:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user '{username}'.")
        return user

    def _list_scopes(self) -> None:
        scopes = SharedScope.objects.annotate(grant_total=Count("grants")).order_by("slug")
        if not scopes:
            self.stdout.write("No shared scopes.")
        for scope in scopes:
            about = f"  {scope.description}" if scope.description else ""
            self.stdout.write(f"{scope.name}\t{scope.grant_total} grant(s){about}")

    def _list_grants(self, scope: SharedScope) -> None:
        grants = ScopeGrant.objects.filter(scope=scope).select_related("user")
        if not grants:
            self.stdout.write(f"{scope.name}: no grants.")
        for grant in grants.order_by("user__username"):
            self.stdout.write(f"{scope.name}\t{grant.user.get_username()}\t{grant.access}")
