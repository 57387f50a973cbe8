"""A user's crontab and /etc/crontab as apply files: environment lines, shells, %, MAILTO."""

from __future__ import annotations

from cronwheel.importers import crontab

from .support import OPTIONS, fixture, job, note, notes

USER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "APP_ENV": "production"}
MAIL_RULE = (
    "echo '[{conditions: [failure], channels: [{type: email, to: [ops@example.com]}]}]' "
    "| cronwheel notifications set - --job ops/{name}"
)


def test_user_crontab_jobs() -> None:
    result = crontab.convert(fixture("user.crontab"), OPTIONS)
    assert [j["name"] for j in result.jobs] == [
        "poll-queue", "backup", "mail", "backup-2", "manage-clearsessions", "printf",
    ]  # fmt: skip
    assert job(result, "poll-queue") == {
        "name": "poll-queue",
        "description": "crontab line 9: */15 * * * *  /usr/local/bin/poll-queue --batch 50",
        "schedule": "*/15 * * * *",
        "timezone": "Europe/Berlin",
        "target": {
            "type": "command",
            "argv": ["/usr/local/bin/poll-queue", "--batch", "50"],
            "env": USER_ENV,
        },
        "timeout_s": 86400.0,
        "labels": {"imported-from": "crontab"},
    }
    assert job(result, "backup")["target"]["argv"] == [
        "/bin/bash", "-c", "/srv/app/bin/backup.sh > /var/log/backup.log 2>&1",
    ]  # fmt: skip
    assert job(result, "backup")["schedule"] == "30 2 * * 1-5"
    assert job(result, "mail")["target"]["argv"] == [
        "/bin/bash",
        "-c",
        "printf '%s\\n' 'Good morning,' 'the report is attached.' | (\n"
        'mail -s "Daily report" team@example.com\n)',
    ]
    assert job(result, "backup-2")["target"]["argv"] == ["/srv/app/bin/backup.sh", "--monthly"]
    later = job(result, "manage-clearsessions")
    assert (later["timezone"], later["schedule"]) == ("America/New_York", "30 1 * * *")
    assert job(result, "printf")["target"]["argv"][2] == "/usr/bin/printf 'it is 100% done\\n'"


def test_user_crontab_report() -> None:
    result = crontab.convert(fixture("user.crontab"), OPTIONS)
    mailed = [("renamed",), ("notification",), ("notification",)]
    assert notes(result) == [
        ("file", None, "target"),
        ("file", None, "timeout"),
        *[("line 9", "poll-queue", kind) for (kind,) in mailed],
        ("line 10", "backup", "renamed"),
        ("line 10", "backup", "shell"),
        ("line 10", "backup", "notification"),
        ("line 10", "backup", "notification"),
        ("line 11", "mail", "renamed"),
        ("line 11", "mail", "stdin"),
        ("line 11", "mail", "notification"),
        ("line 11", "mail", "notification"),
        *[("line 12", "backup-2", kind) for (kind,) in mailed],
        ("line 13", None, "skipped"),
        ("line 17", "manage-clearsessions", "renamed"),
        ("line 17", "manage-clearsessions", "shell"),
        ("line 18", "printf", "renamed"),
        ("line 18", "printf", "shell"),
        ("line 19", None, "skipped"),
    ]
    rules = [n for n in result.notes if n.job == "backup" and n.action]
    assert [n.action for n in rules] == [MAIL_RULE.replace("{name}", "backup")]
    assert "MAILTO root: not an email address" in result.notes[3].message
    assert "@reboot" in next(n.message for n in result.notes if n.source == "line 13")
    assert "61 is out of range" in result.notes[-1].message
    assert note(result, "mail", "stdin").startswith("'%' fed 2 line(s) to standard input")
    assert "/bin/bash" in note(result, "backup", "shell")


def test_system_crontab_has_users() -> None:
    result = crontab.convert(fixture("system.crontab"), OPTIONS, system=True)
    assert [j["name"] for j in result.jobs] == [
        "run-parts-cron.hourly", "run-parts-cron.daily", "run-parts-cron.weekly", "php-cron",
    ]  # fmt: skip
    daily = job(result, "run-parts-cron.daily")["target"]
    assert daily["argv"] == [
        "/bin/sh", "-c", "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )",
    ]  # fmt: skip
    assert job(result, "php-cron")["target"]["argv"] == ["/usr/bin/php", "/var/www/cron.php"]
    assert job(result, "php-cron")["timezone"] == "UTC"
    assert notes(result)[:4] == [
        ("file", None, "target"),
        ("file", None, "timeout"),
        ("file", None, "timezone"),
        ("file", None, "notification"),
    ]
    assert "4 job(s) have no MAILTO" in result.notes[3].message
    assert (
        note(result, "php-cron", "dropped")
        == "ran as user 'www-data'; cronwheel runs commands as its command user"
    )
    assert [kind for _, name, kind in notes(result) if name == "run-parts-cron.weekly"] == [
        "renamed", "shell", "dropped",
    ]  # fmt: skip


def test_default_zone_replaces_the_assumption() -> None:
    berlin = OPTIONS.__class__(team="ops", now=OPTIONS.now, timezone="Europe/Berlin")
    result = crontab.convert("0 3 * * * /usr/bin/true\n", berlin)
    assert result.jobs[0]["timezone"] == "Europe/Berlin"
    assert ("file", None, "timezone") not in notes(result)


def test_unknown_cron_tz_is_reported() -> None:
    result = crontab.convert("CRON_TZ=Mars/Olympus\n0 3 * * * /usr/bin/true\n", OPTIONS)
    assert result.jobs[0]["timezone"] == "UTC"
    assert ("line 1", None, "timezone") in notes(result)
