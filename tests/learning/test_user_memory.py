"""USER_MEMORY.md, the consolidated profile: its format (learning/user_memory_doc.py), its
consolidation after a turn against the fake OpenAI-compatible server
(learning/consolidation.py), and loading it within the budget (learning/user_memory_loading.py)."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

import learning.consolidation
from activity.actors import Actor, ActorKind
from activity.models import ActivityEvent, EventType
from context.models import Document, DocumentVersion
from context.services import PROFILE_PATH, document_write
from learning.consolidation import consolidate, strip_fence
from learning.outcomes import ProfileStatus
from learning.user_memory_doc import (
    SECTIONS,
    empty_profile,
    parse_profile,
    render_profile,
    validate_profile,
)
from learning.user_memory_loading import cap_profile, left_out_lines, load_profile
from lib.errors import LLMNotConfigured
from llm.client import model_token_counter
from llm.models import LLMCall, Turn, TurnStatus
from profiles.models import Profile
from tests.fake_openai import ChatReply

pytestmark = pytest.mark.django_db

# What a model copies from the current profile; Mnemo replaces every value when it saves.
MODEL_FRONTMATTER = {
    "user_id": 999,
    "schema_version": 1,
    "last_updated": "2020-01-01T00:00:00+00:00",
    "turn_count": 0,
}
FEW_TOKENS = {"prompt_tokens": 100, "completion_tokens": 40}


SECTION_ARGS = dict(
    zip(
        ["Identity", "Communication", "Work", "Skills", "Recent_Topics", "Open_Questions"],
        SECTIONS,
        strict=True,
    )
)


def answer(**sections: list[str]) -> str:
    """A model's rewrite, its sections by their first words (Work=[…], Open_Questions=[…])."""
    by_name = {SECTION_ARGS[name]: bullets for name, bullets in sections.items()}
    return render_profile(frontmatter=MODEL_FRONTMATTER, sections=by_name)


def make_turn(user, agent=None, *, status=TurnStatus.QUEUED, **fields) -> Turn:
    fields.setdefault("user_message", "I'm Alice, a data engineer at Acme. Keep answers short.")
    fields.setdefault("assistant_reply", "Got it, short answers from now on.")
    fields.setdefault("tool_outputs", [{"name": "search_memory", "text": "no results"}])
    return Turn.objects.create(user=user, agent=agent, status=status, **fields)


def store(user, text: str) -> int:
    """The user's own write of their profile (as the Documents page makes it); its version."""
    document = document_write(
        user=user, path=PROFILE_PATH, content=text, actor=Actor.for_user(user)
    )
    return document.written_version.pk


def profile_document(user) -> Document | None:
    return Document.objects.filter(user=user, agent=None, path=PROFILE_PATH).first()


def failures(user) -> list[dict]:
    events = ActivityEvent.objects.filter(user=user, event_type=EventType.CONSOLIDATION_FAILED)
    return [event.payload for event in events.order_by("id")]


def frontmatter_of(text: str) -> dict[str, str]:
    parsed, problems = parse_profile(text)
    assert problems == []
    return parsed.frontmatter


def set_profile_budget(user, budget: int) -> None:
    Profile.objects.update_or_create(user=user, defaults={"profile_budget": budget})


def long_bullets(count: int, prefix: str = "Topic") -> list[str]:
    return [
        f"{prefix} {n}: a rather long note about something discussed at length"
        for n in range(count)
    ]


# --- the format ----------------------------------------------------------------------------


def test_the_empty_profile_is_the_exact_format(alice):
    make_turn(alice, status=TurnStatus.DONE)
    moment = datetime.datetime(2025, 6, 3, 9, 0, tzinfo=datetime.UTC)

    text = empty_profile(alice, now=moment)

    assert text == (
        f"---\nuser_id: {alice.pk}\nschema_version: 1\nlast_updated: 2025-06-03T09:00:00+00:00\n"
        "turn_count: 1\n---\n\n# User Memory\n\n"
        "## Identity\n_(empty)_\n\n## Communication Preferences\n_(empty)_\n\n"
        "## Work Context\n_(empty)_\n\n## Skills & Expertise\n_(empty)_\n\n"
        "## Recent Topics\n_(empty)_\n\n## Open Questions / Follow-ups\n_(empty)_\n"
    )
    assert validate_profile(text) == []


