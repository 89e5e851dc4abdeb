"""One plausible person's memories and the one- and two-word queries asked of them: the
short-query set of bench/retrieval.py and of the relevance-floor tests
(tests/search/test_short_queries.py).

Written as a user's profile grows in Mnemo: profile values (name, role, company, time
zone, summary), preferences, facts, projects and instructions, about sixty rows. The
queries were written from the list of topics the profile does NOT mention (UNRELATED: each
must return nothing) and from its rows (RELATED: the row must come first; EXACT: a query
made of a row's own words must return that row first, with or without its vector).
"""

from __future__ import annotations

PROFILE: dict[str, str] = {
    # profile values
    "name": "Maya Lindqvist",
    "timezone": "Europe/Lisbon",
    "preference:language": "English",
    "fact:pronouns": "she/her",
    "role": "Staff data engineer",
    "summary": "Data engineer in Lisbon; likes short answers and trains",
    "company": "Northwind Freight",
    "fact:location": "Lisbon, Portugal",
    "preference:working-hours": "09:00-17:30 on weekdays",
    "preference:email-signature": "Maya · Data Platform · Northwind Freight",
    "fact:calendar": "Google Calendar, work and personal calendars kept apart",
    # preferences
    "preference:coffee": "Double espresso in the morning, nothing after 3 pm",
    "preference:reply-length": "Short answers first, details only when asked",
    "preference:code-style": "Python with type hints; prefers dataclasses over dicts",
    "preference:meetings": "No meetings before 10:00; Fridays kept free for deep work",
    "preference:music-while-working": "Instrumental post-rock or ambient while coding",
    "preference:editor": "Neovim with a light colour scheme",
    "preference:notes-format": "Markdown bullet lists, dates as YYYY-MM-DD",
    "preference:travel": "Trains over planes for anything under six hours",
    "preference:diet": "Vegetarian; eats fish once in a while",
    "preference:reading": "Science fiction novels on an e-reader",
    "preference:exercise": "Runs along the Tagus river three mornings a week",
    "preference:feedback": "Direct feedback, in writing, with examples",
    # facts
    "fact:dog": "Has a border collie named Pixel, adopted in 2021",
    "fact:partner": "Partner Joao is an architect who works from home",
    "fact:sister": "Sister Elin lives in Gothenburg and has two kids",
    "fact:birthday": "Birthday on 14 March",
    "fact:languages-spoken": "Speaks Swedish, English and intermediate Portuguese",
    "fact:bike": "Commutes by electric bike; the office is 20 minutes away",
    "fact:apartment": "Rents a two-bedroom flat in Alfama with a small balcony",
    "fact:allergy": "Allergic to penicillin",
    "fact:climbing": "Goes bouldering on Wednesday evenings at a gym in Marvila",
    "fact:guitar": "Learning classical guitar, about a year in",
    "fact:previous-job": "Worked five years at a Stockholm bank on fraud detection",
    "fact:degree": "MSc in computer science from KTH",
    "fact:car": "Does not own a car",
    "fact:plants": "Keeps a lemon tree and herbs on the balcony",
    "fact:conference": "Spoke at PyCon Portugal about streaming pipelines",
    "fact:volunteering": "Mentors two junior engineers through a women-in-tech programme",
    "fact:holiday": "Summer holiday planned in the Azores, two weeks in August",
    "fact:dentist": "Dentist appointment every six months at a clinic in Baixa",
    # projects and tasks
    "task:lakehouse": "Migrating the freight analytics warehouse to Apache Iceberg on S3",
    "task:lakehouse-deadline": "Iceberg migration must be done before the Q3 board review",
    "task:streaming": "Owns the Kafka ingestion of truck GPS pings, 40k events a second",
    "task:data-contracts": "Writing data contracts between the routing and billing teams",
    "task:oncall": "On call for the data platform one week in five",
    "task:hiring": "Interviewing candidates for two senior data engineer roles",
    "task:dashboard": "Building a Grafana dashboard for pipeline freshness",
    "task:side": "Side project: a Rust command-line tool to tidy photo folders",
    "task:team": "Team of six: three engineers, an analyst, a PM and Maya",
    "task:manager": "Reports to Priya Raman, head of data",
    # instructions
    "instruction:commit-messages": "Write commit messages in the imperative, under 72 chars",
    "instruction:pr-reviews": "Flag missing tests before style nits in pull request reviews",
    "instruction:emails": "Draft emails to executives with the ask in the first line",
    "instruction:sql": "Use CTEs rather than nested subqueries in SQL examples",
    "instruction:scheduling": "Propose meeting times in Lisbon time and the attendee's time",
    "instruction:summaries": "End meeting summaries with owners and due dates",
    "instruction:incidents": "Post-mortems are blameless and list follow-up tickets",
    "instruction:slides": "Slides with one idea each and no more than 20 words",
    "instruction:translations": "Translate Portuguese messages to English before summarising",
    "instruction:reminders": "Remind her on Thursdays to file expense reports",
}

# Topics the profile does not mention: each must return nothing.
UNRELATED: tuple[str, ...] = (
    "tea",
    "cats",
    "budget",
    "oat milk",
    "piano",
    "chess",
    "golf",
    "sushi",
    "wine",
    "knitting",
    "skiing",
    "tax return",
    "mortgage",
    "wedding",
    "baby",
    "horse",
    "tennis",
    "photography camera",
    "video games",
    "football",
    "painting",
    "yoga",
    "vaccine",
    "insurance",
    "recipe",
    "tattoo",
    "poetry",
    "astronomy",
    "fishing trip",
    "cryptocurrency",
    "opera",
    "gardening gloves",
)

# A topic the profile mentions in other words: the row must come first.
RELATED: dict[str, str] = {
    "coffee": "preference:coffee",
    "dog": "fact:dog",
    "guitar": "fact:guitar",
    "climbing": "fact:climbing",
    "running": "preference:exercise",
    "allergy": "fact:allergy",
    "Kafka": "task:streaming",
    "Iceberg": "task:lakehouse",
    "vacation": "fact:holiday",
    "sister": "fact:sister",
}

# A query made of a memory's own words: that memory must come first.
EXACT: dict[str, str] = {
    "border collie": "fact:dog",
    "lemon tree": "fact:plants",
    "electric bike": "fact:bike",
    "Grafana dashboard": "task:dashboard",
    "PyCon Portugal": "fact:conference",
    "expense reports": "instruction:reminders",
    "penicillin": "fact:allergy",
    "double espresso": "preference:coffee",
    "blameless post-mortems": "instruction:incidents",
    "data contracts": "task:data-contracts",
}
