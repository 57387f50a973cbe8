"""What a request must be before any route sees it, and what every answer carries: the served
host (:mod:`.host`), size and concurrency limits (:mod:`.limits`), the per-caller rate limit
(:mod:`.rate`), ``Allow`` and ``OPTIONS`` (:mod:`.methods`), ``nosniff`` (:mod:`.nosniff`) and the
request counter (:mod:`.observe`)."""