def test_a_valid_profile_parses_into_its_bullets():
    text = answer(Identity=["Alice", "Data engineer"], Recent_Topics=["dbt tests"])

    parsed, problems = parse_profile(text)

    assert problems == []
    assert parsed.sections["Identity"] == ["Alice", "Data engineer"]
    assert parsed.sections["Recent Topics"] == ["dbt tests"]
    assert parsed.sections["Work Context"] == []
    assert parsed.frontmatter["schema_version"] == "1"


def _swap(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


VALID = answer(Identity=["Alice"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_swap(VALID, "## Work Context\n_(empty)_\n\n", ""), "'## Work Context' is missing"),
        (VALID + "\n## Hobbies\n- chess\n", "'## Hobbies' is not one of the sections"),
        (
            _swap(
                _swap(VALID, "## Identity\n- Alice", "## Recent Topics\n- Alice"),
                "## Recent Topics\n_(empty)_",
                "## Identity\n_(empty)_",
            ),
            "out of order",
        ),
        (VALID + "\n## Identity\n- twice\n", "'## Identity' appears twice"),
        (_swap(VALID, "schema_version: 1", "schema_version: 2"), "schema_version must be 1"),
        (_swap(VALID, "turn_count: 0\n", ""), "key 'turn_count' is missing"),
        (_swap(VALID, "turn_count: 0", "turn_count: 0\nmood: happy"), "key 'mood' is not allowed"),
        (
            _swap(VALID, "2020-01-01T00:00:00+00:00", "2020-01-01T00:00:00"),
            "last_updated must be an ISO 8601 time with its offset",
        ),
        (_swap(VALID, "user_id: 999", "user_id: alice"), "user_id must be a whole number"),
        (_swap(VALID, "user_id: 999", "user_id 999"), "is not 'key: value'"),
        (VALID.split("---\n", 2)[2], "must start with its frontmatter"),
        (_swap(VALID, "- Alice", "Alice is a data engineer."), "neither a '- ' bullet"),
        (_swap(VALID, "- Alice", "- Alice\n  - nested"), "neither a '- ' bullet"),
        (_swap(VALID, "# User Memory\n", "# User Memory\nSome prose.\n"), "outside the sections"),
        (_swap(VALID, "# User Memory\n", ""), "title '# User Memory' is missing"),
        (_swap(VALID, "- Alice", "- Alice\n_(empty)_"), "has bullets and '_(empty)_' both"),
        (
            _swap(VALID, "## Work Context\n_(empty)_", "## Work Context"),
            "'## Work Context' is blank",
        ),
        ("---\nuser_id: 1\n", "not closed by a line '---'"),
    ],
)
def test_validate_profile_names_what_is_wrong(text, problem):
    problems = validate_profile(text)
    assert any(problem in found for found in problems), problems


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("turn_count: 0", "turn_count: 0  # copied as given"),  # a YAML comment
        ("user_id: 999", "user_id:   '999'"),  # quoted, with any spacing
        ("schema_version: 1", 'schema_version: "1"'),
        ("user_id: 999\n", "# who\nuser_id: 999\n"),  # a comment line
    ],
)
def test_frontmatter_is_read_as_yaml(old, new):
    parsed, problems = parse_profile(_swap(VALID, old, new))

    assert problems == []
    assert (parsed.frontmatter["user_id"], parsed.frontmatter["schema_version"]) == ("999", "1")


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("user_id: 999", "user_id: {id: 999}", "user_id must be one plain value"),
        ("user_id: 999", "user_id: [999]", "user_id must be one plain value"),
        ("user_id: 999", "user_id: 999\nuser_id: 998", "key 'user_id' appears twice"),
        ("user_id: 999", "user_id: !!python/object:os.system 999", "one plain value"),
        ("user_id: 999", "user_id: 999\nnote: " + "x" * 1000, "longer than 1000 characters"),
        ("user_id: 999", "user_id: [999", "is not 'key: value' lines of YAML"),
        ("user_id: 999\n", "- user_id\n", "is not 'key: value' lines of YAML"),
    ],
)
def test_untrusted_frontmatter_yaml_is_refused(old, new, problem):
    problems = validate_profile(_swap(VALID, old, new))

    assert any(problem in found for found in problems), problems


