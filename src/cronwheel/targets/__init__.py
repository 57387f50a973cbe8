"""What a job's target may hold and reach, checked where a job is written and again where it runs:
the limits and checks of every target kind (:mod:`.checks`), the addresses a worker must never
connect to (:mod:`.ssrf`) and the Python functions a job may call (:mod:`.python`)."""
