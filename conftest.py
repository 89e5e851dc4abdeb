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
    process (search.ranking.query_vectors_soon); the next test starts with it on, and
    with no query vector or scope size (search/keyword.py) remembered from another test."""
    from search.embeddings import recent_query_vectors
    from search.keyword import scope_sizes
    from search.ranking import reset_query_cooldown

    reset_query_cooldown()
    recent_query_vectors.clear()
    scope_sizes.clear()


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


@pytest.fixture
def llm_server(settings, monkeypatch):
    """The fake OpenAI-compatible server (tests/fake_openai.py), configured as the LLM.

    Chat answers "NOOP" until a test scripts others (`llm_server.script_chat(...)`)."""
    from tests.fake_openai import FakeOpenAI

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with FakeOpenAI() as fake:
        settings.MNEMO_LLM_BASE_URL = fake.url
        settings.MNEMO_LLM_MODEL = "gpt-4o-mini"
        settings.MNEMO_LLM_API_KEY = "test"
        settings.MNEMO_LLM_TIMEOUT = 2.0
        settings.MNEMO_LLM_CONNECT_TIMEOUT = 1.0
        settings.MNEMO_LLM_RETRIES = 0
        yield fake


@pytest.fixture
def no_llm(settings):
    """No LLM configured, whatever the environment says."""
    settings.MNEMO_LLM_BASE_URL = ""
    settings.MNEMO_LLM_MODEL = ""
    settings.MNEMO_LLM_API_KEY = ""