def test_strip_fence_takes_the_profile_out_of_a_code_block():
    assert strip_fence("```markdown\n" + VALID + "```") == VALID.strip()
    assert strip_fence("```\nNOOP\n```") == "NOOP"
    assert strip_fence(VALID) == VALID.strip()


# --- consolidating: the model's answers ---------------------------------------------------


def test_noop_writes_nothing(llm_server, alice, alice_agent):
    turn = make_turn(alice, alice_agent)
    llm_server.script_chat(ChatReply(" NOOP \n", usage=FEW_TOKENS))

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.NOOP
    assert (outcome.attempts, outcome.prompt_tokens, outcome.completion_tokens) == (1, 100, 40)
    assert outcome.version_id is None
    assert profile_document(alice) is None
    assert not DocumentVersion.objects.exists()
    assert not ActivityEvent.objects.filter(
        event_type__in=[EventType.CONSOLIDATION_APPLIED, EventType.CONSOLIDATION_FAILED]
    ).exists()
    call = LLMCall.objects.get()
    assert (call.purpose, call.turn) == ("consolidation", turn)


def test_the_prompt_holds_the_rules_the_current_profile_and_the_turn(
    llm_server, alice, alice_agent
):
    set_profile_budget(alice, 1500)
    store(alice, answer(Identity=["Alice, already known"]))
    turn = make_turn(
        alice,
        alice_agent,
        user_message="U" * 600,
        tool_outputs=[{"name": "web_fetch", "text": "T" * 700}],
    )

    consolidate(turn)

    [request] = llm_server.chat_requests
    system, user = request.json["messages"]
    assert system["role"] == "system"
    assert "NOOP" in system["content"]
    assert "COMPLETE rewritten profile" in system["content"]
    assert "Never a patch" in system["content"]
    assert "within 1500 tokens" in system["content"]
    assert all(f"## {name}" in system["content"] for name in SECTIONS)
    assert user["role"] == "user"
    assert "- Alice, already known" in user["content"]
    assert "Got it, short answers from now on." in user["content"]
    assert '<tool_output name="web_fetch">' in user["content"]
    assert request.json["max_tokens"] == 3000


def test_each_part_of_the_turn_is_cut_to_the_setting(llm_server, alice, settings):
    settings.MNEMO_LLM_TURN_CHARS = 500
    turn = make_turn(
        alice,
        user_message="u" * 800,
        assistant_reply="a" * 500,
        tool_outputs=[{"name": "grep", "text": "t" * 501}],
    )

    consolidate(turn)

    prompt = llm_server.chat_requests[0].json["messages"][1]["content"]
    assert "u" * 500 + "\n[… 300 more characters cut]" in prompt
    assert "u" * 501 not in prompt
    assert "a" * 500 + "\n</assistant_reply>" in prompt
    assert "t" * 500 + "\n[… 1 more characters cut]" in prompt


def test_a_valid_rewrite_is_written_with_mnemos_frontmatter(llm_server, alice, alice_agent):
    for _ in range(2):
        make_turn(alice, alice_agent, status=TurnStatus.DONE)
    make_turn(alice, alice_agent, status=TurnStatus.SKIPPED, skipped_reason="learning is off")
    turn = make_turn(alice, alice_agent)
    rewrite = answer(
        Identity=["Alice, data engineer at Acme"],
        Communication=["Short answers"],
    )
    # Models like to wrap the document in a code fence.
    llm_server.script_chat(
        ChatReply(
            f"```markdown\n{rewrite}```", usage={"prompt_tokens": 321, "completion_tokens": 87}
        )
    )
    before = timezone.now().replace(microsecond=0)

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.REWRITTEN
    document = profile_document(alice)
    version = DocumentVersion.objects.get(document=document)
    assert outcome.version_id == version.pk
    assert version.turn == turn
    assert version.actor_type == ActorKind.SYSTEM
    assert version.body == document.body
    frontmatter = frontmatter_of(document.body)
    assert frontmatter["user_id"] == str(alice.pk)
    assert frontmatter["schema_version"] == "1"
    assert frontmatter["turn_count"] == "3"  # two processed before, and this one
    last_updated = datetime.datetime.fromisoformat(frontmatter["last_updated"])
    assert before <= last_updated <= timezone.now()
    assert last_updated.utcoffset() == datetime.timedelta(0)
    assert "## Identity\n- Alice, data engineer at Acme\n" in document.body
    assert "## Communication Preferences\n- Short answers\n" in document.body
    tokens = model_token_counter().count(document.body)
    assert outcome.profile_tokens == tokens
    assert (outcome.prompt_tokens, outcome.completion_tokens, outcome.attempts) == (321, 87, 1)
    [event] = ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_APPLIED)
    assert event.user == alice
    assert event.payload == {
        "turn_id": turn.pk,
        "version_id": version.pk,
        "profile_tokens": tokens,
        "prompt_tokens": 321,
        "completion_tokens": 87,
    }
    assert failures(alice) == []


