"""Target kinds and what a job's target may hold and reach, checked where a job is written and
again where it runs: every kind in one module of its own, registered once (:mod:`.kinds`), the
limits and rules the kinds share (:mod:`.checks`), the values that may refer to a team secret
(:mod:`.values`), the addresses a worker must never connect to (:mod:`.ssrf`) and the Python
functions a job may call (:mod:`.python`)."""
