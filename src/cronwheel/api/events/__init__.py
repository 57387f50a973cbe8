"""The live feed of changes behind ``GET /v1/events``: what a page follows and hears
(:mod:`.topics`, pure), the one process-wide reader that feeds every open stream (:mod:`.hub`),
and the stream itself (:mod:`.stream`)."""