def test_the_next_consolidation_starts_from_the_last_rewrite(llm_server, alice):
    llm_server.script_chat(ChatReply(answer(Recent_Topics=["first topic"])))
    consolidate(make_turn(alice))

    consolidate(make_turn(alice, user_message="something else"))

    second_prompt = llm_server.chat_requests[1].json["messages"][1]["content"]
    assert "- first topic" in second_prompt
    assert DocumentVersion.objects.filter(path=PROFILE_PATH).count() == 1  # the NOOP wrote none


def test_a_rewrite_over_the_budget_is_refused_retried_once_and_changes_nothing(
    llm_server, alice, alice_agent
):
    set_profile_budget(alice, 500)
    kept = answer(Identity=["Alice"])
    kept_version = store(alice, kept)
    turn = make_turn(alice, alice_agent)
    too_long = answer(Identity=["Alice"], Recent_Topics=long_bullets(80))
    llm_server.script_chat(
        ChatReply(too_long, usage=FEW_TOKENS), ChatReply(too_long, usage=FEW_TOKENS)
    )

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.FAILED
    assert "refused twice" in outcome.reason
    assert "it must stay within 500" in outcome.reason
    assert (outcome.attempts, outcome.prompt_tokens, outcome.completion_tokens) == (2, 200, 80)
    assert profile_document(alice).body == kept
    assert list(DocumentVersion.objects.values_list("pk", flat=True)) == [kept_version]
    found = failures(alice)
    assert [payload["attempt"] for payload in found] == [1, 2]
    assert all(payload["turn_id"] == turn.pk for payload in found)
    assert all("it must stay within 500" in payload["reason"] for payload in found)
    assert len(llm_server.chat_requests) == 2  # one retry, no more
    retry = llm_server.chat_requests[1].json["messages"]
    assert [message["role"] for message in retry] == ["system", "user", "assistant", "user"]
    assert retry[2]["content"] == too_long.strip()
    assert "refused" in retry[3]["content"]
    assert "it must stay within 500" in retry[3]["content"]
    assert not ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_APPLIED).exists()


def hand_edit_over_the_budget() -> str:
    """A user's own profile of about 1,300 tokens, as in issue 27 (budget 500)."""
    return answer(
        Identity=["Alice, data engineer at Acme"],
        Communication=["Short answers, no emojis"],
        Recent_Topics=long_bullets(40),
        Open_Questions=long_bullets(40, prefix="Question"),
    )


def profile_in_prompt(request) -> str:
    return profile_in_prompt_text(request.json["messages"][1]["content"])


def profile_in_prompt_text(prompt: str) -> str:
    return prompt.split("<profile>\n", 1)[1].split("\n</profile>", 1)[0]


def test_consolidation_starts_from_the_capped_profile_the_assistant_loads(
    llm_server, alice, alice_agent
):
    set_profile_budget(alice, 500)
    edit = hand_edit_over_the_budget()
    store(alice, edit)
    counter = model_token_counter()
    assert counter.count(edit) > 1200  # more than twice the budget
    loaded = load_profile(alice)
    assert loaded.cut is True
    turn = make_turn(alice, alice_agent)
    rewrite = answer(
        Identity=["Alice, data engineer at Acme"],
        Communication=["Short answers, no emojis"],
        Recent_Topics=["Acme's data platform", *long_bullets(3)],
    )
    llm_server.script_chat(ChatReply(rewrite, usage=FEW_TOKENS))

    outcome = consolidate(turn)

    [request] = llm_server.chat_requests  # one call: no refusal, no retry
    sent = profile_in_prompt(request)
    assert sent == loaded.text.strip()
    assert counter.count(sent) <= 500
    assert "- Topic 0:" in sent
    assert "- Topic 39:" not in sent
    assert "- Question 0:" not in sent
    assert outcome.status == ProfileStatus.REWRITTEN
    assert outcome.attempts == 1
    assert failures(alice) == []
    assert "- Acme's data platform" in profile_document(alice).body


