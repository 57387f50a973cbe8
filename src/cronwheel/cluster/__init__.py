"""The cluster as the API shows it, read from the backends when asked: who is alive, leads and
holds which shard (:mod:`.status`), and the gauges read at each scrape of ``/metrics``
(:mod:`.gauges`)."""
