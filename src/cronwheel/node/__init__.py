"""Running a node: its settings and roles (:mod:`.server`), the backends opened from URLs
(:mod:`.backends`), the clock anchored to the store's (:mod:`.timekeeping`), the embedded admin
token (:mod:`.admin_token`), the metrics endpoint of a node without an API (:mod:`.metrics_http`)
and the catalogue of every metric (:mod:`.metrics_catalog`). The top of the tree: it wires every
role and backend below it."""