def test_a_model_that_keeps_what_it_was_sent_is_not_refused_for_a_users_long_edit(
    llm_server, alice, alice_agent
):
    # Issue 27: with the whole 1,300-token edit in the prompt, a model keeping the profile
    # as it was (making room for nothing) was refused twice, "must stay within 500".
    set_profile_budget(alice, 500)
    store(alice, hand_edit_over_the_budget())

    def keep_the_profile_dropping_two_bullets(payload) -> str:
        lines = profile_in_prompt_text(payload["messages"][1]["content"]).splitlines()
        last_bullets = [i for i, line in enumerate(lines) if line.startswith("- ")][-2:]
        return "\n".join(line for i, line in enumerate(lines) if i not in last_bullets)

    llm_server.chat_default = keep_the_profile_dropping_two_bullets

    outcome = consolidate(make_turn(alice, alice_agent))

    assert outcome.status == ProfileStatus.REWRITTEN
    assert outcome.attempts == 1
    assert len(llm_server.chat_requests) == 1
    assert failures(alice) == []
    assert outcome.profile_tokens <= 500
    assert "- Topic 0:" in profile_document(alice).body


def test_the_users_over_budget_edit_is_never_lost_when_a_rewrite_replaces_it(
    llm_server, client, alice, alice_agent
):
    set_profile_budget(alice, 500)
    edit = hand_edit_over_the_budget()
    edit_version = store(alice, edit)
    capped, _, _ = cap_profile(edit, budget=500, counter=model_token_counter())
    left_out = left_out_lines(edit, capped)
    assert "- Question 39: a rather long note about something discussed at length" in left_out
    turn = make_turn(alice, alice_agent)
    llm_server.script_chat(ChatReply(answer(Identity=["Alice, data engineer at Acme"])))

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.REWRITTEN
    # The version the user wrote is still in the history, whole.
    kept = DocumentVersion.objects.get(pk=edit_version)
    assert kept.body == edit
    assert kept.actor_type == ActorKind.USER
    # Every line the user wrote is in the new profile or in that version, which the
    # consolidation's record names.
    new_body = profile_document(alice).body
    assert all(line in new_body or line in kept.body for line in edit.splitlines())
    [applied] = ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_APPLIED)
    assert applied.payload["left_out_lines"] == len(left_out) > 0
    assert applied.payload["left_out_version_id"] == edit_version
    assert all(line in kept.body for line in left_out)
    assert all(line not in capped for line in left_out if line.startswith("- "))
    client.force_login(alice)
    page = client.get("/activity/").content.decode()
    assert (
        f"it started from the capped profile, and the {len(left_out)} lines over the budget "
        f"stay in version {edit_version}"
    ) in page


def test_a_profile_within_the_budget_records_nothing_left_out(llm_server, alice):
    store(alice, answer(Identity=["Alice"]))
    llm_server.script_chat(ChatReply(answer(Identity=["Alice"], Work=["Acme"])))

    consolidate(make_turn(alice))

    [applied] = ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_APPLIED)
    assert "left_out_lines" not in applied.payload
    assert "left_out_version_id" not in applied.payload


def test_left_out_lines_of_a_cut_in_prose_are_the_cut_line_and_the_rest():
    text = "---\nkey: 1\n---\nfirst line kept\nsecond line cut here\nthird\n"
    capped = "---\nkey: 1\n---\nfirst line kept\nsecond line\n"

    assert left_out_lines(text, capped) == ["second line cut here", "third"]


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (
            _swap(VALID, "## Skills & Expertise\n_(empty)_\n\n", ""),
            "'## Skills & Expertise' is missing",
        ),
        (VALID + "\n## Favourite Films\n- Alien\n", "'## Favourite Films' is not one of"),
        (_swap(VALID, "schema_version: 1", "schema_version: 3"), "schema_version must be 1"),
        (_swap(VALID, "---\nuser_id", "user_id"), "must start with its frontmatter"),
        (
            "Here is what I would change: add that Alice likes tea.",
            "must start with its frontmatter",
        ),
    ],
)
def test_a_rewrite_that_breaks_the_schema_is_refused_and_the_old_profile_stays(
    llm_server, alice, broken, problem
):
    kept = answer(Identity=["Alice"], Work=["Acme"])
    store(alice, kept)
    llm_server.chat_default = broken

    outcome = consolidate(make_turn(alice))

    assert outcome.status == ProfileStatus.FAILED
    assert problem in outcome.reason
    assert profile_document(alice).body == kept
    assert DocumentVersion.objects.count() == 1
    assert [payload["attempt"] for payload in failures(alice)] == [1, 2]
    assert problem in llm_server.chat_requests[1].json["messages"][3]["content"]


