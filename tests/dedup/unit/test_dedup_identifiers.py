"""What tells "the same incident" from "the same kind of incident" in two titles, and which lines
a source shares: pure functions, checked on titles of the kinds real pools are made of."""

from __future__ import annotations

import pytest

from curation.dedup.boilerplate import MIN_ITEMS, MIN_SOURCE, CommonLines, common_lines
from curation.dedup.identifiers import distinction


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("Upgrade to Jetty 9.4.44", "Upgrade to Jetty 9.4.39", "different number: 9.4.44 vs 9.4.39"),
        ("Upgrade jackson-databind for CVE-2022-42003", "Upgrade jackson-databind for CVE-2020-36518", "different CVE"),
        ("Upgrade jackson-databind to 2.13.4.2", "Upgrade jackson-databind for CVE-2022-42003", "different target"),
        ("Fix javadoc errors in hadoop-tools", "Fix javadoc errors in hadoop-mapreduce", "different module"),
        ("TestDFSAdmin#testSetBalancerBandwidth fails", "TestDFSAdmin#testPrintTopology fails", "different code name"),
        ("Backport HADOOP-17371 to branch-3.2", "Backport HADOOP-17796 to branch-3.2", "different issue key"),
        ("www.example.com - Design is broken", "www.example.org - Design is broken", "different host"),
        ("fs.s3a.acl.default not applied", "fs.s3a.endpoint.region not applied", "different configuration key"),
        ("Dockerfile for CentOS 7", "Dockerfile for Debian", "one template, different target"),
        ("Support JDK 17 in the build", "[Umbrella] Support JDK 17 in the build", "different scope: tagged"),
        ("Remove Guava from hadoop-common", "Remove Guava", "only one names a module"),
        ("ABFS: retry on throttling", "ABFS: retry on throttling, follow-up", "different scope: follow-up"),
        ("[De] mailnews_preferences.xhtml: Typos", "[De] mailnews_using_mail.xhtml: Typos", "different file"),
        ("Intermittent tests/browser/browser_tours.js | timed out", "Intermittent tests/browser/browser_notification.js | timed out", "different file"),
        ("Remove probes expiring in 80: BROWSER_ATTRIBUTION_ERRORS", "Remove probes expiring in 80: search_counts_total", "different code name"),
        ('disallow "malayalam" unicode block from IDN domains', 'disallow "tibetan" unicode block from IDN domains', "one template, different target"),
    ],
)
def test_titles_of_the_same_kind_that_name_different_things_are_told_apart(a: str, b: str, kind: str) -> None:
    why = distinction(a, b)
    assert why is not None and kind in why
    assert distinction(b, a) is not None  # either way round


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # The same change for another branch is the same task.
        ("Backport HADOOP-18671 to branch-3.3", "Backport HADOOP-18671 to branch-3.2"),
        # One tag spelled two ways; a name spelled out in words.
        ("[JDK 13] Javadoc HTML5 support", "[JDK13] Support HTML5 Javadoc"),
        ("AWS AssumedRoleCredentialProvider needs ExternalId", "AWS AssumedRoleCredentialProvider needs external id"),
        # Reworded reports of one bug.
        ("Fix test TestServiceInterruptHandling.testRegisterAndRaise", "TestServiceInterruptHandling.testRegisterAndRaise failing intermittently"),
        # Headlines capitalise every word: a capital letter is not a name there, and words moved
        # around are not one template filled twice.
        ("Navy Jet Crashes Into Apartment Building", "US Navy Jet Crashes into Apartment Block"),
        ("Castro celebrates 86th birthday Monday", "Fidel Castro celebrates 86th birthday"),
        # An apostrophe is no quotation mark; one file named in both titles.
        ("Don't crash when the cache is empty", "Do not crash when the cache is empty"),
        ("Typo in hdfs-default.xml", "Typos in hdfs-default.xml"),
    ],
)
def test_titles_of_one_task_are_not_told_apart(a: str, b: str) -> None:
    assert distinction(a, b) is None


def test_lines_a_source_repeats_are_common_and_taken_out() -> None:
    form = "**Browser / Version**: Firefox {version}.0\n**Operating System**: Android\n**Steps to Reproduce**:\n{steps}"
    texts = [form.format(version=60 + number, steps=f"step {word} happens") for number, word in enumerate("abcdefghijklmnopqrstuvwxyz")]
    lines = common_lines(texts)
    # Numbers are masked, so every version line is one line; each report's own steps stay.
    assert lines.lines == {"browser / version : firefox <n>", "operating system : android", "steps to reproduce :"}
    rest, share = lines.distinctive(form.format(version=99, steps="The menu overlaps the page"))
    assert rest == "The menu overlaps the page" and 0.6 < share < 1


def test_a_small_source_or_a_rare_line_has_no_common_lines() -> None:
    assert common_lines(["Disk full on db-3\nsee runbook"] * (MIN_SOURCE - 1)).lines == frozenset()
    rare = ["shared footer"] * (MIN_ITEMS - 1) + [f"report {word}" for word in "abcdefghijklmnopqrstuvwxyz"]
    assert "shared footer" not in common_lines(rare).lines
    assert CommonLines().distinctive("anything\nat all") == ("anything\nat all", 0.0)
