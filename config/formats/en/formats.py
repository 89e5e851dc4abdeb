"""English date and time formats for the pages (lib/when.py): one style, 24-hour, the month
as a word, so "Nov 28, 2026, 16:21" is the same in a list, a tooltip and a sentence. Django's
own English formats ("Nov. 28, 2026, 4:21 p.m.") fill in whatever is not named here. Another
language gets its own module beside this one (config/settings.py FORMAT_MODULE_PATH)."""

DATE_FORMAT = "M j, Y"  # Nov 28, 2026
TIME_FORMAT = "H:i"  # 16:21
DATETIME_FORMAT = "M j, Y, H:i"  # Nov 28, 2026, 16:21
SHORT_DATETIME_FORMAT = "M j, H:i"  # Nov 28, 16:21: lists, where the year is this one
MONTH_DAY_FORMAT = "M j"  # Nov 28
YEAR_MONTH_FORMAT = "M Y"  # Nov 2026