def test_malformed_output_then_a_valid_one_on_the_retry_is_applied(llm_server, alice):
    turn = make_turn(alice)
    fixed = answer(Identity=["Alice"], Recent_Topics=["Acme's data platform"])
    llm_server.script_chat(
        ChatReply(
            "Sure! Alice is a data engineer.", usage={"prompt_tokens": 10, "completion_tokens": 5}
        ),
        ChatReply(fixed, usage={"prompt_tokens": 20, "completion_tokens": 7}),
    )

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.REWRITTEN
    assert (outcome.attempts, outcome.prompt_tokens, outcome.completion_tokens) == (2, 30, 12)
    assert "- Acme's data platform" in profile_document(alice).body
    [failure] = failures(alice)
    assert failure["attempt"] == 1
    assert failure["turn_id"] == turn.pk
    assert "must start with its frontmatter" in failure["reason"]
    [applied] = ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_APPLIED)
    assert (applied.payload["prompt_tokens"], applied.payload["completion_tokens"]) == (30, 12)


def test_a_timeout_fails_is_recorded_and_is_not_asked_again(llm_server, alice, settings):
    settings.MNEMO_LLM_TIMEOUT = 0.3
    kept = answer(Identity=["Alice"])
    store(alice, kept)
    turn = make_turn(alice)
    llm_server.script_chat(ChatReply(answer(Identity=["Bob?"]), delay=3))

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.FAILED
    assert "did not answer within 0.3 s" in outcome.reason
    assert outcome.attempts == 1
    assert len(llm_server.chat_requests) == 1
    assert profile_document(alice).body == kept
    [failure] = failures(alice)
    assert failure == {"turn_id": turn.pk, "reason": outcome.reason, "attempt": 1}


@pytest.mark.parametrize("stored_before", [True, False])
def test_the_users_edit_between_read_and_write_is_kept_and_is_the_base_of_the_retry(
    llm_server, alice, monkeypatch, stored_before
):
    if stored_before:
        store(alice, answer(Identity=["Alice"]))
    users_edit = answer(Identity=["Alice"], Communication=["Prefers tea, edited by Alice"])
    real_complete = learning.consolidation.complete
    calls = []

    def complete_while_the_user_edits(**kwargs):
        completion = real_complete(**kwargs)
        calls.append(kwargs)
        if len(calls) == 1:  # the user saves on the Documents page while the model thinks
            store(alice, users_edit)
        return completion

    monkeypatch.setattr(learning.consolidation, "complete", complete_while_the_user_edits)
    llm_server.script_chat(
        ChatReply(answer(Identity=["Alice"], Recent_Topics=["from the stale base"])),
        ChatReply(
            answer(
                Identity=["Alice"],
                Communication=["Prefers tea, edited by Alice"],
                Recent_Topics=["from the edit"],
            )
        ),
    )

    outcome = consolidate(make_turn(alice))

    assert outcome.status == ProfileStatus.REWRITTEN
    assert outcome.attempts == 2
    second_prompt = llm_server.chat_requests[1].json["messages"][1]["content"]
    assert users_edit.strip() in second_prompt
    body = profile_document(alice).body
    assert "- Prefers tea, edited by Alice" in body
    assert "from the stale base" not in body
    versions = DocumentVersion.objects.filter(path=PROFILE_PATH).order_by("id")
    assert [version.actor_type for version in versions][-2:] == [ActorKind.USER, ActorKind.SYSTEM]
    assert versions[len(versions) - 2].body == users_edit  # the edit itself is a version


