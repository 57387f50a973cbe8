"""The REST API's bodies (pydantic v2) and the checks a body's schema cannot state: job
definitions and their outputs (:mod:`.jobs`), partial models for PATCH (:mod:`.partial`), fields a
caller may not set (:mod:`.fields`), cross-field checks (:mod:`.checks`), text both stores can hold
(:mod:`.storable`) and the list endpoints' query parameters (:mod:`.queries`)."""
