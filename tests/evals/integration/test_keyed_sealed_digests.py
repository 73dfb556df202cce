"""Sealed digests are keyed: a release's manifest commits to its sealed items with HMAC-SHA256
under the eval's seal key, so knowing a sealed item's exact text does not let a reader confirm
it; `verify` checks everything with the key, and the dev split and both roots without it.
Releases written with plain sha256 sealed digests keep verifying."""

from __future__ import annotations

import json

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.content import content_digest, keyed_digest, merkle_root
from schemas.evals import Split
from schemas.release import HMAC_SHA256, SHA256, ExportRow, Release, ReleaseItem
from service.core.db import write_session
from service.evals.cli import verify_served
from service.evals.definitions import require_eval
from service.evals.releases import export_lines, manifest, verify_release
from tests.run_support import KEY, released_eval


def _rows(engine: Engine, release_id: int | None) -> list[ReleaseItem]:
    with Session(engine) as session:
        return list(session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release_id).order_by(col(ReleaseItem.item_id))).all())


def _check(engine: Engine, release_id: int | None, seal_key: bytes | None) -> tuple[list[str], int, list[str]]:
    """What `verify` finds on the database (with `seal_key`), how many sealed digests it left
    unchecked, and what the remote verify finds from the manifest and the dev export alone."""
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="ops")
        release = session.get(Release, release_id)
        assert release is not None
        report = verify_release(session=session, evaluation=evaluation, release=release, seal_key=seal_key)
        served = manifest(session=session, evaluation=evaluation, release=release)
        rows = [ExportRow.model_validate_json(line) for line in export_lines(session=session, evaluation=evaluation, release=release, split=Split.DEV)]
    return report.mismatches, report.sealed_unchecked, verify_served(served, rows)


def test_a_sealed_items_text_cannot_be_confirmed_from_the_manifest(engine: Engine) -> None:
    released = released_eval(engine)
    rows = _rows(engine, released.release.id)
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="ops")
        release = session.get(Release, released.release.id)
        assert release is not None
        document = manifest(session=session, evaluation=evaluation, release=release).model_dump_json()
    listed = json.loads(document)
    assert listed["sealed_digest"] == HMAC_SHA256 and released.sealed
    for row in rows:
        plain = content_digest(row.content)
        if row.split == Split.SEALED.value:
            # Someone holding the exact text computes its sha256: the manifest does not hold it.
            assert plain not in document and row.content_digest == keyed_digest(row.content, seal_key=KEY)
        else:
            assert row.content_digest == plain
    assert keyed_digest(rows[0].content, seal_key=b"g" * 32) != keyed_digest(rows[0].content, seal_key=KEY)


def test_verify_checks_keyed_releases_with_the_key_and_the_rest_without_it(engine: Engine) -> None:
    released = released_eval(engine)
    assert _check(engine, released.release.id, KEY) == ([], 0, [])
    # Without the key: nothing is wrong, the sealed digests are taken as recorded (they still make the root).
    assert _check(engine, released.release.id, None) == ([], len(released.sealed), [])
    mismatches, _, _ = _check(engine, released.release.id, b"w" * 32)
    assert len(mismatches) == len(released.sealed) and all("content digest" in line for line in mismatches)

    victim = next(row for row in _rows(engine, released.release.id) if row.split == Split.SEALED.value)
    with write_session(engine) as session:
        stored = session.get(ReleaseItem, victim.id)
        assert stored is not None
        stored.content = stored.content.replace('"title":"', '"title":"Tampered ', 1)
        session.add(stored)
        session.commit()
    mismatches, _, remote = _check(engine, released.release.id, KEY)
    assert [line for line in mismatches if line.startswith(f"item {victim.item_id}: content digest")] and remote == []


def test_releases_written_with_plain_sealed_digests_keep_verifying(engine: Engine) -> None:
    released = released_eval(engine)
    rows = _rows(engine, released.release.id)
    # A release as written before keyed digests: every digest the sha256 of its content.
    with write_session(engine) as session:
        for row in rows:
            stored = session.get(ReleaseItem, row.id)
            assert stored is not None
            stored.content_digest = content_digest(stored.content)
            session.add(stored)
        release = session.get(Release, released.release.id)
        assert release is not None
        release.sealed_digest = SHA256
        release.sealed_root = merkle_root((row.item_id, content_digest(row.content)) for row in rows if row.split == Split.SEALED.value)
        session.add(release)
        session.commit()
    assert _check(engine, released.release.id, KEY) == ([], 0, [])
    assert _check(engine, released.release.id, None) == ([], 0, [])
