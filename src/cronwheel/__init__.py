"""cronwheel: a distributed cron job scheduler."""

__version__ = "0.1.0"
