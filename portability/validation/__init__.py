"""The check an uploaded Mnemo export passes before the import writes anything: reading
the archive (reading.py), the rules of its fields (rules.py), of its JSON Lines members
(lines.py), of its documents, work files and profile (files.py), and the three steps over
the whole archive (archive.py). portability/applying.py writes what it accepts."""
