"""The REST API's bodies (pydantic v2) and the checks a body's schema cannot state: the building
blocks (:mod:`.base`), targets (:mod:`.targets`), policies (:mod:`.policies`), job definitions and
their outputs (:mod:`.jobs`), runs (:mod:`.runs`), the schedule preview (:mod:`.preview`), partial
models for PATCH (:mod:`.partial`), fields a caller may not set (:mod:`.fields`), cross-field checks
(:mod:`.checks`), text both stores can hold (:mod:`.storable`) and the list endpoints' query
parameters (:mod:`.queries`)."""
