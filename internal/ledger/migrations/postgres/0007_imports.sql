-- allot ledger v7, PostgreSQL: episodes imported from an old system
-- (starter import). One row per imported old run: where it came from, its
-- old ID, the episode it became, a digest of the record (a later import of
-- the same old ID with other data is refused, the same data is skipped) and
-- when it was imported. Imported episodes have no ScheduledRun: this row is
-- what exempts them from the "every episode has its run" check.
CREATE TABLE imports (
    pipeline    TEXT COLLATE "C" NOT NULL,
    old_id      TEXT COLLATE "C" NOT NULL CHECK (old_id <> ''),
    episode_id  TEXT COLLATE "C" NOT NULL,
    source      TEXT             NOT NULL,
    digest      TEXT             NOT NULL,
    imported_at TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (pipeline, old_id),
    CONSTRAINT imports_episode_fk FOREIGN KEY (pipeline, episode_id) REFERENCES episodes (pipeline, episode_id)
);

-- One old run becomes one episode.
CREATE UNIQUE INDEX imports_episode_uniq ON imports (pipeline, episode_id);