def test_a_user_editing_after_every_read_wins_and_the_consolidation_gives_up(
    llm_server, alice, monkeypatch
):
    store(alice, answer(Identity=["Alice"]))
    real_complete = learning.consolidation.complete
    edits = []

    def complete_while_the_user_edits(**kwargs):
        completion = real_complete(**kwargs)
        edits.append(answer(Identity=[f"Alice, edit {len(edits) + 1}"]))
        store(alice, edits[-1])
        return completion

    monkeypatch.setattr(learning.consolidation, "complete", complete_while_the_user_edits)
    llm_server.chat_default = answer(Identity=["Alice"], Recent_Topics=["model"])
    turn = make_turn(alice)

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.FAILED
    assert "changed twice while it was being consolidated" in outcome.reason
    assert len(llm_server.chat_requests) == 2  # one more round after the first conflict
    assert profile_document(alice).body == edits[-1]
    assert not DocumentVersion.objects.filter(actor_type=ActorKind.SYSTEM).exists()
    assert [payload["reason"] for payload in failures(alice)] == [outcome.reason]


def test_the_daily_budget_reached_turns_consolidation_off(llm_server, alice):
    Profile.objects.create(user=alice, llm_daily_tokens=1000)
    LLMCall.objects.create(
        user=alice, purpose="capture", model="gpt-4o-mini", prompt_tokens=1000, outcome="ok"
    )

    outcome = consolidate(make_turn(alice))

    assert outcome.status == ProfileStatus.OFF
    assert "today's LLM budget is spent" in outcome.reason
    assert outcome.attempts == 0
    assert llm_server.chat_requests == []
    assert profile_document(alice) is None
    assert failures(alice) == []


def test_without_an_llm_consolidation_is_off_and_says_how_to_turn_it_on(no_llm, alice):
    outcome = consolidate(make_turn(alice))

    assert outcome.status == ProfileStatus.OFF
    assert "MNEMO_LLM_MODEL" in outcome.reason
    assert outcome.attempts == 0
    assert profile_document(alice) is None
    assert not LLMCall.objects.exists()


def test_while_memory_is_paused_no_tokens_are_spent(llm_server, alice):
    Profile.objects.create(user=alice, memory_paused=True)

    outcome = consolidate(make_turn(alice))

    assert outcome.status == ProfileStatus.OFF
    assert "paused" in outcome.reason
    assert llm_server.chat_requests == []
    assert profile_document(alice) is None


def test_a_pause_that_comes_during_the_call_writes_nothing(llm_server, alice, monkeypatch):
    real_complete = learning.consolidation.complete

    def complete_then_pause(**kwargs):
        completion = real_complete(**kwargs)
        Profile.objects.filter(user=alice).update(memory_paused=True)
        return completion

    monkeypatch.setattr(learning.consolidation, "complete", complete_then_pause)
    llm_server.chat_default = answer(Identity=["Alice"])
    turn = make_turn(alice)

    outcome = consolidate(turn)

    assert outcome.status == ProfileStatus.FAILED
    assert "paused" in outcome.reason
    assert profile_document(alice) is None
    assert [payload["reason"] for payload in failures(alice)] == [outcome.reason]


# --- loading ---------------------------------------------------------------------------------


def test_load_serves_the_empty_profile_before_anything_is_stored(llm_server, alice):
    loaded = load_profile(alice)

    assert loaded.exists is False
    assert loaded.version_id is None
    assert loaded.cut is False
    assert validate_profile(loaded.text) == []
    assert frontmatter_of(loaded.text)["user_id"] == str(alice.pk)
    assert loaded.tokens == model_token_counter().count(loaded.text)
    assert loaded.tokenizer == model_token_counter().name
    assert loaded.budget == 2000


def test_load_without_an_llm_and_without_a_profile_says_how_to_turn_it_on(no_llm, alice):
    with pytest.raises(LLMNotConfigured) as raised:
        load_profile(alice)
    assert "MNEMO_LLM_MODEL" in raised.value.message


def test_load_serves_a_stored_profile_without_an_llm(no_llm, alice):
    version = store(alice, answer(Identity=["Alice"]))

    loaded = load_profile(alice)

    assert (loaded.exists, loaded.version_id, loaded.cut) == (True, version, False)
    assert "- Alice" in loaded.text


