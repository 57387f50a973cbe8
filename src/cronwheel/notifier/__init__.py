"""The notifier role: the leader's loop that decides from the notification inbox, watches for
missed slots (the dead-man's switch) and delivers the outbox with retries (:mod:`.loop`), through
the channels: webhook (signed, SSRF-guarded), Slack and email (:mod:`.channels`). The rules it
applies are pure and live below the store, in :mod:`cronwheel.notifications`."""
