"""A panel's view is built as its scrape lands, at most `hz` a second per panel (`ViewPacer`)."""

from __future__ import annotations

from pytest import approx

from mtpwatch.session.view_pacing import ViewPacer


def test_a_scrape_at_the_view_rate_is_built_as_it_lands() -> None:
    pacer = ViewPacer(2.0)
    for k in range(6):  # scrapes 0.5 s apart plus the scrape's own few ms: each is drawn at once
        now = k * 0.503
        pacer.mark([0])
        assert pacer.take(now) == [0]
        assert pacer.next_in(now) is None and not pacer.due


def test_scrapes_faster_than_the_view_rate_wait_for_it_and_coalesce() -> None:
    pacer = ViewPacer(2.0)
    pacer.mark([0])
    assert pacer.take(0.0) == [0]
    pacer.mark([0])  # 4 Hz: the next scrape lands a quarter second later
    assert pacer.take(0.25) == [] and pacer.due == {0}
    assert pacer.next_in(0.25) == approx(0.25)
    pacer.mark([0])  # another before it comes of age: still one view, from the newest page
    assert pacer.take(0.5) == [0] and not pacer.due


def test_panels_are_paced_apart_and_force_builds_every_due_one() -> None:
    pacer = ViewPacer(2.0)
    pacer.mark([0])
    assert pacer.take(0.0) == [0]
    pacer.mark([1])  # the other server's scrape does not wait for the first one's period
    assert pacer.take(0.2) == [1]
    pacer.mark([0, 1])
    assert pacer.take(0.3) == [] and pacer.next_in(0.3) == approx(0.2)
    assert pacer.take(0.3, force=True) == [0, 1]  # a window change or an unpause: at once
    assert pacer.wait(0, 0.3) == approx(0.5) and pacer.wait(2, 0.3) == 0.0
