"""Importers: other schedulers' job definitions as a ``cronwheel apply -f`` file plus a report.

Each source format is a module with a pure ``convert(text, options, ...)`` that returns an
:class:`~cronwheel.importers.report.ImportResult`: the jobs (apply-file mappings) and one
:class:`~cronwheel.importers.report.Note` per change of meaning, per entry left out and per thing
the user must do. Unreadable input raises
:class:`~cronwheel.importers.report.UnreadableInputError`. docs/importing.md is the reference.
"""
