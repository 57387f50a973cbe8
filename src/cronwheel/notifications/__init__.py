"""Notification rules and decisions, pure and below the store (which applies them inside its
transactions):

* :mod:`~cronwheel.notifications.rules`: rules per job and a team default (conditions, channels);
* :mod:`~cronwheel.notifications.decide`: when to notify, a pure function of (previous state, new
  state, rule): once per transition, not once per slot;
* :mod:`~cronwheel.notifications.message`: the notification, its stable id and renderings.

The store keeps rules, each job's state and the outbox (:mod:`cronwheel.store.sql.notifications`); the
notifier role (:mod:`cronwheel.notifier`) delivers.
"""