def test_turn_count_is_live_and_last_updated_is_the_rewrites(llm_server, alice):
    llm_server.script_chat(ChatReply(answer(Identity=["Alice"])))
    first = make_turn(alice)
    consolidate(first)
    Turn.objects.filter(pk=first.pk).update(status=TurnStatus.DONE)
    written = frontmatter_of(profile_document(alice).body)
    for _ in range(2):  # two more turns, both answered NOOP
        turn = make_turn(alice)
        assert consolidate(turn).status == ProfileStatus.NOOP
        Turn.objects.filter(pk=turn.pk).update(status=TurnStatus.DONE)

    served = frontmatter_of(load_profile(alice).text)

    assert written["turn_count"] == "1"
    assert served["turn_count"] == "3"
    assert served["last_updated"] == written["last_updated"]
    assert frontmatter_of(profile_document(alice).body)["turn_count"] == "1"  # not rewritten


def test_load_drops_bullets_from_the_end_to_fit_the_budget(llm_server, alice):
    set_profile_budget(alice, 500)
    store(
        alice,
        answer(
            Identity=["Alice, data engineer at Acme"],
            Recent_Topics=long_bullets(30),
            Open_Questions=long_bullets(30, prefix="Question"),
        ),
    )

    loaded = load_profile(alice)

    counter = model_token_counter()
    assert loaded.cut is True
    assert loaded.tokens == counter.count(loaded.text) <= 500
    assert "- Alice, data engineer at Acme" in loaded.text
    assert "- Question" not in loaded.text  # the last section went first
    assert "- Topic 0:" in loaded.text
    assert "- Topic 29:" not in loaded.text
    assert all(f"## {name}" in loaded.text for name in SECTIONS)
    assert frontmatter_of_lines(loaded.text)["schema_version"] == "1"  # the frontmatter stays


def frontmatter_of_lines(text: str) -> dict[str, str]:
    head = text.split("---\n")[1]
    return dict(line.split(": ", 1) for line in head.splitlines())


def test_cap_keeps_the_most_bullets_that_fit():
    counter = model_token_counter()
    text = answer(Identity=["Alice"], Recent_Topics=long_bullets(40))
    budget = counter.count(text) - 5

    capped, tokens, cut = cap_profile(text, budget=budget, counter=counter)

    assert cut is True
    assert tokens == counter.count(capped) <= budget
    assert "- Topic 38:" in capped
    assert "- Topic 39:" not in capped
    assert capped == text.replace(f"- {long_bullets(40)[39]}\n", "")


def test_cap_cuts_prose_at_a_word_boundary_when_dropping_bullets_is_not_enough():
    counter = model_token_counter()
    # No bullets to drop: only prose, as a user's edit may add.
    text = answer() + "\n" + "plenty of words the user wrote here " * 200

    capped, tokens, cut = cap_profile(text, budget=500, counter=counter)

    assert cut is True
    assert tokens == counter.count(capped) <= 500
    assert tokens > 450  # cut near the budget, not far below it
    assert text.startswith(capped.rstrip("\n"))
    assert capped.rstrip("\n").endswith(("plenty", "of", "words", "the", "user", "wrote", "here"))


def test_cap_leaves_a_profile_within_the_budget_alone():
    counter = model_token_counter()
    text = answer(Identity=["Alice"])
    assert cap_profile(text, budget=500, counter=counter) == (text, counter.count(text), False)


def test_cap_marks_a_section_it_emptied_so_the_capped_profile_keeps_the_format():
    counter = model_token_counter()
    text = answer(
        Identity=["Alice"],
        Recent_Topics=long_bullets(20),
        Open_Questions=long_bullets(20, prefix="Question"),
    )
    budget = counter.count(answer(Identity=["Alice"], Recent_Topics=long_bullets(10)))

    capped, tokens, cut = cap_profile(text, budget=budget, counter=counter)

    assert cut is True
    assert tokens <= budget
    assert "## Open Questions / Follow-ups\n_(empty)_\n" in capped
    assert validate_profile(capped) == []
    left_out = left_out_lines(text, capped)
    assert left_out[-1] == f"- {long_bullets(20, prefix='Question')[19]}"
    assert all(line.startswith("- ") and line not in capped for line in left_out)
    assert len(left_out) == text.count("\n- ") - capped.count("\n- ")
