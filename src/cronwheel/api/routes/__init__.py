"""The API's routers, one module each: jobs, runs, the schedule preview and the system endpoints
(:mod:`.jobs`), team secrets, tokens, notification rules, the audit log, run output, the interactive
docs and the dashboard. Routes are thin: validate at this boundary, call
:mod:`cronwheel.api.operations` or a service, answer."""
