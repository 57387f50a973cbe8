"""Who is calling the API: the dependency every route takes to learn its caller (:mod:`.auth`), the
operator's access settings (:mod:`.access`), refused credentials (:mod:`.failures`), and what of
the callers' refusals the audit log records (:mod:`.auditing`, :mod:`.sampling`)."""
