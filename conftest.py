import pytest

from tests.factories import AgentFactory, UserFactory


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def charlie(db):
    return UserFactory(username="charlie")


@pytest.fixture
def alice_agent(alice):
    return AgentFactory(user=alice, name="assistant")


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "admin-pass-1")


@pytest.fixture
def bob_agent(bob):
    return AgentFactory(user=bob, name="assistant")


@pytest.fixture
def alice_token(alice_agent):
    from profiles.services import token_create

    return token_create(agent=alice_agent).raw


@pytest.fixture
def bob_token(bob_agent):
    from profiles.services import token_create

    return token_create(agent=bob_agent).raw


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The API's throttle counters live in the cache; each test starts from zero."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _vector_search_on():
    """A test whose embedding provider failed pauses the vector side of search in this
    process (search.ranking.query_vectors); the next test starts with it on."""
    from search.ranking import reset_query_cooldown

    reset_query_cooldown()


@pytest.fixture
def call_tool(client):
    """POST a tool call as an agent: call_tool(token, "create_memory", {...})."""
    import json

    def call(token, name, body=None, *, raw=None, content_type="application/json"):
        data = raw if raw is not None else json.dumps({} if body is None else body)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return client.post(
            f"/api/v1/tools/{name}", data=data, content_type=content_type, headers=headers
        )

    return call
