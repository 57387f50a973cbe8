"""What a node tells its operators: log lines as facts (:mod:`.logs`), the metrics they alert on
(:mod:`.metrics`) and the traces of runs (:mod:`.tracing`)."""
