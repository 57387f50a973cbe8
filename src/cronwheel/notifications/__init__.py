"""Notifications and the dead-man's switch (issue #12 item 3).

* :mod:`~cronwheel.notifications.rules`: rules per job and a team default (conditions, channels);
* :mod:`~cronwheel.notifications.decide`: when to notify, a pure function of (previous state, new
  state, rule): once per transition, not once per slot;
* :mod:`~cronwheel.notifications.message`: the notification, its stable id and renderings;
* :mod:`~cronwheel.notifications.channels`: webhook (signed, SSRF-guarded), Slack, email (SMTP);
* :mod:`~cronwheel.notifications.notifier`: the loop that decides, watches for missed slots and
  delivers the outbox with retries (the leader's, as the sweeper).

The store keeps rules, each job's state and the outbox (:mod:`cronwheel.store.sql.notices`).
"""
